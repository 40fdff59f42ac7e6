"""Exact resume per worker under MultiWorkerMirroredStrategy.

Two workers of a `keras_slim.cluster.LocalCluster` (real processes, gRPC)
each read their share of a stream shuffled each epoch and augmented with
stateless ops seeded per batch, into a model with `Dropout` and Adam's
moving averages (tests/scripts/multi_worker_resume.py). Two cluster
launches serve both cases:

1. a straight run to 24 steps (4 epochs); a run to 12 (2 epochs); a run
   to 24 in which one worker, chosen at random, kills itself with SIGKILL
   at a random step after the first checkpoint (at a random delay, so the
   kill lands in a step, between calls or in a save);
2. the cluster rerun (all processes new): the 12-step run continued to
   24, and the killed run rerun to 24.

Each must end with the straight run's checkpoint: every variable, slot
and moving average within 1e-6.
"""

import json
import pathlib
import random
import signal
import sys
import time

import pytest
import tensorflow as tf

from keras_slim.cluster import LocalCluster
from tests._fit.test_position import assert_same_checkpoints as same_checkpoints
from tests.helpers import once_per_session

pytestmark = pytest.mark.prestarted  # tests/zygote.py

SCRIPT = str(
    pathlib.Path(__file__).parent.parent / "scripts" / "multi_worker_resume.py"
)
WARNING = "input position of this fit cannot be saved"


def launch(root, phases, env=None):
    """Runs the script's `phases` on a new cluster of two workers; returns
    the runs and the seconds they took."""
    start = time.monotonic()
    with LocalCluster(workers=2, env=env) as cluster:
        runs = cluster.run(
            [sys.executable, SCRIPT, str(root), *phases], timeout=300
        )
    return runs, time.monotonic() - start


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    def make():
        root = tmp_path_factory.mktemp("mwms_resume")
        choice = random.Random()
        seed = choice.randrange(2**32)
        choice.seed(seed)
        kill = {
            "KILL_TASK": str(choice.randrange(2)),
            "KILL_AT": str(choice.randrange(6, 22)),
            "KILL_DELAY": f"{choice.uniform(0.0, 0.05):.3f}",
        }
        first, first_secs = launch(
            root, ["straight:4", "half:2", "killed:4"], env=kill
        )
        second, second_secs = launch(root, ["half:4", "killed:4"])
        return {
            "root": root,
            "kill": dict(kill, seed=seed),
            "first": [(r.returncode, r.stderr) for r in first],
            "second": [(r.returncode, r.stderr) for r in second],
            "secs": (first_secs, second_secs),
        }

    return once_per_session(tmp_path_factory, "multi_worker_resume", make)


def started(root, name):
    return [
        json.loads((root / f"start-{name}-{task}.json").read_text())
        for task in range(2)
    ]


def assert_same_checkpoints(a, b):
    """Every value within 1e-6 of the straight run's."""
    same_checkpoints(a, b, rtol=0, atol=1e-6)


def test_a_run_continued_by_a_rerun_equals_a_straight_run(runs):
    root = runs["root"]
    killed_task = int(runs["kill"]["KILL_TASK"])
    codes = [code for code, _ in runs["first"]]
    # The killed worker's status; the cluster killed the other one.
    assert codes[killed_task] == -signal.SIGKILL, runs["first"][killed_task]
    for code, stderr in runs["second"]:
        assert code == 0, stderr[-3000:]
        assert WARNING not in stderr
    assert WARNING not in runs["first"][0][1]
    assert started(root, "half") == [12, 12]
    assert_same_checkpoints(root / "straight", root / "half")
    # The other worker saved its own position at each of the chief's steps.
    chief = sorted(
        p.name for p in (root / "straight").glob("model.ckpt-*.index")
    )
    worker = sorted(
        p.name.replace("input", "model")
        for p in (root / "straight" / "input_worker_1").glob("*.index")
    )
    assert (
        chief
        == worker
        == [
            f"model.ckpt-{s}.index"
            for s in sorted([5, 10, 15, 20, 24], key=str)
        ]
    )


def test_a_worker_killed_at_random_then_a_rerun_equals_a_straight_run(
    runs,
):
    root = runs["root"]
    resumed = started(root, "killed")
    # A checkpoint before the kill (it lands at or after KILL_AT).
    assert resumed[0] == resumed[1] in (5, 10, 15, 20), runs["kill"]
    assert resumed[0] >= int(runs["kill"]["KILL_AT"]) - 5, runs["kill"]
    assert tf.train.latest_checkpoint(root / "killed").endswith("-24")
    assert_same_checkpoints(root / "straight", root / "killed")
    print(f"kill: {runs['kill']}; launches took {runs['secs']} s")
