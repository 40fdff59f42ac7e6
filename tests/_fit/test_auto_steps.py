"""SlimModel picks steps_per_execution for each fit, as callbacks allow."""

import keras
import numpy as np
import pytest

from keras_slim._fit import auto_steps
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import LogEveryNSteps
from keras_slim.callbacks import NanLossGuard
from keras_slim.callbacks import StepCallback
from keras_slim.callbacks import StopAtStep
from keras_slim.callbacks import Summaries
from keras_slim.callbacks import Trace
from tests.callbacks import common
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp


class SeenSteps(StepCallback):
    """Records the steps per call and the global step after each batch."""

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.per_call = self.model.steps_per_execution
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self.steps.append(self.counter.step)


def logged_steps(caplog):
    """The `global step N` prefixes keras_slim logged."""
    return [
        r.getMessage().split(":")[0]
        for r in caplog.records
        if r.name == "keras_slim"
    ]


def auto_model():
    model = mlp()
    model.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def choose(callbacks, steps=330, x=None, **kwargs):
    kwargs = dict(callbacks=callbacks, steps_per_epoch=steps, **kwargs)
    return auto_steps.choose(auto_model(), x, kwargs)


def test_default_services_leave_room(tmp_path):
    services = [
        StopAtStep(num_steps=330),
        LogEveryNSteps(100),
        NanLossGuard(),
        Checkpoints(tmp_path),
        Summaries(tmp_path),
        Trace(tmp_path),
    ]
    # Log lines need no call boundary (a SlimModel records each step's
    # loss): 330 = 2 * 3 * 5 * 11 steps -> calls of 30.
    assert choose(services) == 30


def test_logging_constrains_only_models_without_step_records():
    assert LogEveryNSteps(100).step_multiples(auto_model()) == []
    assert choose([LogEveryNSteps(1)]) == 30
    keras_model = compile_model(mlp(cls=keras.Model))
    assert LogEveryNSteps(100).step_multiples(keras_model) == [100]


def test_no_constraint_uses_the_most():
    assert choose([], steps=64) == 32
    assert choose([], steps=None, x=np.zeros((100, 8)), batch_size=10) == 10


def test_a_model_trained_before_aligns_only_what_a_callback_asks():
    """The step a `fit` starts from constrains the calls only when a
    callback asks for global steps: after a fit of one step, a fit with
    no such callback keeps 32 steps per call, while
    `StopAtStep(last_step=65)` gets calls that end on every global step
    from 1."""
    _, _, data = common.full_batch()
    model = auto_model()
    model.fit(data, steps_per_epoch=1, verbose=0)

    def steps_per_call(*callbacks):
        kwargs = {"callbacks": list(callbacks), "steps_per_epoch": 64}
        return auto_steps.choose(model, data, kwargs)

    assert steps_per_call() == 32
    assert steps_per_call(LogEveryNSteps(16)) == 32
    assert steps_per_call(StopAtStep(last_step=65)) == 1


@pytest.mark.parametrize(
    "callback",
    [
        keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs: None
        ),
        keras.callbacks.TensorBoard("/tmp/unused"),
    ],
    ids=["lambda", "tensorboard"],
)
def test_callbacks_that_need_each_step(callback):
    assert choose([callback]) == 1


def test_nan_guard_needs_each_step_only_without_the_in_graph_check():
    assert NanLossGuard().step_multiples(auto_model()) == []
    keras_model = compile_model(mlp(cls=keras.Model))
    assert NanLossGuard().step_multiples(keras_model) == [1]


def test_endless_and_unknown_length_data():
    _, _, endless = common.full_batch()
    stop = StopAtStep(num_steps=330)
    # Endless data is ended by a callback: no constraint of its own.
    assert choose([stop], steps=None, x=endless) == 30
    # Unknown length: the end of the data must end a call.
    unknown = endless.take(100).filter(lambda x, y: True)
    assert choose([stop], steps=None, x=unknown) == 1
    assert choose([stop], steps=None, x=endless.take(100)) == 10


def test_epoch_level_callbacks_allow_it():
    epoch_only = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: None
    )
    assert choose([epoch_only, keras.callbacks.History()], steps=96) == 32


def test_a_trace_forces_one_step_per_call(tmp_path):
    assert choose([Trace(tmp_path, at_steps=[5])]) == 1
    assert choose([Trace(tmp_path, every_n_steps=100)]) == 1
    # No step chosen: no constraint (330 = 2 * 3 * 5 * 11 -> 30).
    assert choose([Trace(tmp_path)]) == 30


def test_fit_uses_it_and_trains_the_same(tmp_path):
    x, y, data = common.full_batch()
    seen_auto, seen_one = SeenSteps(), SeenSteps()
    auto = auto_model()
    auto.fit(data, steps_per_epoch=40, verbose=0, callbacks=[seen_auto])
    fixed = mlp()
    fixed.compile(
        optimizer=keras.optimizers.SGD(0.1),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=1,
    )
    fixed.fit(data, steps_per_epoch=40, verbose=0, callbacks=[seen_one])
    assert seen_auto.per_call == 20 and seen_one.per_call == 1
    assert seen_auto.steps == [20, 40]
    for a, b in zip(auto.get_weights(), fixed.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)
    # Evaluation keeps one batch per call afterwards.
    assert auto.steps_per_execution == 1
    auto.evaluate(x, y, verbose=0)


