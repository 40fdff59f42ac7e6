"""SlimModel's step on JAX: every policy field, clones through
keras.distribution equal to one device, the numeric gate, mixed
precision and gradient accumulation (keras_slim/_jax/step.py)."""

import sys

import jax
import keras
import numpy as np
import pytest

import keras_slim
from keras_slim._jax import step
from keras_slim._jax import train_function
from tests_jax import helpers

DEVICES = 4


def _fit(model, x, y, epochs=1, batch_size=16, **kwargs):
    model.fit(
        x, y, batch_size=batch_size, epochs=epochs, shuffle=False,
        verbose=0, **kwargs,
    )  # fmt: skip
    return helpers.weights(model)


def _trained(policy, distribution=None, *, batch_norm=False, **compile_args):
    x, y = helpers.data()
    scope = distribution.scope() if distribution else _nothing()
    with scope:
        model = helpers.compile_model(
            helpers.mlp(policy, batch_norm=batch_norm), **compile_args
        )
        return model, _fit(model, x, y, epochs=2)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _data_parallel():
    """What a user writes: TF-Slim's clones, as keras.distribution."""
    config = keras_slim.DeploymentConfig(num_clones=DEVICES, clone_on_cpu=True)
    distribution = config.strategy()
    assert isinstance(distribution, keras.distribution.DataParallel)
    return distribution


@pytest.mark.parametrize("name", sorted(helpers.COMBINED))
def test_four_devices_train_like_one(name):
    policy = helpers.COMBINED[name]
    _, one = _trained(policy)
    model, four = _trained(policy, _data_parallel())
    kernel = model.get_layer("fc1").kernel.value
    assert len(kernel.sharding.device_set) == DEVICES
    helpers.assert_close(one, four)


def test_four_devices_train_like_one_with_batch_norm():
    # JAX's DataParallel normalizes over the global batch: one device's
    # statistics (TensorFlow's clones normalize per replica).
    policy = helpers.POLICIES["full"]
    _, one = _trained(policy, batch_norm=True)
    _, four = _trained(policy, _data_parallel(), batch_norm=True)
    assert any("moving_mean" in key for key in one)
    helpers.assert_close(one, four)


def test_model_parallel_on_a_2x2_mesh_trains_like_one_device():
    devices = keras.distribution.list_devices("cpu")[:4]
    mesh = keras.distribution.DeviceMesh((2, 2), ["batch", "model"], devices)
    layout = keras.distribution.LayoutMap(mesh)
    layout["fc.*/kernel"] = (None, "model")
    layout["logits/kernel"] = ("model", None)
    parallel = keras.distribution.ModelParallel(
        layout_map=layout, batch_dim_name="batch"
    )
    policy = helpers.POLICIES["full"]  # the global clip over shards
    _, one = _trained(policy)
    model, sharded = _trained(policy, parallel)
    spec = model.get_layer("fc2").kernel.value.sharding.spec
    assert tuple(spec) == (None, "model")
    helpers.assert_close(one, sharded)


def test_freeze_is_bitwise_with_decay_momentum_and_ema():
    optimizer = keras.optimizers.AdamW(0.01, weight_decay=0.1, use_ema=True)
    x, y = helpers.data()
    model = helpers.compile_model(
        helpers.mlp({"freeze": ["fc1/.*"]}), optimizer
    )
    model.build((None, 8))
    optimizer.build(model.trainable_variables)
    before = helpers.weights(model)
    after = _fit(model, x, y)
    frozen = [k for k in before if "fc1" in k and not k.endswith("_average")]
    assert len(frozen) == 6  # kernel, bias and their two slots each
    for key in frozen:
        assert np.array_equal(before[key], after[key]), key
    for name in ("kernel", "bias"):  # the averages equal the variables
        average = after[f"optimizer/fc1_{name}_average"]
        assert np.array_equal(average, before[f"fc1/{name}"]), name
    moved = [k for k in before if "fc2" in k and "kernel" in k]
    assert all(not np.array_equal(before[k], after[k]) for k in moved)


