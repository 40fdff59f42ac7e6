"""The Commands reference page equals what the commands print.

tools/docs_commands.py generates docs/reference/commands.md's flag
tables from the commands' flag definitions at docs build; each row must
be what `--helpfull` (absl's commands) or `--help` (keras-slim-cluster)
prints for that flag, and every flag it prints must have a row.
"""

import contextlib
import importlib.util
import io
import pathlib
import re

import pytest

from keras_slim import cluster

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load_hook():
    spec = importlib.util.spec_from_file_location(
        "docs_commands", ROOT / "tools" / "docs_commands.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


HOOK = _load_hook()
FLAG = re.compile(r"^  (-\w,)?(--(?:\[no\])?\w+): (.*)$")


def helpfull(module):
    """`{flag: (default, help)}` from the command's `--helpfull`."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as done:
        importlib.import_module(module).main(["--helpfull"])
    assert done.value.code == 0
    entries, current = {}, None
    for line in out.getvalue().splitlines():
        match = FLAG.match(line)
        if match:
            current = [(match.group(1) or "") + match.group(2), match.group(3)]
            entries[current[0]] = current
        elif current and line.startswith("      "):
            current[1] += " " + line.strip()
        else:
            current = None
    parsed = {}
    for name, text in entries.values():
        default = re.search(r" \(default: (.*)\)$", text)
        if default:
            text = text[: default.start()]
        parsed[name] = (default.group(1) if default else "", text)
    return parsed


@pytest.mark.parametrize("command, module", HOOK.ABSL_COMMANDS)
def test_each_flag_row_is_what_helpfull_prints(command, module):
    parser = importlib.import_module(module).parser()
    rows = {
        name: (default, text) for name, default, text in HOOK.absl_rows(parser)
    }
    printed = helpfull(module)
    assert len(printed) > 5
    assert sorted(rows) == sorted(printed)
    # Compared without whitespace: absl's wrapping breaks a long word
    # (the list of nets) across lines.
    for name, (default, text) in printed.items():
        assert rows[name][0] == default, name
        assert "".join(rows[name][1].split()) == "".join(text.split()), name


def test_the_cluster_rows_are_what_help_prints(capsys):
    with pytest.raises(SystemExit):
        cluster.main(["--help"], prog="keras-slim-cluster")
    printed = " ".join(capsys.readouterr().out.split())
    rows = HOOK.argparse_rows(cluster.command_parser())
    assert [r[0] for r in rows] == ["--workers", "--ps", "command"]
    for name, default, text in rows:
        assert text and text in printed, name
        assert not default or f"(default: {default})" in text


def test_the_page_has_every_command_and_row():
    page = HOOK.markdown()
    commands = HOOK.commands()
    assert [c[0] for c in commands] == [
        "keras-slim-train",
        "keras-slim-eval",
        "keras-slim-export",
        "keras-slim-cluster",
    ]
    for command, _, rows in commands:
        assert f"## {command}\n" in page
        for name, _, _ in rows:
            assert f"| `{name}` |" in page, (command, name)
    # The page's marker is where the hook writes them.
    source = (ROOT / "docs" / HOOK.PAGE).read_text()
    assert source.count(HOOK.MARKER) == 1
