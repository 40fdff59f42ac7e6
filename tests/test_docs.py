"""The docs site's pages run: every ```python block, in order, per page.

Each page runs in a fresh interpreter (a page may set up logical devices
before TensorFlow starts), in a temporary working directory. The demo of
`make demo` runs too, shortened.
"""

import os
import pathlib
import re
import subprocess
import sys
import types

import pytest

pytestmark = pytest.mark.prestarted  # tests/zygote.py

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)


FIRST = "<!-- docs-test: run first -->\n"


def python_blocks(page):
    """The page's ```python blocks in order, those marked
    `<!-- docs-test: run first -->` (a setup a reader needs last) first."""
    text = (DOCS / page).read_text()
    blocks = [(m.start(), m.group(1)) for m in BLOCK.finditer(text)]
    first = [b for start, b in blocks if text[:start].endswith(FIRST)]
    return first + [
        b for start, b in blocks if not text[:start].endswith(FIRST)
    ]


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


def bare_env(**values):
    """A user's environment: `values`, and the test run's `PYTHONPATH`
    when it has one (a git worktree's code, not the installed one's)."""
    if os.environ.get("PYTHONPATH"):
        values["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return values


def run_python(args, cwd, timeout=300, **env):
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=bare_env(TF_CPP_MIN_LOG_LEVEL="3", PATH="/usr/bin:/bin", **env),
    )


# A page that picks Keras's backend in its code, before importing Keras.
BACKEND = re.compile(
    r'^os\.environ\["KERAS_BACKEND"\] = "(\w+)"$', re.MULTILINE
)


def page_env(code):
    """The environment a page's code runs with: the backend it picks, as
    well. The suite's prestarted interpreters (tests/zygote.py) have
    imported Keras already, on the backend their environment names."""
    backend = BACKEND.search(code)
    return {"KERAS_BACKEND": backend.group(1)} if backend else {}


def test_every_tutorial_has_code():
    tutorials = {p.name for p in (DOCS / "tutorials").glob("*.md")}
    assert tutorials
    assert {f"tutorials/{t}" for t in tutorials} <= set(PAGES)
    assert "index.md" in PAGES


@pytest.mark.parametrize("page", PAGES)
def test_page_runs(page, tmp_path):
    script = tmp_path / "page.py"
    code = "\n".join(python_blocks(page))
    script.write_text(code)
    result = run_python([str(script)], cwd=tmp_path, **page_env(code))
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


SH_BLOCK = re.compile(r"^```sh\n(.*?)^```$", re.MULTILINE | re.DOTALL)
# What the test adds to TF-Slim's README commands, as the guide says.
SHORT = {
    "keras-slim-train": " --max_number_of_steps=1 --batch_size=2"
    " --train_image_size=107 --nosummarize_activations"
    " --nosummarize_variables",
    "keras-slim-eval": " --batch_size=2 --eval_image_size=107",
}


def _readme_data(root, split, count):
    """Small data in TF-Slim's ImageNet layout (`split`), and its train
    split in the flowers layout."""
    import numpy as np

    from keras_slim.image import datasets

    rng = np.random.default_rng(0 if split == "train" else 1)
    images = rng.integers(0, 256, (count, 40, 40, 3), dtype=np.uint8)
    datasets.write_dataset(
        images,
        rng.integers(1, 1001, count),  # ImageNet's 1..1000
        root / "imagenet",
        "imagenet",
        split,
        shards=2,
        image_format="jpeg",
    )
    if split == "train":
        datasets.write_dataset(
            images,
            np.arange(count) % 5,
            root / "flowers",
            "flowers",
            split,
            class_names=["daisy", "dandelion", "roses", "sunflowers", "tulips"],
        )


def sh_blocks(section):
    """The ```sh blocks of a `### ` section of the migration guide."""
    text = (DOCS / "tutorials" / "migrating.md").read_text()
    body = text.split(f"\n### {section}\n", 1)[1]
    body = re.split(r"^#{1,3} ", body, maxsplit=1, flags=re.MULTILINE)[0]
    return SH_BLOCK.findall(body)


def start_sh(block, tmp_path, short):
    """Starts a block in bash, `/tmp/` as `tmp_path`, `short`'s flags of
    its command appended; returns `(script, process)`."""
    script = block.replace("/tmp/", f"{tmp_path}/").rstrip()
    command = next(c for c in short if c in script)
    bin_dir = pathlib.Path(sys.executable).parent
    return script, subprocess.Popen(
        ["bash", "-euc", script + short[command]],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=bare_env(PATH=f"{bin_dir}:/usr/bin:/bin", HOME=str(tmp_path)),
    )