def test_describe_prints_the_policy_table():
    model = helpers.compile_model(helpers.mlp(helpers.POLICIES["full"]))
    model.build((None, 8))
    text = model.describe()
    assert "gate" in text and "apply       AdamW" in text
    assert "fc1/bias       (16,)" in text
    assert "frozen by 'fc1/bias'" in text
    assert text.split("\n\n")[1] == model.gradient_policy.describe(model)


def _nan_data():
    x, y = helpers.data()
    x[20] = np.nan  # in the second batch of 16
    return x, y


def test_a_non_finite_step_fails_with_nothing_changed():
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    _fit(model, x[:16], y[:16])  # one good step
    before = helpers.weights(model)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x[16:], y[16:])  # fails on its first step
    assert info.value.step == 2
    assert info.value.cause == "loss"
    after = helpers.weights(model)
    assert before.keys() == after.keys()
    for key in before:
        assert np.array_equal(before[key], after[key], equal_nan=True), key
    # The state the failing call donated is back on the model: it trains.
    _fit(model, x[32:], y[32:])
    assert int(model.optimizer.iterations) == 3


def test_a_failure_in_a_multi_step_call_applies_no_later_step():
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp(), steps_per_execution=4)
    model.build((None, 8))
    model.optimizer.build(model.trainable_variables)
    reference = helpers.compile_model(helpers.mlp())
    _fit(reference, x[:16], y[:16])
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x, y)
    assert info.value.step == 2
    assert int(model.optimizer.iterations) == 1
    helpers.assert_close(
        helpers.weights(reference), helpers.weights(model), atol=0
    )


class _Record(keras.callbacks.Callback):
    """What fit's callbacks saw, without touching `self.model` (which on
    JAX syncs the state, and so checks the verdict)."""

    def __init__(self):
        super().__init__()
        self.batches, self.epochs, self.ended = [], [], False

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append(batch)

    def on_epoch_end(self, epoch, logs=None):
        self.epochs.append(epoch)

    def on_train_end(self, logs=None):
        self.ended = True


def test_a_failure_is_raised_at_a_later_call_before_its_steps_count():
    # The verdict is read a call late or more: a later call raises, and
    # the model holds the weights from before the failure.
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    reference = helpers.compile_model(helpers.mlp())
    _fit(reference, x[:16], y[:16])
    record = _Record()
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x, y, epochs=2, callbacks=[record])
    assert info.value.step == 2
    # Raised at a later call, once its verdict was ready (the third, or
    # after), or at the epoch's end: before the epoch ended either way.
    assert record.batches[:2] == [0, 1]
    assert record.epochs == [] and not record.ended
    assert int(model.optimizer.iterations) == 1
    helpers.assert_close(
        helpers.weights(reference), helpers.weights(model), atol=0
    )


@pytest.mark.parametrize(
    "error", [[1.5, 2.25], [np.nan, np.inf], [-np.inf, -0.0], [3e38, 1e-45]]
)
def test_the_counters_hold_ints_and_floats_in_one_array(error):
    ints = [7, 3, 2, 5, 1]
    packed = step.packed_counters(ints, error)
    assert packed.dtype == np.int32 and packed.shape == (step.SIZE,)
    read_ints, read_error = step.host_counters(jax.numpy.asarray(packed))
    assert read_ints.tolist() == ints
    np.testing.assert_array_equal(read_error, np.float32(error))
    assert np.signbit(read_error).tolist() == np.signbit(error).tolist()
    # The step's own packing agrees with the host's, bit for bit.
    in_step = jax.jit(lambda i, e: step._unpacked(step._packed(i, e)))(
        jax.numpy.asarray(ints, "int32"), jax.numpy.asarray(error, "float32")
    )
    assert np.asarray(in_step[0]).tolist() == ints
    np.testing.assert_array_equal(np.asarray(in_step[1]), np.float32(error))


