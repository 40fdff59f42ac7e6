"""SlimModel under Keras's mixed precision policies.

`mixed_float16` (a `LossScaleOptimizer`, dynamic loss scale) and
`mixed_bfloat16` (no loss scale): the policy sees unscaled gradients in
effect (against a float32 model), an fp16 overflow skips exactly its step
through the step's gate, two clones equal one device, and a resumed run
equals a straight one, loss scale included.
"""

import contextlib
import functools
import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _strategy
from keras_slim._step import apply as step_apply
from keras_slim._step import loss_scale as _loss_scale
from keras_slim.deployment import mirrored_strategy
from keras_slim.image import _task
from keras_slim.image import train_image_classifier as cli
from tests._fit.test_position import saved_values
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import mlp
from tests.helpers import weights

POLICIES = ["mixed_float16", "mixed_bfloat16"]

#: Tolerance on weights against the float32 model, by compute dtype
#: (float16 keeps 11 significant bits, bfloat16 8).
TOLERANCE = {"float32": 1e-6, "mixed_float16": 1e-3, "mixed_bfloat16": 1e-2}

#: The policy of the comparisons: multipliers and a clip that binds.
GRADIENT_POLICY = {"multipliers": {"logits/.*": 3.0}, "clip_norm": 0.05}


@pytest.fixture(autouse=True)
def _float32_after():
    """Every test sets its own global dtype policy; this restores it."""
    before = keras.mixed_precision.global_policy().name
    yield
    keras.mixed_precision.set_global_policy(before)


def _model(
    dtype, policy=None, momentum=0.0, strategy=None, jit_compile=False, **kwargs
):
    """The tests' MLP, built and compiled under the `dtype` policy, with
    SGD (a learning rate of 0.5 without momentum, else 0.1)."""
    keras.mixed_precision.set_global_policy(dtype)
    policy = keras_slim.GradientPolicy(**(policy or {}))
    rate = 0.1 if momentum else 0.5
    with strategy.scope() if strategy else contextlib.nullcontext():
        optimizer = keras.optimizers.SGD(rate, momentum=momentum)
        model = mlp(policy, **kwargs)
        return compile_model(model, optimizer, jit_compile=jit_compile)


def _fit(model, x, y, **kwargs):
    model.fit(x, y, batch_size=32, shuffle=False, verbose=0, **kwargs)
    return weights(model)


@pytest.mark.parametrize("dtype", POLICIES)
def test_variables_stay_float32_and_only_float16_is_loss_scaled(dtype):
    model = _model(dtype)
    assert model.layers[1].compute_dtype == dtype.split("_")[1]
    assert {v.dtype for v in model.variables} == {"float32"}
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (dtype == "mixed_float16")


@functools.cache
def _float32_runs():
    """The float32 model's weights after 2 epochs: with the clip, and
    without it (made once for the tests below)."""
    x, y = classification_data(64)
    clipped = _fit(_model("float32", GRADIENT_POLICY), x, y, epochs=2)
    multiplied = {"multipliers": GRADIENT_POLICY["multipliers"]}
    unclipped = _fit(_model("float32", multiplied), x, y, epochs=2)
    return clipped, unclipped


@pytest.mark.parametrize("dtype", POLICIES)
def test_policy_sees_unscaled_gradients(dtype):
    """Multipliers and clipping under mixed precision give the float32
    model's update, within the compute dtype's precision; the clip binds,
    so no clip (or a clip of scaled gradients) is far off."""
    reference, unclipped = _float32_runs()
    x, y = classification_data(64)
    mixed = _fit(_model(dtype, GRADIENT_POLICY), x, y, epochs=2)
    tolerance = TOLERANCE[dtype]
    assert max_abs_diff(mixed, reference) < tolerance
    assert max_abs_diff(unclipped, reference) > 20 * tolerance


