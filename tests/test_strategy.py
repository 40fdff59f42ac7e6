"""The strategy kind, its deployment mode and the chief, one answer for
every module."""

import pytest
import tensorflow as tf

from keras_slim import _strategy


def test_kinds_of_local_strategies(mirrored):
    assert _strategy.kind(tf.distribute.get_strategy()) == _strategy.LOCAL
    assert _strategy.kind(mirrored) == _strategy.MIRRORED
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert _strategy.kind(one) == _strategy.LOCAL
    for strategy in (tf.distribute.get_strategy(), mirrored):
        assert not _strategy.mode(strategy).multi_worker
        assert not _strategy.mode(strategy).parameter_server


def test_the_mode_of_a_strategy_is_decided_once(mirrored):
    default = tf.distribute.get_strategy()
    assert _strategy.mode(default) == _strategy.Mode(
        kind=_strategy.LOCAL, replicas_in_sync=1, chief=True
    )
    assert _strategy.mode(mirrored) == _strategy.Mode(
        kind=_strategy.MIRRORED,
        replicas_in_sync=mirrored.num_replicas_in_sync,
        chief=True,
    )
    assert mirrored.num_replicas_in_sync > 1
    # Decided anew each time it is asked: a run keeps its own (`Run.mode`,
    # tests/test_run.py).
    assert _strategy.mode(mirrored) == _strategy.mode(mirrored)


# Each kind's answers: (needs_coordinator, workers_in_lockstep,
# reads_worker_shares, host_reads_collective, records_step_losses).
_ANSWERS = {
    _strategy.LOCAL: (False, False, False, False, True),
    _strategy.MIRRORED: (False, False, False, False, True),
    _strategy.MULTI_WORKER: (False, True, True, True, True),
    _strategy.PARAMETER_SERVER: (True, False, False, False, False),
}


@pytest.mark.parametrize("kind", sorted(_ANSWERS))
def test_the_answers_of_each_kind_of_mode(kind):
    """The real MWMS and PS strategies: tests/_fit/test_multi_worker.py,
    tests/_fit/test_parameter_server.py."""
    mode = _strategy.Mode(kind=kind, replicas_in_sync=2, chief=False)
    answers = (
        mode.needs_coordinator,
        mode.workers_in_lockstep,
        mode.reads_worker_shares,
        mode.host_reads_collective,
        mode.records_step_losses,
    )
    assert answers == _ANSWERS[kind]
    assert mode.parameter_server is (kind == _strategy.PARAMETER_SERVER)
    assert mode.multi_worker is (kind == _strategy.MULTI_WORKER)


def test_is_chief_asks_the_strategy_unless_overridden(mirrored):
    assert _strategy.is_chief(mirrored)
    assert not _strategy.is_chief(mirrored, override=False)
    assert _strategy.is_chief(tf.distribute.get_strategy(), override=True)


@pytest.mark.parametrize(
    "jobs, task_type, task_id, chief",
    [
        ({"chief": ["a"], "worker": ["b"]}, "chief", 0, True),
        ({"chief": ["a"], "worker": ["b"]}, "worker", 0, False),
        ({"worker": ["a", "b"]}, "worker", 0, True),
        ({"worker": ["a", "b"]}, "worker", 1, False),
        ({"worker": ["a"], "ps": ["b"]}, "ps", 0, False),
    ],
)
def test_is_chief_task_as_tensorflow_decides(jobs, task_type, task_id, chief):
    assert _strategy.is_chief_task(jobs, task_type, task_id) is chief
