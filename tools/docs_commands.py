"""mkdocs hook: the Commands reference, generated from the flags.

`docs/reference/commands.md` holds `<!-- commands -->`; at build time it
becomes every flag of keras-slim-train, keras-slim-eval and
keras-slim-export (absl's definitions: `parser().flags()`, what
`--helpfull` prints) and every argument of keras-slim-cluster
(argparse's), each with its default and its help, so the page cannot
drift from the commands. tests/test_docs.py checks the rows against
each command's `--helpfull`.
"""

import argparse
import html
import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # the commands import it

MARKER = "<!-- commands -->"
PAGE = "reference/commands.md"

#: (command, module with `parser()`): the absl commands.
ABSL_COMMANDS = (
    ("keras-slim-train", "keras_slim.image.train_image_classifier"),
    ("keras-slim-eval", "keras_slim.image.eval_image_classifier"),
    ("keras-slim-export", "keras_slim.image.export_inference_graph"),
)


def absl_rows(parser):
    """`[(flag, default, help)]` of a `FlagParser`, as `--helpfull` shows
    them: `--[no]name` for a boolean, absl's default text ("" for none)."""
    rows = []
    for flag in parser.flags():
        name = f"--[no]{flag.name}" if flag.boolean else f"--{flag.name}"
        if flag.short_name:
            name = f"-{flag.short_name},{name}"
        default = "" if flag.default in (None, [], {}) else flag.default_as_str
        rows.append((name, default, " ".join(flag.help.split())))
    return rows


def argparse_rows(parser):
    """`[(argument, default, help)]` of an `argparse.ArgumentParser`, its
    `-h` aside."""
    rows = []
    for action in parser._actions:  # argparse's list of its arguments
        if "--help" in action.option_strings:
            continue
        name = ", ".join(action.option_strings) or action.dest
        default = (
            ""
            if action.default in (None, argparse.SUPPRESS)
            else repr(action.default)
        )
        text = (action.help or "") % {"default": action.default}
        rows.append((name, default, " ".join(text.split())))
    return rows


def commands():
    """`[(command, description, rows)]`, the four commands in order."""
    from keras_slim import cluster

    result = []
    for command, module in ABSL_COMMANDS:
        parser = importlib.import_module(module).parser()
        result.append((command, parser.description, absl_rows(parser)))
    parser = cluster.command_parser()
    result.append(
        ("keras-slim-cluster", parser.description, argparse_rows(parser))
    )
    return result


def _cell(text):
    """Text as one table cell: HTML-escaped, pipes and Markdown's
    emphasis characters kept literal."""
    text = html.escape(text, quote=False)
    for character in "\\`*_[]|":
        text = text.replace(character, "\\" + character)
    return text


def markdown():
    """The generated part of the page."""
    lines = []
    for command, description, rows in commands():
        lines += [f"## {command}", "", _cell(description.strip()), ""]
        lines += ["| flag | default | what it does |", "|---|---|---|"]
        for name, default, text in rows:
            shown = f"`{default}`" if default else ""
            lines.append(f"| `{name}` | {shown} | {_cell(text)} |")
        lines.append("")
    return "\n".join(lines)


def on_page_markdown(text, page, **kwargs):
    """mkdocs' hook: fills the Commands page."""
    if page.file.src_uri != PAGE:
        return text
    return text.replace(MARKER, markdown())
