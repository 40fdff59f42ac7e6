"""Keras's `gradient_accumulation_steps` with a `SlimModel`.

`k` micro-batches of `b` make one optimizer step equal to one step on the
`k * b` batch, the policy (multipliers, a binding clip) applied once to
their mean; under `MirroredStrategy` the same holds for `N` clones. The
reference is always an independent run without accumulation.
"""

import json
import logging
import math
import re

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim import _keras_optimizer
from keras_slim import _strategy
from keras_slim._fit import auto_steps
from keras_slim._step import accumulate as _accumulation
from tests.callbacks.test_summaries import read_events
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import mlp
from tests.helpers import weights

# clip_global_norm 0.05 binds on every step of this model and data.
POLICY = {"multipliers": {"logits/.*": 3.0}, "clip_global_norm": 0.05}

OPTIMIZERS = {
    # A schedule too: it must be read at optimizer steps.
    "sgd_momentum": lambda **kw: keras.optimizers.SGD(
        keras.optimizers.schedules.ExponentialDecay(0.5, 1, 0.7),
        momentum=0.9,
        **kw,
    ),
    "adam": lambda **kw: keras.optimizers.Adam(0.05, **kw),
}


def _model(optimizer, k=None, policy=POLICY, strategy=None):
    def build():
        model = mlp(keras_slim.GradientPolicy(**policy))
        kwargs = {} if k is None else {"gradient_accumulation_steps": k}
        return compile_model(model, OPTIMIZERS[optimizer](**kwargs))

    if strategy is None:
        return build()
    with strategy.scope():
        return build()


def _fit(model, x, y, batch_size, callbacks=(), epochs=1):
    return model.fit(
        x,
        y,
        batch_size=batch_size,
        epochs=epochs,
        shuffle=False,
        verbose=0,
        callbacks=list(callbacks),
    ).history


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_micro_batches_equal_one_step_on_their_union(optimizer):
    x, y = classification_data(96)
    accumulating = _model(optimizer, k=3)
    history = _fit(accumulating, x, y, batch_size=16, epochs=2)
    reference = _model(optimizer)
    expected = _fit(reference, x, y, batch_size=48, epochs=2)
    assert max_abs_diff(weights(accumulating), weights(reference)) < 1e-5
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=1e-5)
    # The global step counts updates; Keras's count, micro-batches.
    assert global_step(accumulating) == 4
    assert (
        int(_keras_optimizer.micro_step_counter(accumulating.optimizer)) == 12
    )
    # The clip binds: without it the reference ends elsewhere.
    unclipped = _model(optimizer, policy={"multipliers": POLICY["multipliers"]})
    _fit(unclipped, x, y, batch_size=48, epochs=2)
    assert max_abs_diff(weights(unclipped), weights(reference)) > 1e-3


def test_lr_multipliers_with_micro_batches_equal_one_step_on_their_union():
    # AdamW: the multipliers scale the decoupled weight decay too.
    lr = {"lr_multipliers": {"fc1/.*": 4.0, "logits/bias": 0.5}}

    def run(batch_size, policy, **kwargs):
        model = mlp(keras_slim.GradientPolicy(**policy))
        optimizer = keras.optimizers.AdamW(0.02, weight_decay=0.5, **kwargs)
        compile_model(model, optimizer)
        _fit(model, x, y, batch_size, epochs=2)
        return model

    x, y = classification_data(96)
    accumulating = run(16, lr, gradient_accumulation_steps=3)
    reference = run(48, lr)
    assert max_abs_diff(weights(accumulating), weights(reference)) < 1e-5
    # The multipliers matter: without them the reference ends elsewhere.
    plain = run(48, {})
    assert max_abs_diff(weights(plain), weights(reference)) > 1e-3


def test_clones_and_micro_batches_equal_one_device(mirrored, tmp_path):
    # 4 clones (the suite's shared strategy) x 2 micro-batches of 16; the
    # loss of each step summarised (the step's mean, over every replica).
    # The strategy's traces make its cost: one fit, few steps.
    x, y = classification_data(128)

    def summaries(name):
        return [
            keras_slim.callbacks.Summaries(
                tmp_path / name, every_n_steps=1, every_n_secs=None
            )
        ]

    accumulating = _model("sgd_momentum", k=2, strategy=mirrored)
    history = _fit(accumulating, x, y, 16, summaries("k"), epochs=2)
    reference = _model("sgd_momentum")
    expected = _fit(reference, x, y, 32, summaries("one"), epochs=2)
    assert max_abs_diff(weights(accumulating), weights(reference)) < 1e-5
    np.testing.assert_allclose(history["loss"], expected["loss"], rtol=1e-5)
    assert global_step(accumulating) == 8
    written = _summarised_losses(tmp_path / "k")
    reference_written = _summarised_losses(tmp_path / "one")
    assert sorted(written) == sorted(reference_written) == list(range(1, 9))
    for step, loss in written.items():
        assert abs(loss - reference_written[step]) < 1e-5