def test_a_leaked_loss_scale_is_caught(monkeypatch):
    """The comparison above fails if clipping saw the scaled gradients."""
    reference, _ = _float32_runs()
    x, y = classification_data(64)
    monkeypatch.setattr(step_apply, "gradient_scale", lambda optimizer: None)
    leaked = _fit(_model("mixed_float16", GRADIENT_POLICY), x, y, epochs=2)
    assert max_abs_diff(leaked, reference) > 20 * TOLERANCE["mixed_float16"]


def _overflow_data(bad_batch=1, batches=4, size=16):
    """`batches` batches of `size`; batch `bad_batch`'s inputs are so large
    that the float16 gradient overflows at the initial loss scale (2**15)
    while the loss stays finite."""
    x, y = classification_data(batches * size)
    x[bad_batch * size : (bad_batch + 1) * size] *= 1e3
    return x, y


class _Snapshots(keras.callbacks.Callback):
    """The model's weights and its optimizer's variables after each step."""

    def on_train_begin(self, logs=None):
        self.steps = []

    def on_train_batch_end(self, batch, logs=None):
        self.steps.append(
            (
                weights(self.model),
                [v.numpy() for v in self.model.optimizer.variables],
            )
        )


def _relu_model(jit_compile=False):
    return _model(
        "mixed_float16",
        momentum=0.9,
        activation="relu",
        jit_compile=jit_compile,
    )


