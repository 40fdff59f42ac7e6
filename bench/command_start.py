"""A command's start, at two revisions, side by side in one run.

Times `python -m keras_slim.image.train_image_classifier --help` (what
every `keras-slim-train` pays before its first step: Python, TensorFlow,
Keras and keras_slim's imports) at a baseline git revision and at the
working tree, in alternating fresh processes, and prints for each the
median CPU (user + system) and wall seconds, and the ratio working tree /
baseline of CPU, run by run (median and quartiles).

Run: `python bench/command_start.py --baseline e3e3b57 [--rounds 9]`.
"""

import argparse
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import _common  # noqa: E402
import _worktree  # noqa: E402


def start(tree):
    """`(cpu seconds, wall seconds)` of one command start in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "keras_slim.image.train_image_classifier"]
        + ["--help"],
        cwd=tree,
        env=dict(os.environ, PYTHONPATH=str(tree)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=300,
    )
    wall = time.monotonic() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (
        after.ru_stime - before.ru_stime
    )
    return cpu, wall


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a git revision")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args(argv)
    with _worktree.baseline(args.baseline) as before:
        results = {"baseline": [], "working tree": []}
        for round_ in range(args.rounds):
            trees = [("baseline", before), ("working tree", ROOT)]
            for label, tree in trees[:: 1 if round_ % 2 == 0 else -1]:
                results[label].append(start(tree))
    print(
        f"keras-slim-train --help, baseline {args.baseline} vs the working "
        f"tree: {args.rounds} alternating fresh processes each"
    )
    print()
    print("| | CPU s (median) | wall s (median) |")
    print("|---|---|---|")
    for label, runs in results.items():
        cpu = statistics.median(c for c, _ in runs)
        wall = statistics.median(w for _, w in runs)
        print(f"| {label} | {cpu:.2f} | {wall:.2f} |")
    ratios = [
        a[0] / b[0]
        for a, b in zip(results["working tree"], results["baseline"])
    ]
    print()
    print(f"CPU, working tree / baseline: {_common.summary(ratios)}")


if __name__ == "__main__":
    main()