def finish_all(started):
    """Waits for the started blocks; each must succeed. Returns their
    outputs (`stdout`, `stderr`) in order."""
    try:
        done = []
        for script, process in started:
            stdout, stderr = process.communicate(timeout=300)
            assert process.returncode == 0, script + stderr[-3000:]
            done.append(types.SimpleNamespace(stdout=stdout, stderr=stderr))
        return done
    finally:
        for _, process in started:
            process.kill()


def test_tf_slim_readme_commands_run_as_written(tmp_path):
    """The migration guide's ```sh blocks: TF-Slim's README commands (train
    from scratch, fine-tune, evaluate) with the script's name changed, run
    in order on TF-Slim's layouts, only made short."""
    blocks = sh_blocks("TF-Slim's README commands")
    assert len(blocks) == 3
    # Only train splits while the two trainings run: each then skips the
    # held-out evaluation at its end (another trace of inception_v3, which
    # nothing here checks; it says "No held-out accuracy"). The
    # evaluation's validation split is written before it starts.
    _readme_data(tmp_path, "train", 6)
    # Training first; the fine-tuning and the evaluation both only read
    # its checkpoint, so they run at the same time.
    (train,) = finish_all([start_sh(blocks[0], tmp_path, SHORT)])
    _readme_data(tmp_path, "validation", 4)
    fine_tune, evaluate = finish_all(
        [start_sh(block, tmp_path, SHORT) for block in blocks[1:]]
    )
    assert "Saved checkpoint" in train.stdout
    for training in (train, fine_tune):
        assert "No held-out accuracy at the end" in training.stdout
    assert (tmp_path / "train_logs" / "checkpoint").exists()
    # The logits (1001 ImageNet classes, 5 flowers) are excluded, the rest
    # restored; only the logits are trained.
    assert "Warm start from" in fine_tune.stdout
    assert " 0 missing, 0 mismatched" in fine_tune.stdout
    assert (
        tmp_path / "flowers-models" / "inception_v3" / "checkpoint"
    ).exists()
    assert "eval/Accuracy" in evaluate.stdout
    assert "(4 images)" in evaluate.stdout


# What the test adds to TF-Slim's scripts' commands, as the guide says.
SHORT_SCRIPTS = {
    "keras-slim-train": " --max_number_of_steps=1 --batch_size=2",
    "keras-slim-eval": "",
}


def _scripts_data(root, split, count):
    """Small data in TF-Slim's mnist and cifar10 layouts (`split`)."""
    import numpy as np

    from keras_slim.image import datasets

    rng = np.random.default_rng(0 if split == "train" else 1)
    for name, shape in (("mnist", (28, 28, 1)), ("cifar10", (32, 32, 3))):
        datasets.write_dataset(
            rng.integers(0, 256, (count, *shape), dtype=np.uint8),
            np.arange(count) % 10,
            root / name,
            name,
            split,
        )


def test_tf_slim_scripts_run_as_written(tmp_path):
    """The migration guide's TF-Slim scripts (lenet on MNIST, cifarnet on
    CIFAR-10): both trainings at once, then both evaluations, each on
    its checkpoint."""
    blocks = sh_blocks("TF-Slim's scripts")
    assert len(blocks) == 4
    trains = [b for b in blocks if "keras-slim-train" in b]
    evals = [b for b in blocks if "keras-slim-eval" in b]
    assert len(trains) == len(evals) == 2
    # The test splits after the trainings, as for the README's commands:
    # no held-out evaluation at the end of training.
    _scripts_data(tmp_path, "train", 6)
    trained = finish_all([start_sh(b, tmp_path, SHORT_SCRIPTS) for b in trains])
    _scripts_data(tmp_path, "test", 4)
    evaluated = finish_all(
        [start_sh(b, tmp_path, SHORT_SCRIPTS) for b in evals]
    )
    for model, train, evaluate in zip(
        ("lenet", "cifarnet"), trained, evaluated
    ):
        train_dir = tmp_path / f"{model}-model"
        assert f"Saved checkpoint {train_dir}/model.ckpt-1" in train.stdout
        assert (train_dir / "checkpoint").exists()
        assert "global step 1: eval/Accuracy = " in evaluate.stdout
        assert "(4 images)" in evaluate.stdout
