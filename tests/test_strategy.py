"""The strategy kind and the chief, one answer for every module."""

import pytest
import tensorflow as tf

from keras_slim import _strategy


def test_kinds_of_local_strategies(mirrored):
    assert _strategy.kind(tf.distribute.get_strategy()) == _strategy.LOCAL
    assert _strategy.kind(mirrored) == _strategy.MIRRORED
    one = tf.distribute.OneDeviceStrategy("/cpu:0")
    assert _strategy.kind(one) == _strategy.LOCAL
    for strategy in (tf.distribute.get_strategy(), mirrored):
        assert not _strategy.is_multi_worker(strategy)
        assert not _strategy.is_parameter_server(strategy)


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