def test_the_step_donates_its_counters_and_the_verdict_still_reads():
    # Each call's counters are the next call's input, donated as the
    # state is: the host reads the verdict before the next step takes
    # them, and a failure read there is raised before that step runs.
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    seen = []

    class Counters(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(self._model.train_function.counters)  # no sync

    _fit(model, x[:16], y[:16])
    _fit(model, x[32:64], y[32:64], callbacks=[Counters()])
    assert len(seen) == 2
    assert seen[0].is_deleted() and not seen[1].is_deleted()
    assert step.host_counters(seen[1])[0].tolist() == [0] * 5
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x[16:], y[16:])
    assert info.value.step == 4 and info.value.cause == "loss"
    assert int(model.optimizer.iterations) == 3
    # The flag is cleared once raised, and the model trains on.
    _fit(model, x[32:], y[32:])
    assert int(model.optimizer.iterations) == 5


def test_the_verdict_is_read_at_most_once_per_interval(monkeypatch):
    # A read during the epoch costs the fit loop a sync with the running
    # step: at most one per READ_INTERVAL. With an interval longer than
    # the fit, its calls read it once (the first); the failure of step 2
    # is raised at the epoch's end, before its callbacks, the weights
    # from before it.
    monkeypatch.setattr(train_function, "READ_INTERVAL", 3600.0)
    reads = []
    read = train_function._failed_step

    def counted(counters):
        reads.append(sys._getframe(1).f_code.co_name)  # who reads
        return read(counters)

    monkeypatch.setattr(train_function, "_failed_step", counted)
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    reference = helpers.compile_model(helpers.mlp())
    _fit(reference, x[:16], y[:16])
    record = _Record()
    reads.clear()
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x, y, epochs=2, callbacks=[record])
    assert info.value.step == 2
    assert record.batches == [0, 1, 2, 3]  # every batch of the epoch
    assert record.epochs == [] and not record.ended
    # The calls' one read (the first call's), then the syncs' (`check`).
    assert reads.count("_call") == 1, reads
    assert reads[0] == "_call" and reads[1] == "check", reads
    helpers.assert_close(
        helpers.weights(reference), helpers.weights(model), atol=0
    )


def _nan_gradient_model(policy):
    """A model whose loss is finite and whose gradient is not: the
    `where(h > 0, sqrt(h), 0)` of a linear layer (the gradient of the
    branch not taken is `0 * nan`)."""
    keras.utils.set_random_seed(1)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, name="fc1")(inputs)
    h = keras.layers.Lambda(
        lambda t: keras.ops.where(t > 0, keras.ops.sqrt(t), 0.0), name="root"
    )(h)
    outputs = keras.layers.Dense(3, name="logits")(h)
    policy = keras_slim.GradientPolicy(**policy)
    model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    return helpers.compile_model(model)


@pytest.mark.parametrize(
    "clip", [{}, {"clip_norm": 1.0}, {"clip_global_norm": 1.0}]
)
def test_a_non_finite_gradient_of_a_finite_loss_fails(clip):
    # The check reads the gradients through their global norm: one
    # reduction over them all without a clip, the clip's per-gradient
    # norms with one.
    x, y = helpers.data()
    model = _nan_gradient_model(clip)
    model.build((None, 8))
    before = helpers.weights(model)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x, y)
    assert info.value.step == 1
    assert info.value.cause == "gradient"
    assert np.isfinite(info.value.loss)
    after = helpers.weights(model)
    for key in before:
        assert np.array_equal(before[key], after[key], equal_nan=True), key


@pytest.mark.parametrize(
    "value",
    [[np.nan, 1.0], [np.inf], [-np.inf, 2.0], [0.0], np.zeros([0, 3])],
    ids=["nan", "inf", "-inf", "zero", "empty"],
)
@pytest.mark.parametrize("flag", [True, False])
def test_the_link_of_the_gated_updates_changes_no_flag(value, flag):
    # On XLA:CPU the gated assignments wait for one another through
    # `_after`: a dependency on the value that leaves the flag as it is,
    # whatever the value, and that XLA's simplifier keeps (a compare of
    # the value stays in the compiled program).
    value = jax.numpy.asarray(value, "float32")
    linked = jax.jit(step._after)
    assert bool(linked(jax.numpy.asarray(flag), value)) is flag
    if value.size:
        compiled = linked.lower(jax.numpy.asarray(flag), value).compile()
        assert "compare(" in compiled.as_text()


