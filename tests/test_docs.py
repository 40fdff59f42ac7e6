"""The docs site's pages run: every ```python block, in order, per page.

Each page runs in a fresh interpreter (a page may set up logical devices
before TensorFlow starts), in a temporary working directory. The demo of
`make demo` runs too, shortened.
"""

import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


def python_blocks(page):
    return BLOCK.findall((DOCS / page).read_text())


# Pages with code; the API pages' code is in docstrings, not run here.
PAGES = sorted(
    page
    for page in (
        p.relative_to(DOCS).as_posix()
        for p in DOCS.rglob("*.md")
        if p.parent.name != "api"
    )
    if python_blocks(page)
)


def run_python(args, cwd, timeout=300):
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"},
    )


def test_every_tutorial_has_code():
    tutorials = {p.name for p in (DOCS / "tutorials").glob("*.md")}
    assert tutorials
    assert {f"tutorials/{t}" for t in tutorials} <= set(PAGES)
    assert "index.md" in PAGES


@pytest.mark.parametrize("page", PAGES)
def test_page_runs(page, tmp_path):
    script = tmp_path / "page.py"
    script.write_text("\n".join(python_blocks(page)))
    result = run_python([str(script)], cwd=tmp_path)
    assert result.returncode == 0, f"{page}:\n{result.stderr[-4000:]}"


def test_demo_runs(tmp_path):
    demo = ROOT / "examples" / "policy_demo.py"
    result = run_python([str(demo), "--epochs", "3"], cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr[-4000:]
    assert "max |w(1 device) - w(2 clones)|" in result.stdout
    assert "LossTensor is inf or nan" in result.stdout
    assert "every weight still finite: True" in result.stdout


def test_readme_runs(tmp_path):
    blocks = BLOCK.findall((ROOT / "README.md").read_text())
    assert blocks
    script = tmp_path / "readme.py"
    script.write_text("\n".join(blocks))
    result = run_python([str(script)], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    losses = eval(result.stdout.strip().splitlines()[-1])  # the printed list
    assert losses[0] < 1.0  # chance for 2 classes is ln 2 = 0.69
    assert losses[-1] < 0.5 * losses[0]
