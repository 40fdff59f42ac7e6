"""StopAtStep: contrib.learn's num_steps / last_step semantics."""

import numpy as np
import pytest

from keras_slim.callbacks import StopAtStep
from tests.callbacks import common
from tests.helpers import global_step
from tests.helpers import weights


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_num_steps_twice_gives_twice_the_steps(kind):
    _, _, data = common.full_batch()
    model = common.model(kind)
    model.fit(data, epochs=1, verbose=0, callbacks=[StopAtStep(num_steps=7)])
    assert global_step(model) == 7
    model.fit(data, epochs=1, verbose=0, callbacks=[StopAtStep(num_steps=7)])
    assert global_step(model) == 14


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_last_step_a_second_call_runs_no_step(kind):
    _, _, data = common.full_batch()
    model = common.model(kind)
    model.fit(data, epochs=1, verbose=0, callbacks=[StopAtStep(last_step=9)])
    assert global_step(model) == 9
    before = weights(model)
    history = model.fit(
        data, epochs=1, verbose=0, callbacks=[StopAtStep(last_step=9)]
    )
    assert global_step(model) == 9
    for a, b in zip(before, weights(model)):
        np.testing.assert_array_equal(a, b)
    assert history.history == {}
    # The model trains again afterwards: the real train function is back.
    common.fit(model, data, 2)
    assert global_step(model) == 11


def test_last_step_across_epochs():
    _, _, data = common.full_batch()
    model = common.model()
    model.fit(
        data,
        epochs=10,
        steps_per_epoch=4,
        verbose=0,
        callbacks=[StopAtStep(last_step=10)],
    )
    assert global_step(model) == 10
    assert len(model.history.epoch) == 3


def test_steps_per_execution_stops_at_the_execution_boundary():
    _, _, data = common.full_batch()
    model = common.model(steps_per_execution=4)
    model.fit(data, epochs=1, verbose=0, callbacks=[StopAtStep(last_step=10)])
    assert global_step(model) == 12


def test_under_mirrored_strategy(mirrored):
    _, _, data = common.full_batch()
    with mirrored.scope():
        model = common.model()
    model.fit(data, epochs=1, verbose=0, callbacks=[StopAtStep(num_steps=5)])
    assert global_step(model) == 5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({}, "Exactly one of `num_steps` and `last_step`"),
        (
            {"num_steps": 1, "last_step": 2},
            "Received: num_steps=1, last_step=2",
        ),
        ({"num_steps": 0}, "Received: num_steps=0"),
        ({"last_step": -1}, "Received: last_step=-1"),
        ({"last_step": 1.5}, "Received: last_step=1.5"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        StopAtStep(**kwargs)