def test_callbacks_act_at_optimizer_steps(tmp_path, caplog):
    # Log and summaries every 2 global steps, stop at 5: with k = 3 the
    # auto steps per call end calls at batches 6, 12, 15.
    caplog.set_level(logging.INFO, logger="keras_slim")
    x, y = classification_data(16 * 30)
    model = _model("adam", k=3)
    callbacks = [
        keras_slim.callbacks.LogEveryNSteps(every_n_steps=2),
        keras_slim.callbacks.Summaries(
            tmp_path, every_n_steps=2, every_n_secs=None
        ),
        keras_slim.callbacks.StopAtStep(last_step=5),
    ]
    _fit(model, x, y, batch_size=16, callbacks=callbacks)
    assert model.steps_per_execution == 1  # restored after the fit
    assert global_step(model) == 5
    assert int(_keras_optimizer.micro_step_counter(model.optimizer)) == 15
    line = re.compile(r"global step (\d+): loss")
    steps = [
        int(m.group(1))
        for r in caplog.records
        if (m := line.match(r.getMessage()))
    ]
    assert steps == [2, 4]
    assert sorted(read_events(tmp_path)["loss"]) == [2, 4]


def _summarised_losses(logdir):
    return {s: float(v) for s, v in read_events(logdir)["loss"].items()}


def _logged_losses(caplog):
    line = re.compile(r"global step (\d+): loss = ([-\d.na]+)")
    return {
        int(m.group(1)): float(m.group(2))
        for r in caplog.records
        if (m := line.match(r.getMessage()))
    }


def _step_losses(model, x, y, batch_size, logdir, caplog):
    """`{step: loss}` as LogEveryNSteps logs it and as Summaries writes it,
    every optimizer step."""
    caplog.clear()
    callbacks = [
        keras_slim.callbacks.LogEveryNSteps(every_n_steps=1),
        keras_slim.callbacks.Summaries(
            logdir, every_n_steps=1, every_n_secs=None
        ),
    ]
    _fit(model, x, y, batch_size, callbacks=callbacks, epochs=2)
    return _logged_losses(caplog), _summarised_losses(logdir)


# Two micro-batches per call (steps span calls and end mid-call), and
# "auto" (calls of whole steps).
@pytest.mark.parametrize("steps_per_execution", [2, "auto"])
def test_logs_and_summaries_give_the_loss_of_the_optimizer_step(
    tmp_path, caplog, steps_per_execution
):
    caplog.set_level(logging.INFO, logger="keras_slim")
    x, y = classification_data(96)
    model = _model("adam", k=3)
    model.compile(
        optimizer=model.optimizer,
        loss=model.loss,
        steps_per_execution=steps_per_execution,
    )
    logged, written = _step_losses(model, x, y, 16, tmp_path / "k", caplog)
    reference = _model("adam")
    one = _step_losses(reference, x, y, 48, tmp_path / "one", caplog)
    assert sorted(logged) == sorted(written) == sorted(one[1]) == [1, 2, 3, 4]
    for step, loss in written.items():
        assert abs(loss - one[1][step]) < 1e-5
        # The log line rounds to 4 decimals.
        assert abs(logged[step] - one[0][step]) <= 1.01e-4


def test_a_trace_of_a_step_covers_its_micro_batches(tmp_path):
    # One micro-batch per call: step 1 is the calls of batches 2 and 3.
    x, y = classification_data(64)
    model = _model("adam", k=2)
    model.compile(
        optimizer=model.optimizer, loss=model.loss, steps_per_execution=1
    )
    trace = keras_slim.callbacks.Trace(tmp_path, at_steps=[1])
    _fit(model, x, y, batch_size=8, callbacks=[trace])
    assert trace.traces == [str(tmp_path / "tf_trace-1.json")]
    with open(trace.traces[0]) as f:
        events = json.load(f)["traceEvents"]
    # Each call of the train function executes it once, eagerly.
    call = re.compile(r"EagerLocalExecute: __inference_on_[a-z]+_\d+$")
    calls = [e for e in events if call.match(e.get("name", ""))]
    assert len(calls) == 2


def test_auto_steps_per_call_end_on_optimizer_steps(tmp_path):
    x, y = classification_data(16 * 24)
    model = _model("adam", k=3)
    save = keras_slim.callbacks.Checkpoints(
        tmp_path, every_n_steps=4, every_n_secs=None
    )
    kwargs = {"batch_size": 16, "callbacks": [save]}
    # Global steps 4, 8 end at batches 12, 24: 12 batches per call.
    assert auto_steps.choose(model, x, kwargs) == 12


