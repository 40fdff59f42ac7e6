"""Synchronous steps over parameter servers with backup workers.

The aggregation and the scheduling are tested on the host with a fake
coordinator; tests/scripts/sync_replicas_train.py runs real clusters
(gRPC servers in their own processes): one against a one-device
reference, one with a worker stopped while training goes on.
"""

import json
import os
import pathlib
import subprocess
import sys
import threading
import types

import numpy as np
import pytest

from keras_slim import _strategy
from keras_slim._fit import sync_replicas
from tests.helpers import once_per_session

pytestmark = pytest.mark.prestarted  # tests/zygote.py

SCRIPT = str(
    pathlib.Path(__file__).parent.parent / "scripts" / "sync_replicas_train.py"
)


# -- The aggregator ------------------------------------------------------


def test_the_first_r_fresh_gradients_are_averaged():
    aggregator = sync_replicas.Aggregator(2)
    aggregator.start(step=7)
    assert aggregator.offer(7, [np.array([1.0, 2.0])], 0.5)
    assert not aggregator.offer(6, [np.array([100.0, 100.0])], 9.0)  # stale
    assert aggregator.offer(7, [np.array([3.0, 6.0])], 0.25)
    assert not aggregator.offer(7, [np.array([50.0, 50.0])], 9.0)  # 3rd
    grads, loss = aggregator.take()
    np.testing.assert_allclose(grads[0], [2.0, 4.0])
    assert loss == pytest.approx(0.375)
    assert (aggregator.used, aggregator.dropped) == (2, 2)


def test_taking_before_r_gradients_is_an_error():
    aggregator = sync_replicas.Aggregator(3)
    aggregator.start(step=0)
    aggregator.offer(0, [np.zeros(1)], 0.0)
    with pytest.raises(RuntimeError, match="needs 3 gradients; 1 were"):
        aggregator.take()


# -- The scheduling, with a fake coordinator -------------------------------


class _Value:
    def __init__(self, result, release=None, error=None):
        self.result, self.release, self.error = result, release, error

    def fetch(self):
        if self.release is not None:
            self.release.wait()
        if self.error is not None:
            raise self.error
        return self.result


class _Coordinator:
    """Computation `i` (1-based) returns gradient `[i]` and loss `i`;
    those in `hang` never finish (until the test releases them)."""

    def __init__(self, hang=(), fail=()):
        self.calls = 0
        self.hang, self.fail = set(hang), set(fail)
        self.release = threading.Event()

    def schedule(self, function, args):
        self.calls += 1
        i = self.calls
        return _Value(
            ([np.array([float(i)])], float(i)),
            release=self.release if i in self.hang else None,
            error=ValueError(f"computation {i} failed")
            if i in self.fail
            else None,
        )


class _Watch:
    """Raises, as WorkerWatch does, after `limit` checks."""

    def __init__(self, limit=None):
        self.checks, self.limit = 0, limit

    def check(self):
        self.checks += 1
        if self.limit is not None and self.checks > self.limit:
            raise RuntimeError("No worker has been reachable: lost workers")


def _steps(coord, aggregate, total, watch=None):
    model = types.SimpleNamespace(
        optimizer=types.SimpleNamespace(
            iterations=types.SimpleNamespace(numpy=lambda: 0)
        ),
        distribute_strategy=types.SimpleNamespace(
            extended=types.SimpleNamespace()
        ),
    )
    steps = sync_replicas.SyncSteps(
        model,
        coord,
        iterator=None,
        settings=_strategy.SyncSettings(aggregate, total),
        watch=watch or _Watch(),
        poll_secs=0.01,
    )
    applied = []
    steps._apply = lambda grads, loss: applied.append(
        (float(grads[0].numpy()[0]), float(loss.numpy()))
    )
    return steps, applied


def test_a_hung_worker_with_one_backup_does_not_stop_training():
    coord = _Coordinator(hang={2})
    steps, applied = _steps(coord, aggregate=2, total=3)
    try:
        for _ in range(5):
            steps.step()
    finally:
        coord.release.set()
    # Step 1 averages computations 1 and 3 (2 hangs); later steps keep 3
    # in flight, 2 of them live.
    assert applied[0] == (2.0, 2.0)
    assert len(applied) == 5
    assert steps.aggregator.used == 10
    steps.drain()  # computation 2 comes back: stale
    assert steps.aggregator.dropped >= 1
    assert steps.aggregator.used + steps.aggregator.dropped == coord.calls


def test_fewer_in_flight_than_r_computes_several_batches_per_step():
    coord = _Coordinator()
    steps, applied = _steps(coord, aggregate=3, total=1)
    steps.step()
    steps.step()
    assert applied == [(2.0, 2.0), (5.0, 5.0)]
    assert (coord.calls, steps.aggregator.dropped) == (6, 0)


def test_waiting_with_every_computation_hung_is_bounded():
    coord = _Coordinator(hang={1, 2})
    steps, _ = _steps(coord, aggregate=2, total=2, watch=_Watch(limit=3))
    try:
        with pytest.raises(RuntimeError, match="lost workers"):
            steps.step()
    finally:
        coord.release.set()


def test_a_computation_error_reaches_the_coordinator():
    coord = _Coordinator(fail={1})
    steps, _ = _steps(coord, aggregate=1, total=1)
    with pytest.raises(ValueError, match="computation 1 failed"):
        steps.step()


# -- Real clusters ---------------------------------------------------------


def _run(tmp_path, mode):
    out = tmp_path / f"{mode}.json"
    process = subprocess.run(
        [sys.executable, SCRIPT, mode, str(out), str(tmp_path / mode)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert process.returncode == 0, process.stderr[-4000:]
    with open(out) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def average(tmp_path_factory):
    return once_per_session(
        tmp_path_factory,
        "sync_replicas_average",
        lambda: _run(tmp_path_factory.mktemp("sync"), "average"),
    )


def test_two_batches_averaged_equal_one_device_on_both(average):
    result = average
    # 24 steps, each the average of 2 batches of 16 (shuffled, augmented)
    # through a clipping policy with lr multipliers, against 24 steps on
    # the 32 examples.
    assert result["iterations"] == result["reference_iterations"] == 24
    assert result["max_difference"] < 1e-5
    # The first fit's count, then the mixed precision fit's.
    assert result["log"][-2:] == [
        "sync replicas: 48 gradients applied (2 per step), 0 stale dropped",
        "sync replicas: 24 gradients applied (2 per step), 0 stale dropped",
    ]
    losses = result["history"]["loss"]
    assert losses[1] < losses[0] < np.log(3)
    assert (
        "startup_delay_steps` must be 0 with synchronous"
        in (result["startup_delay_error"])
    )


def test_under_mixed_float16_too(average):
    """The gradients of a step are all scaled by the scale the previous
    step left, so the coordinator unscales them exactly: one device's
    weights within float16's precision, and the same overflow (the third
    step's batches are made to overflow) and final loss scale."""
    mixed = average["mixed"]
    assert mixed["iterations"] == 12
    overflows, reference_overflows = mixed["overflows"]
    # (count, first, last): one overflow, at step 3.
    assert overflows == reference_overflows == [1, 3, 3]
    scale, reference_scale = mixed["scales"]
    assert scale == reference_scale
    assert mixed["moved"] > 1e-2
    assert mixed["max_difference"] < 1e-3
