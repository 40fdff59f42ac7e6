"""keras_slim's small services on JAX (keras_slim/_jax/callbacks/,
keras_slim/_jax/run.py): StopAtStep, LogEveryNSteps, and what none of
them does: copy the state back to the model on each batch."""

import logging
import re

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim._jax import run as run_lib
from keras_slim._jax.callbacks import _base
from tests_jax import helpers


def _fit(model, callbacks, epochs=5, **kwargs):
    x, y = helpers.data(64)
    return model.fit(
        x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
        callbacks=callbacks, **kwargs,
    )  # fmt: skip


def test_the_jax_classes_take_the_public_names():
    assert keras_slim.callbacks.StopAtStep.__module__.startswith(
        "keras_slim._jax"
    )
    assert issubclass(keras_slim.callbacks.Checkpoints, _base.RunCallback)


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_stop_at_step_stops_at_the_step_exactly(steps_per_execution):
    model = helpers.compile_model(
        helpers.mlp(), steps_per_execution=steps_per_execution
    )
    _fit(model, [keras_slim.callbacks.StopAtStep(last_step=11)])
    assert int(model.optimizer.iterations) == 11
    # At its target already: no step, no batch read.
    before = helpers.weights(model)
    _fit(model, [keras_slim.callbacks.StopAtStep(last_step=11)])
    helpers.assert_close(before, helpers.weights(model), atol=0)
    # num_steps: that many more.
    _fit(model, [keras_slim.callbacks.StopAtStep(num_steps=4)])
    assert int(model.optimizer.iterations) == 15


def test_stop_at_step_equals_fit_of_as_many_steps():
    stopped = helpers.compile_model(helpers.mlp())
    _fit(stopped, [keras_slim.callbacks.StopAtStep(last_step=13)])
    reference = helpers.compile_model(helpers.mlp())
    x, y = helpers.data(64)
    reference.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    reference.fit(
        x[:40], y[:40], batch_size=8, epochs=1, shuffle=False, verbose=0
    )
    assert int(stopped.optimizer.iterations) == 13
    for a, b in zip(stopped.trainable_variables, reference.trainable_variables):
        np.testing.assert_array_equal(np.array(a), np.array(b))


def test_stop_at_step_refuses_bad_arguments():
    with pytest.raises(ValueError, match="Exactly one of"):
        keras_slim.callbacks.StopAtStep()
    with pytest.raises(ValueError, match="last_step"):
        keras_slim.callbacks.StopAtStep(last_step=-1)


class _Losses(keras.callbacks.Callback):
    """Keras's running mean of the epoch's loss after each batch."""

    def __init__(self):
        super().__init__()
        self.means = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))


def test_log_every_n_steps_logs_each_steps_own_loss(caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    model = helpers.compile_model(helpers.mlp())
    means = _Losses()
    _fit(
        model,
        [keras_slim.callbacks.LogEveryNSteps(3), means],
        epochs=2,
    )
    lines = re.findall(
        r"global step (\d+): loss = ([\d.]+) \([\d.]+ sec/step\), "
        r"([\d.]+) examples/sec",
        caplog.text,
    )
    assert [int(s) for s, _, _ in lines] == [3, 6, 9, 12, 15]
    # The step's own loss, from Keras's running means (8 steps an epoch).
    for step, loss, _ in lines:
        i = int(step) - 1
        n = i % 8 + 1
        own = (
            n * means.means[i] - (n - 1) * means.means[i - 1]
            if n > 1
            else (means.means[i])
        )
        assert float(loss) == pytest.approx(own, abs=2e-4), step


def _syncs(model, callbacks):
    """How many times a 4-epoch fit copies the state back to the model."""
    syncs = []
    original = type(model).jax_state_sync

    def counting(self):
        syncs.append(1)
        return original(self)

    type(model).jax_state_sync = counting
    try:
        _fit(model, callbacks, epochs=4)
    finally:
        type(model).jax_state_sync = original
    return len(syncs)


def test_no_service_copies_the_state_back_on_each_batch(tmp_path):
    services = [
        keras_slim.callbacks.StopAtStep(last_step=30),
        keras_slim.callbacks.LogEveryNSteps(2),
        keras_slim.callbacks.Checkpoints(
            str(tmp_path), every_n_steps=4, every_n_secs=None
        ),
        keras_slim.callbacks.NanLossGuard(fail=False),
    ]
    with_services = _syncs(helpers.compile_model(helpers.mlp()), services)
    alone = _syncs(helpers.compile_model(helpers.mlp()), [])
    # Keras's own only (each epoch's end, History's, fit's last), with or
    # without the services: none per batch.
    assert with_services == alone <= 2 * 4 + 1


def test_a_run_is_the_slim_models_own():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="keras_slim.SlimModel"):
        run_lib.of(model)