def _with_nan(x, index):
    x = x.copy()
    x[index, 0] = np.nan
    return x


def test_nan_in_a_micro_batch_fails_the_optimizer_step():
    x, y = classification_data(96)
    x = _with_nan(x, 48 + 20)  # the second micro-batch of step 2
    model = _model("adam", k=3)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as error:
        _fit(model, x, y, batch_size=16)
    assert error.value.step == 2
    assert global_step(model) == 1
    reference = _model("adam")
    _fit(reference, x[:48], y[:48], batch_size=48)
    assert max_abs_diff(weights(model), weights(reference)) < 1e-5


def test_nan_in_a_micro_batch_skips_the_whole_optimizer_step(caplog):
    # Skipped: no variable changes, the accumulators restart at zero, the
    # global step advances, its loss is logged as nan; as one device skips
    # the step of that batch.
    caplog.set_level(logging.INFO, logger="keras_slim")
    x, y = classification_data(144)
    x = _with_nan(x, 48 + 20)

    def callbacks():
        return [
            keras_slim.callbacks.NanLossGuard(fail=False),
            keras_slim.callbacks.LogEveryNSteps(every_n_steps=1),
        ]

    model = _model("sgd_momentum", k=3)
    _fit(model, x, y, batch_size=16, callbacks=callbacks())
    logged = _logged_losses(caplog)
    caplog.clear()
    reference = _model("sgd_momentum")
    _fit(reference, x, y, batch_size=48, callbacks=callbacks())
    expected = _logged_losses(caplog)
    assert sorted(logged) == sorted(expected) == [1, 2, 3]
    assert math.isnan(logged[2]) and math.isnan(expected[2])
    for step in (1, 3):
        assert abs(logged[step] - expected[step]) <= 1.01e-4
    assert global_step(reference) == 3
    assert global_step(model) == 3
    assert max_abs_diff(weights(model), weights(reference)) < 1e-5
    sums = _keras_optimizer.accumulators(
        model.optimizer, model.trainable_variables
    )
    assert all(not np.any(s.numpy()) for s in sums)


def test_resume_from_a_checkpoint_mid_accumulation(tmp_path):
    # 5 micro-batches an epoch, k = 3: the first fit ends, and checkpoints,
    # 2 micro-batches into global step 2.
    x, y = classification_data(80)

    def run(directory, epochs):
        model = _model("adam", k=3)
        callbacks = [
            keras_slim.callbacks.Checkpoints(directory, every_n_secs=None)
        ]
        _fit(model, x, y, batch_size=16, callbacks=callbacks, epochs=epochs)
        return model

    first = run(tmp_path / "resumed", 1)
    assert int(_keras_optimizer.micro_step_counter(first.optimizer)) == 5
    resumed = run(tmp_path / "resumed", 2)
    straight = run(tmp_path / "straight", 2)
    assert int(_keras_optimizer.micro_step_counter(resumed.optimizer)) == 10
    assert global_step(resumed) == 3
    assert max_abs_diff(weights(resumed), weights(straight)) < 1e-6
    pending = _keras_optimizer.accumulators(
        resumed.optimizer, resumed.trainable_variables
    )
    expected = _keras_optimizer.accumulators(
        straight.optimizer, straight.trainable_variables
    )
    assert (
        max_abs_diff(
            [p.numpy() for p in pending], [e.numpy() for e in expected]
        )
        < 1e-6
    )
    assert any(np.any(p.numpy()) for p in pending)


def test_parameter_servers_fail_before_any_step(monkeypatch):
    # The check reads the strategy's kind: no cluster needed.
    ps = _strategy.Mode(
        kind=_strategy.PARAMETER_SERVER, replicas_in_sync=1, chief=True
    )
    monkeypatch.setattr(_strategy, "mode", lambda s: ps)
    model = _model("adam", k=2)
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2 under"):
        _accumulation.check(model)
    x, y = classification_data(32)
    with pytest.raises(ValueError, match="ParameterServerStrategy"):
        model.make_train_function()


def test_loss_scale_optimizer_fails_before_any_step():
    model = mlp(keras_slim.GradientPolicy())
    inner = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
    compile_model(model, keras.optimizers.LossScaleOptimizer(inner))
    x, y = classification_data(32)
    before = weights(model)
    with pytest.raises(ValueError, match="LossScaleOptimizer"):
        _fit(model, x, y, batch_size=16)
    assert max_abs_diff(weights(model), before) == 0