@pytest.mark.parametrize("validation", [False, True])
def test_a_failure_in_an_epochs_last_call_is_raised_before_its_end(
    validation,
):
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    record = _Record()
    extra = {"validation_data": (x[:16], y[:16])} if validation else {}
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x[:32], y[:32], epochs=3, callbacks=[record], **extra)
    assert info.value.step == 2
    assert record.batches == [0, 1]
    assert record.epochs == [] and not record.ended
    assert int(model.optimizer.iterations) == 1
    # Raised once: the model trains on afterwards.
    _fit(model, x[32:], y[32:])
    assert int(model.optimizer.iterations) == 3


def test_train_on_batch_raises_for_its_own_failing_step():
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    model.train_on_batch(x[:16], y[:16])
    before = helpers.weights(model)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.train_on_batch(x[16:32], y[16:32])
    assert info.value.step == 2
    helpers.assert_close(before, helpers.weights(model), atol=0)
    model.train_on_batch(x[32:48], y[32:48])
    assert int(model.optimizer.iterations) == 2


def test_a_callback_reading_the_model_sees_the_failure_at_once():
    x, y = _nan_data()
    model = helpers.compile_model(helpers.mlp())
    seen = []

    class Reads(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(int(self.model.optimizer.iterations))

    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        _fit(model, x, y, callbacks=[Reads()])
    assert seen == [1]
    assert int(model.optimizer.iterations) == 1


def _momentum():
    return keras.optimizers.SGD(0.1, momentum=0.9, weight_decay=0.01)


class _Skip(keras.callbacks.Callback):
    """Declares skipping, as `NanLossGuard(fail=False)` does."""

    def step_options(self, model):
        return {"raise_on_nonfinite": False}


def test_a_skipped_step_is_counted_and_advances_the_step():
    x, y = _nan_data()
    # Momentum, not Adam: its update does not depend on the step count,
    # which the skipped step advances.
    model = helpers.compile_model(helpers.mlp(), _momentum())
    reference = helpers.compile_model(helpers.mlp(), _momentum())
    _fit(model, x, y, callbacks=[_Skip()])
    assert model.skipped_steps == (1, 2, 2)
    # The skipped step's NaN loss is not in the reported mean.
    assert np.isfinite(model.get_metrics_result()["loss"])
    assert int(model.optimizer.iterations) == 4
    # The same as the run without the bad batch, but for the step count.
    keep = np.r_[0:16, 32:64]
    _fit(reference, x[keep], y[keep])
    a, b = helpers.weights(reference), helpers.weights(model)
    keys = [k for k in a if "iteration" not in k]
    helpers.assert_close(a, b, keys=keys, atol=1e-6)
    for key in a:
        assert np.all(np.isfinite(b[key])), key


def test_mixed_float16_overflow_skips_the_step_and_halves_the_scale():
    keras.config.set_dtype_policy("mixed_float16")
    try:
        x, y = helpers.data()
        # A scale too large for float16: the first step's gradients
        # overflow, its loss stays finite; the next step applies.
        optimizer = keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(0.1), initial_scale=2.0**40
        )
        model = helpers.compile_model(helpers.mlp(), optimizer)
        model.build((None, 8))
        optimizer.build(model.trainable_variables)
        before = helpers.weights(model)
        _fit(model, x[:16], y[:16])
        after = helpers.weights(model)
        assert model.skipped_steps == (1, 1, 1)
        assert float(optimizer.dynamic_scale) == 2.0**39
        assert int(optimizer.iterations) == 1
        for key in model.get_layer("fc1").kernel.path, "logits/bias":
            assert np.array_equal(before[key], after[key])
    finally:
        keras.config.set_dtype_policy("float32")