@pytest.mark.parametrize("fail", [True, False], ids=["fail", "skip"])
def test_an_overflow_skips_exactly_its_step(fail, caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    x, y = _overflow_data()
    model = _relu_model()
    snapshots = _Snapshots()
    guard = keras_slim.callbacks.NanLossGuard(fail=fail)
    model.fit(
        x, y, batch_size=16, shuffle=False, verbose=0,
        callbacks=[snapshots, guard],
    )  # fmt: skip
    optimizer = model.optimizer
    names = [v.path for v in optimizer.variables]
    (w1, o1), (w2, o2), (w3, _), (w4, _) = snapshots.steps
    assert max_abs_diff(w1, w2) == 0.0
    assert max_abs_diff(w2, w3) > 0.0 and max_abs_diff(w3, w4) > 0.0
    changed = {n for n, a, b in zip(names, o1, o2) if not np.array_equal(a, b)}
    assert changed == {
        optimizer.iterations.path,
        optimizer.dynamic_scale.path,
        optimizer.step_counter.path,
    }
    scale = dict(zip(names, o2))[optimizer.dynamic_scale.path]
    assert scale == 2.0**14
    assert global_step(optimizer) == 4
    assert model.train_function.overflow_steps.read() == (1, 2, 2)
    assert "1 step skipped so far for a float16 loss-scale overflow" in (
        caplog.text
    )
    assert "first at global step 2, last at 2" in caplog.text
    if not fail:
        assert model.train_function.step_options.skipped_steps is None
        # Counted among the skipped steps, and not warned about as a NaN.
        # keras_slim's records only: TensorFlow warns of retracing after
        # many fits in one process.
        warned = [
            r
            for r in caplog.records
            if r.levelno >= logging.WARNING and r.name.startswith("keras_slim")
        ]
        assert not warned
    # Independent reference: the same run without the overflowing batch.
    clean = _relu_model()
    keep = np.r_[0:16, 32:64]
    clean.fit(x[keep], y[keep], batch_size=16, shuffle=False, verbose=0)
    assert max_abs_diff(weights(clean), w4) < 1e-6


def test_an_overflow_under_xla_is_skipped_not_failed():
    """XLA defers the failing check to the loop around the step: under a
    loss scale it covers the loss only, and the overflow is skipped in
    the compiled step."""
    x, y = _overflow_data()
    model = _relu_model(jit_compile=True)
    model.fit(
        x, y, batch_size=16, shuffle=False, verbose=0,
        callbacks=[keras_slim.callbacks.NanLossGuard()],
    )  # fmt: skip
    assert model.train_function.overflow_steps.read() == (1, 2, 2)
    assert float(model.optimizer.dynamic_scale.numpy()) == 2.0**14
    assert global_step(model) == 4


def test_a_nan_loss_under_a_loss_scale_still_fails():
    x, y = classification_data(64)
    x[20] = np.nan
    model = _relu_model()
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as raised:
        model.fit(
            x, y, batch_size=16, shuffle=False, verbose=0,
            callbacks=[keras_slim.callbacks.NanLossGuard()],
        )  # fmt: skip
    assert raised.value.step == 2
    assert global_step(model) == 1
    assert float(model.optimizer.dynamic_scale.numpy()) == 2.0**15


@pytest.mark.parametrize("dtype", POLICIES)
def test_two_clones_equal_one_device(dtype):
    """With an fp16 overflow at the second step under `mixed_float16`."""
    x, y = _overflow_data(size=32)
    strategy = mirrored_strategy(["/cpu:0", "/cpu:1"])
    runs = []
    for on in (None, strategy):
        model = _model(
            dtype,
            GRADIENT_POLICY,
            momentum=0.9,
            strategy=on,
            activation="relu",
        )
        runs.append((model, _fit(model, x, y, epochs=2)))
    (one, w1), (two, w2) = runs
    assert max_abs_diff(w1, w2) < TOLERANCE[dtype]
    assert global_step(two) == 8
    if dtype == "mixed_float16":
        for model in (one, two):
            assert model.train_function.overflow_steps.read()[0] >= 1
            assert float(model.optimizer.dynamic_scale.numpy()) < 2.0**15
        assert (
            one.train_function.overflow_steps.read()
            == two.train_function.overflow_steps.read()
        )


def _train(directory, steps):
    """`keras_slim.train` under `mixed_float16` with a loss scale that
    overflows at first, then grows every 2 steps."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    optimizer = keras.optimizers.LossScaleOptimizer(
        keras.optimizers.SGD(0.05, momentum=0.9),
        initial_scale=2.0**24,
        dynamic_growth_steps=2,
    )
    model = compile_model(mlp(seed=7, activation="relu"), optimizer)
    x, y = classification_data(60)
    data = tf.data.Dataset.from_tensor_slices((x, y))
    data = data.shuffle(60, seed=3, reshuffle_each_iteration=True).batch(10)
    keras_slim.train(
        model,
        data.repeat(),
        str(directory),
        number_of_steps=steps,
        save_summaries_secs=None,
        log_every_n_steps=None,
    )
    return model


def test_a_resumed_run_equals_a_straight_run(tmp_path):
    straight = _train(tmp_path / "straight", 12)
    _train(tmp_path / "split", 5)
    resumed = _train(tmp_path / "split", 12)
    first, second = (
        saved_values(tmp_path / name) for name in ("straight", "split")
    )
    assert sorted(first) == sorted(second)
    scales = [n for n in first if "dynamic_scale" in n]
    counters = [n for n in first if "step_counter" in n]
    assert scales and counters
    for name, value in first.items():
        np.testing.assert_allclose(second[name], value, rtol=1e-6, err_msg=name)
    for model in (straight, resumed):
        assert float(model.optimizer.dynamic_scale.numpy()) == float(
            first[scales[0]]
        )
    # The run did overflow, and its scale moved both ways.
    assert straight.train_function.overflow_steps.read()[0] >= 1
    assert float(first[scales[0]]) != 2.0**24


def test_the_loss_scale_moves_as_keras_moves_it():
    """`_loss_scale` against Keras's own `LossScaleOptimizer.apply`: the
    same gradients (finite, finite, finite, then an overflow) leave the
    same variables, slots, scale and growth counter."""
    variables = {}
    optimizers = {}
    for kind in ("keras", "ours"):
        variables[kind] = [keras.Variable(np.ones(3, "float32"))]
        optimizers[kind] = keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(0.1, momentum=0.9),
            initial_scale=8.0,
            dynamic_growth_steps=2,
        )
        optimizers[kind].build(variables[kind])
    for grad in ([1.0, 2.0, 3.0], [0.5, -1.0, 2.0], [3.0, 1.0, 0.0]):
        grads = [tf.constant(grad) * optimizers["keras"].dynamic_scale]
        optimizers["keras"].apply(grads, variables["keras"])
        _loss_scale.apply_unscaled(optimizers["ours"], grads, variables["ours"])
    optimizers["keras"].apply([tf.constant([np.inf, 0, 0])], variables["keras"])
    _loss_scale.lower(optimizers["ours"])
    ours, theirs = optimizers["ours"], optimizers["keras"]
    assert float(theirs.dynamic_scale.numpy()) == 8.0
    assert [v.numpy().tolist() for v in ours.variables] == [
        v.numpy().tolist() for v in theirs.variables
    ]
    assert max_abs_diff(variables["ours"], variables["keras"]) == 0.0


def test_the_command_flag_parses_and_refuses_other_values(capsys):
    parser = cli.parser()
    assert parser.parse_args([]).mixed_precision is None
    for name in POLICIES:
        flags = parser.parse_args([f"--mixed_precision={name}"])
        assert flags.mixed_precision == name
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--mixed_precision=float16"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "--mixed_precision" in error and "float16" in error
    assert "mixed_float16" in error and "mixed_bfloat16" in error


@pytest.mark.parametrize("dtype", POLICIES)
def test_the_commands_net_trains_with_float32_batch_norm(dtype, tmp_path):
    """The net `keras-slim-train --mixed_precision` builds (the default
    digits CNN, with batch norm): float32 variables, 16-bit compute, a loss
    scale under float16 only; its steps update the moving statistics; the
    global policy is float32 again after the build."""
    rng = np.random.default_rng(0)
    images = rng.normal(size=(16, 8, 8, 1)).astype("float32")
    labels = np.eye(10, dtype="float32")[rng.integers(0, 10, 16)]
    parser = cli.parser()
    flags = parser.parse_args(
        ["--train_dir", str(tmp_path), "--task", "0"]
        + ["--optimizer", "sgd", f"--mixed_precision={dtype}"]
    )
    cli._check(parser, flags)
    task = _task.Task("digits_cnn", 8, "digits", 10, 16, None, 1)
    with cli._dtype_policy(flags.mixed_precision):
        model = cli._build(flags, task)
    assert keras.mixed_precision.global_policy().name == "float32"
    assert {v.dtype for v in model.variables} == {"float32"}
    norms = [
        layer
        for layer in model.layers
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    assert norms and all(n.compute_dtype == dtype[6:] for n in norms)
    scaled = isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert scaled == (dtype == "mixed_float16")
    before = [
        v.numpy().copy() for n in norms for v in n.non_trainable_variables
    ]
    model.fit(images, labels, batch_size=8, epochs=1, verbose=0)
    after = [v.numpy() for n in norms for v in n.non_trainable_variables]
    assert all(np.isfinite(v).all() for v in after)
    assert max_abs_diff(before, after) > 0.0
    assert global_step(model) == 2


def _parameter_servers(sync):
    """The `Mode` of a `ParameterServerStrategy` (no cluster needed: the
    check reads the strategy's mode), asynchronous or synchronous."""
    settings = None
    if sync:
        settings = _strategy.SyncSettings(
            replicas_to_aggregate=2, total_num_replicas=2
        )
    return _strategy.Mode(
        kind=_strategy.PARAMETER_SERVER,
        replicas_in_sync=1,
        chief=True,
        sync=settings,
    )


def test_a_loss_scale_under_asynchronous_parameter_servers_is_refused(
    monkeypatch,
):
    """Asynchronous workers would unscale by a scale others moved: an
    error before any step; synchronous steps and bfloat16 are accepted."""
    monkeypatch.setattr(_strategy, "mode", lambda s: _parameter_servers(False))
    model = _model("mixed_float16")
    with pytest.raises(ValueError, match="ParameterServerStrategy with asy"):
        model.make_train_function()
    assert not model.optimizer.built
    _loss_scale.check(_model("mixed_bfloat16"))
    monkeypatch.setattr(_strategy, "mode", lambda s: _parameter_servers(True))
    _loss_scale.check(_model("mixed_float16"))