def fit_logging(model, caplog, steps, every_n_steps):
    """Fits `steps` steps logging every n; returns the `SeenSteps`."""
    _, _, data = common.full_batch()
    seen = SeenSteps()
    with caplog.at_level("INFO", logger="keras_slim"):
        model.fit(
            data,
            steps_per_epoch=steps,
            verbose=0,
            callbacks=[LogEveryNSteps(every_n_steps), seen],
        )
    return seen


def test_logging_steps_stay_exact(tmp_path, caplog):
    seen = fit_logging(auto_model(), caplog, steps=60, every_n_steps=15)
    # Calls of 30 steps; steps 15 and 45 fall inside calls.
    assert seen.per_call == 30
    assert logged_steps(caplog) == [
        f"global step {s}" for s in (15, 30, 45, 60)
    ]


def test_resume_stops_exactly_at_the_last_step(tmp_path):
    _, _, data = common.full_batch()
    first = auto_model()
    first.fit(
        data,
        steps_per_epoch=100,
        verbose=0,
        callbacks=[StopAtStep(num_steps=7), Checkpoints(tmp_path)],
    )
    assert global_step(first) == 7
    second = auto_model()
    second.fit(
        data,
        steps_per_epoch=100,
        verbose=0,
        callbacks=[StopAtStep(last_step=20), Checkpoints(tmp_path)],
    )
    # From the checkpoint at 7: calls that divide 20 - 7 = 13.
    assert global_step(second) == 20


def test_bad_value():
    with pytest.raises(ValueError, match="Received: steps_per_execution='x'"):
        mlp().compile(optimizer="sgd", loss="mse", steps_per_execution="x")


def test_fit_takes_keras_positional_arguments():
    x, y, _ = common.full_batch()
    seen = SeenSteps()
    history = auto_model().fit(x, y, 16, 2, 0, [seen])  # batch, epochs, ...
    assert len(history.history["loss"]) == 2
    # 64 examples in batches of 16: 4 steps per epoch, all in one call.
    assert seen.per_call == 4 and seen.steps == [4, 8]


def test_a_second_fit_keeps_the_logging_steps(caplog):
    _, _, data = common.full_batch()
    model = auto_model()
    model.fit(data, steps_per_epoch=6, verbose=0)
    seen = fit_logging(model, caplog, steps=40, every_n_steps=8)
    # From step 6, no callback asking for a global step: calls of 20 (the
    # largest dividing the epoch's 40), ending on 26 and 46; log lines need
    # no call end: 8, 16, ... are logged with their own steps' losses.
    assert seen.per_call == 20
    assert logged_steps(caplog) == [
        f"global step {s}" for s in (8, 16, 24, 32, 40)
    ]


@pytest.fixture
def on_parameter_servers(monkeypatch):
    """`choose` as under an asynchronous `ParameterServerStrategy` of
    `workers[0]` workers (the real cluster:
    tests/_fit/test_parameter_server.py)."""
    from keras_slim import _keras
    from keras_slim import _strategy

    workers = [2]
    settings = [None]
    monkeypatch.setattr(
        _strategy,
        "mode",
        lambda strategy: _strategy.Mode(
            kind=_strategy.PARAMETER_SERVER,
            replicas_in_sync=1,
            chief=True,
            sync=settings[0],
        ),
    )
    monkeypatch.setattr(
        _keras,
        "parameter_server_cluster",
        lambda strategy: {
            "worker": [f"w{i}" for i in range(workers[0])],
            "ps": ["p0"],
        },
    )
    return workers, settings


def test_parameter_servers_give_each_worker_a_call_per_epoch(
    on_parameter_servers,
):
    workers, settings = on_parameter_servers
    # 20 steps per epoch, 2 workers: calls of 10, one per worker.
    assert choose([], steps=20, x=lambda context: None) == 10
    workers[0] = 4
    assert choose([], steps=30) == 6  # at most 7, dividing 30
    workers[0] = 40
    assert choose([], steps=30) == 1
    workers[0] = 1
    assert choose([], steps=330) == 30  # MAX_STEPS still bounds it
    # Scheduled calls record no single step's loss: log steps constrain.
    assert LogEveryNSteps(5).step_multiples(auto_model()) == [5]
    assert choose([LogEveryNSteps(5)], steps=330) == 5
    assert choose([Checkpoints("/tmp/unused", every_n_steps=4)], 20) == 4
    lam = keras.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: 0)
    assert choose([lam], steps=20) == 1
    settings[0] = object()  # synchronous steps: one per round
    assert choose([], steps=20) == 1
