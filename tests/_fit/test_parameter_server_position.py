"""No batch lost or repeated under parameter servers, across a coordinator
killed with SIGKILL and restarted.

One local cluster (2 workers, 1 parameter server, real gRPC servers in
one process) serves every coordinator of the test, each a process of
tests/scripts/ps_position.py, whose final weights are the exact sum of the
batches it consumed, in any order: equal weights mean the same batches,
each once.
"""

import os
import pathlib
import sys

import numpy as np
import pytest

from keras_slim.cluster import LocalCluster
from tests.processes import reaching
from tests.processes import watched

SCRIPT = pathlib.Path(__file__).parent.parent / "scripts" / "ps_position.py"
sys.path.insert(0, str(SCRIPT.parent))
import ps_position  # noqa: E402

pytestmark = pytest.mark.prestarted  # tests/zygote.py


def coordinator(cluster, logdir, out, epochs, kill_at=None, timeout=120):
    """Runs one coordinator on `cluster`; kills it (SIGKILL) once it
    prints a global step of at least `kill_at` (a watchdog kills it after
    `timeout` seconds).

    Returns:
        The last step it printed when killed, else `None` (it finished).
    """
    env = dict(
        os.environ,
        TF_CONFIG=cluster.tf_config("chief", 0),
        GRPC_FAIL_FAST="use_caller",
        TF_CPP_MIN_LOG_LEVEL="3",
        PYTHONUNBUFFERED="1",
    )
    result = watched(
        [sys.executable, str(SCRIPT), str(logdir), str(out)]
        + ["--epochs", str(epochs)],
        env=env,
        timeout=timeout,
        signal_when=reaching(kill_at),
    )
    steps = result.steps()
    if result.killed and result.signalled:
        return steps[-1]
    result.check(0)
    return None


def weights(path):
    with np.load(path) as data:
        return data["w"], int(data["step"])


def test_killed_and_continued_coordinators_consume_each_batch_once(
    tmp_path,
):
    per_epoch = ps_position.STEPS_PER_EPOCH
    rng = np.random.default_rng()
    # Only coordinators are killed: the servers share one process.
    with LocalCluster(workers=2, ps=1, one_process=True) as cluster:
        # A straight run of 4 epochs.
        coordinator(cluster, tmp_path / "straight", tmp_path / "s.npz", 4)
        # A run of 2 epochs, continued to 4, killed in epoch 3 or 4 after
        # at least one checkpoint of its own, and rerun.
        logdir, out = tmp_path / "chain", tmp_path / "c.npz"
        coordinator(cluster, logdir, tmp_path / "half.npz", 2)
        kill_at = int(rng.integers(2 * per_epoch + 6, 4 * per_epoch - 2))
        killed = coordinator(cluster, logdir, out, 4, kill_at=kill_at)
        assert killed is not None, f"not killed at step {kill_at}"
        coordinator(cluster, logdir, out, 4)
    half, half_step = weights(tmp_path / "half.npz")
    straight, step = weights(tmp_path / "s.npz")
    resumed, resumed_step = weights(out)
    assert half_step == 2 * per_epoch
    assert step == resumed_step == 4 * per_epoch
    # Each batch's contribution is at least 1/32 on every feature.
    np.testing.assert_array_equal(half, ps_position.expected(2 * per_epoch))
    np.testing.assert_array_equal(straight, ps_position.expected(4 * per_epoch))
    np.testing.assert_array_equal(
        resumed, straight, err_msg=f"killed at {killed}"
    )
