"""keras_slim's speed at two revisions, side by side in one run.

Runs `SlimModel.fit` and `keras_slim.train` of bench/vs_tf_slim.py (the
same models, policy, services and timing) at a baseline git revision and
at the working tree, both in each round (which goes first alternates),
each in a fresh process that imports that revision's package and bench.
Each process runs each variant `--repeats` times; the MLP times 3000
steps, not 300 (its 300 steps last 30 ms). Prints the medians of steps/s
over all runs and the ratio after / before, the figure a refactor must
keep within noise.

Run: `python bench/revisions.py --baseline a75fcff [--rounds 5]
[--model MLP]`.
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

CHILD = """
import json, logging, os, sys, tempfile
sys.path[:0] = [{bench!r}, {root!r}]
import keras
import _common
import vs_tf_slim
log = logging.getLogger("keras_slim")
log.addHandler(logging.StreamHandler(open(os.devnull, "w")))
log.setLevel(logging.INFO)
log.propagate = False
name = {name!r}
# A small model's 300 steps take 30 ms, too short to time on a shared
# machine: the MLP runs 10x longer here.
vs_tf_slim.TIMED = {timed}
data = _common.dataset(_common.MODELS[name][0])
rates = {{}}
for variant in ("SlimModel.fit", "keras_slim.train"):
    rates[variant] = []
    for _ in range({repeats}):
        with tempfile.TemporaryDirectory(dir={shm!r}) as logdir:
            rates[variant].append(
                vs_tf_slim.VARIANTS[variant](name, data, logdir)
            )
        keras.backend.clear_session()
print(json.dumps(rates))
"""


def run(tree, name, shm, repeats):
    """The two variants' steps/s at the revision checked out in `tree`."""
    code = CHILD.format(
        bench=str(tree / "bench"),
        root=str(tree),
        name=name,
        shm=shm,
        repeats=repeats,
        timed=3000 if name.startswith("MLP") else 300,
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tempfile.gettempdir(),
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if result.returncode != 0:
        raise RuntimeError(f"{tree} {name}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a git revision")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per process and round"
    )
    parser.add_argument(
        "--model", default="", help="only the models whose name has this"
    )
    args = parser.parse_args(argv)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    sys.path.insert(0, str(ROOT / "bench"))
    import _worktree

    with _worktree.baseline(args.baseline) as before:
        _compare(before, args, shm)


def _compare(before, args, shm):
    sys.path.insert(0, str(ROOT / "bench"))
    import _common

    print(
        f"baseline {args.baseline} vs the working tree; steps/s, medians "
        f"of {args.rounds} alternating rounds x {args.repeats} runs"
    )
    print()
    print(
        "| model | variant | baseline | working tree | working tree / "
        "baseline |"
    )
    print("|---|---|---|---|---|")
    for name in _common.MODELS:
        if args.model not in name:
            continue
        results = {"baseline": [], "working tree": []}
        for round_ in range(args.rounds):
            # Which goes first alternates, so neither gains from the order.
            trees = [("baseline", before), ("working tree", ROOT)]
            for label, tree in trees[:: 1 if round_ % 2 == 0 else -1]:
                results[label].append(run(tree, name, shm, args.repeats))
        for variant in ("SlimModel.fit", "keras_slim.train"):
            b = statistics.median(
                x for r in results["baseline"] for x in r[variant]
            )
            a = statistics.median(
                x for r in results["working tree"] for x in r[variant]
            )
            print(
                f"| {name} | {variant} | {b:.1f} | {a:.1f} | {a / b:.3f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
