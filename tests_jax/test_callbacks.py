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


def test_log_every_n_steps_logs_the_last_line_however_fit_ends(
    caplog, monkeypatch
):
    # A line is logged once its totals are computed: the last one at the
    # end of `fit`, also when it raises (as before, the failing step's
    # line says its loss is not finite; the error follows). On a CPU
    # standing in for a GPU, where the host runs ahead.
    monkeypatch.setattr(run_lib, "waits_each_step", lambda: False)
    caplog.set_level(logging.INFO, logger="keras_slim")
    x, y = helpers.data(64)

    def fit(x, y):
        helpers.compile_model(helpers.mlp()).fit(
            x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
            callbacks=[keras_slim.callbacks.LogEveryNSteps(1)],
        )  # fmt: skip
        return re.findall(r"global step (\d+): loss = (\S+) ", caplog.text)

    assert [step for step, _ in fit(x[:24], y[:24])] == ["1", "2", "3"]
    caplog.clear()
    x[28] = np.nan  # the fourth batch of 8
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        fit(x, y)
    assert info.value.step == 4
    lines = re.findall(r"global step (\d+): loss = (\S+) ", caplog.text)
    # The verdict is read a call late or more: the calls after the failure
    # (which change nothing) may log too, before the error.
    assert [step for step, _ in lines][:4] == ["1", "2", "3", "4"]
    assert lines[3][1] == "nan"


class _Ahead(keras.callbacks.Callback):
    """At each batch's begin, whether the last call's step is still
    running on the device: the host dispatched past it."""

    def __init__(self, batch_end=False):
        super().__init__()
        self.running = []
        if batch_end:  # a user's callback that reads each step's logs
            self.on_train_batch_end = lambda batch, logs=None: None

    def on_train_batch_begin(self, batch, logs=None):
        logs = run_lib.current(self._model).logs
        if logs is not None:
            self.running.append(not logs["loss"].is_ready())


def _heavy_model():
    """A SlimModel whose step takes tens of ms on a CPU."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((512,))
    h = keras.layers.Dense(1024, activation="relu")(inputs)
    outputs = keras.layers.Dense(3)(h)
    model = keras_slim.SlimModel(inputs, outputs)
    return helpers.compile_model(model, keras.optimizers.SGD(0.01))


def _running(model_callbacks, ahead):
    """`ahead.running` after a fit of 12 batches of the heavy model."""
    x = np.random.default_rng(0).normal(size=(12 * 128, 512))
    y = np.zeros(len(x), "int32")
    _heavy_model().fit(
        x.astype("float32"), y, batch_size=128, epochs=1, verbose=0,
        shuffle=False, callbacks=[*model_callbacks, ahead],
    )  # fmt: skip
    assert len(ahead.running) == 11
    return ahead.running


def test_services_leave_the_host_ahead_of_the_device(tmp_path, monkeypatch):
    # On a GPU or a TPU (the CPU standing in for one here), `fit` leaves
    # each batch's end to Keras's thread pool and the host dispatches the
    # next step while the device runs this one. Keras's `fit` would wait
    # for each step's logs for a callback that implements
    # `on_train_batch_end`: keras_slim's services act in `after_call`.
    monkeypatch.setattr(run_lib, "waits_each_step", lambda: False)
    services = [
        keras_slim.callbacks.StopAtStep(last_step=10**6),
        keras_slim.callbacks.LogEveryNSteps(5),
        keras_slim.callbacks.Checkpoints(str(tmp_path / "c")),
        keras_slim.callbacks.NanLossGuard(fail=False),
        keras_slim.callbacks.Summaries(str(tmp_path / "s")),
        keras_slim.callbacks.Trace(str(tmp_path / "t"), every_n_steps=100),
    ]
    assert any(_running(services, _Ahead()))
    # The check can fail: a callback that implements the hook (here a
    # user's) makes Keras wait for every step.
    assert not any(_running([], _Ahead(batch_end=True)))


def test_on_a_cpu_the_loop_waits_for_each_step():
    # Where JAX computes on the host's CPU, the hand-off to a thread pool
    # costs more than the wait (bench/jax_policy_overhead.py's
    # keras-waiting variant): `SlimModel.fit` waits for each step, with
    # no callback of the user's.
    assert run_lib.waits_each_step()
    assert not any(_running([], _Ahead()))


def test_train_to_the_data_end_runs_ahead_and_returns_the_last_loss(
    tmp_path, monkeypatch, caplog
):
    # With no `number_of_steps`, any call may be the last: `train` keeps
    # the loss tracker's totals around each call on the device and reads
    # them once, at the end. Its default logs every step's loss, as
    # TF-Slim's, each line once its totals are computed: no wait either.
    # On a CPU standing in for a GPU.
    monkeypatch.setattr(run_lib, "waits_each_step", lambda: False)
    caplog.set_level(logging.INFO, logger="keras_slim")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(12 * 128, 512)).astype("float32")
    y = rng.integers(0, 3, len(x)).astype("int32")

    def train(callback, logdir):
        return keras_slim.train(
            _heavy_model(), (x, y), str(tmp_path / logdir), batch_size=128,
            callbacks=[callback],
        )  # fmt: skip

    ahead = _Ahead()
    loss = train(ahead, "a")
    assert any(ahead.running)
    lines = re.findall(r"global step (\d+): loss = ([\d.]+)", caplog.text)
    assert [int(step) for step, _ in lines] == list(range(1, 13))
    means = _Losses()
    assert train(means, "b") == loss
    # The last step's own loss, from Keras's running means (equal batches);
    # the lines' too.
    n = len(means.means)
    own = [means.means[0]] + [
        (i + 1) * means.means[i] - i * means.means[i - 1] for i in range(1, n)
    ]
    np.testing.assert_allclose(loss, own[-1], rtol=1e-4)
    logged = [float(value) for _, value in lines]
    np.testing.assert_allclose(logged, own, rtol=1e-3, atol=1e-4)


def test_a_run_is_the_slim_models_own():
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    with pytest.raises(ValueError, match="keras_slim.SlimModel"):
        run_lib.of(model)
