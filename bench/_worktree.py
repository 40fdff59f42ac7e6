"""A git revision checked out beside the working tree, for the scripts
that compare a baseline with the working tree (revisions.py,
command_start.py). No TensorFlow import."""

import contextlib
import pathlib
import subprocess
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def baseline(revision):
    """Checks out `revision` in a temporary git worktree; yields its path
    and removes it after.

    Args:
        revision: A git revision of this repository.

    Example:
    ```python
    with baseline("e3e3b57") as tree:
        subprocess.run([sys.executable, "-c", "..."], cwd=tree)
    ```
    """
    with tempfile.TemporaryDirectory() as parent:
        tree = pathlib.Path(parent) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(tree), revision],
            cwd=ROOT,
            check=True,
            capture_output=True,
        )
        try:
            yield tree
        finally:
            subprocess.run(
                ["git", "worktree", "remove", "--force", str(tree)],
                cwd=ROOT,
                capture_output=True,
            )