def test_mixed_bfloat16_trains_under_the_policy():
    keras.config.set_dtype_policy("mixed_bfloat16")
    try:
        _, one = _trained(helpers.POLICIES["full"])
        _, four = _trained(helpers.POLICIES["full"], _data_parallel())
    finally:
        keras.config.set_dtype_policy("float32")
    helpers.assert_close(one, four, atol=1e-2)


@pytest.mark.parametrize("name", ["default", "full"])
def test_accumulation_of_k_micro_batches_is_one_step_on_their_union(name):
    x, y = helpers.data()
    policy = helpers.POLICIES[name]
    accumulating = helpers.compile_model(
        helpers.mlp(policy),
        keras.optimizers.AdamW(0.01, gradient_accumulation_steps=4),
    )
    whole = helpers.compile_model(
        helpers.mlp(policy), keras.optimizers.AdamW(0.01)
    )
    a = _fit(accumulating, x, y, batch_size=8)  # 8 micro-batches
    b = _fit(whole, x, y, batch_size=32)  # 2 steps
    assert int(accumulating.optimizer.iterations) == 2
    keys = [k for k in b if "iteration" not in k and "accumulat" not in k]
    helpers.assert_close(b, a, keys=keys)


def test_accumulation_with_moving_averages_overwritten():
    x, y = helpers.data()

    def optimizer(**kwargs):
        return keras.optimizers.SGD(
            0.1, use_ema=True, ema_momentum=0.5, ema_overwrite_frequency=2,
            **kwargs,
        )  # fmt: skip

    accumulating = helpers.compile_model(
        helpers.mlp(), optimizer(gradient_accumulation_steps=2)
    )
    whole = helpers.compile_model(helpers.mlp(), optimizer())
    a = _fit(accumulating, x, y, batch_size=8)
    b = _fit(whole, x, y, batch_size=16)
    keys = [k for k in b if "iteration" not in k and "accumulat" not in k]
    helpers.assert_close(b, a, keys=keys)


def test_train_on_batch_applies_the_policy():
    x, y = helpers.data(16)
    model = helpers.compile_model(helpers.mlp({"freeze": ["fc1/.*"]}))
    model.build((None, 8))
    before = np.array(model.get_layer("fc1").kernel)
    logs = model.train_on_batch(x, y, return_dict=True)
    assert np.isfinite(logs["loss"])
    assert int(model.optimizer.iterations) == 1
    assert np.array_equal(before, np.array(model.get_layer("fc1").kernel))


def test_the_step_is_one_compiled_program_per_run():
    x, y = helpers.data()
    model = helpers.compile_model(helpers.mlp(helpers.POLICIES["full"]))
    _fit(model, x, y, epochs=2)
    function = model.train_function
    _fit(model, x, y)
    assert model.train_function is function
    assert isinstance(model.get_layer("fc1").kernel.value, jax.Array)
    assert function._step._cache_size() == 1


def test_the_step_compiles_once_under_data_parallel():
    # The counters start replicated, as the step returns them: the first
    # call and the next ones are one program.
    x, y = helpers.data()
    with _data_parallel().scope():
        model = helpers.compile_model(helpers.mlp(helpers.POLICIES["full"]))
        _fit(model, x, y, epochs=2)
    assert model.train_function._step._cache_size() == 1


class _Subclassed(keras_slim.SlimModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fc1 = keras.layers.Dense(16, activation="relu", name="fc1")
        self.logits = keras.layers.Dense(3, name="logits")

    def call(self, x):
        return self.logits(self.fc1(x))


def test_a_subclassed_model_resolves_its_policy_once_built():
    x, y = helpers.data()
    model = _Subclassed(
        gradient_policy=keras_slim.GradientPolicy(freeze=[".*fc1/.*"])
    )
    helpers.compile_model(model)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    first = np.array(model.fc1.kernel)
    model.fit(x, y, batch_size=16, epochs=1, verbose=0)
    assert np.array_equal(first, np.array(model.fc1.kernel))
    assert int(model.optimizer.iterations) == 8
