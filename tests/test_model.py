"""SlimModel on one device: policy effects against a hand-computed update,
history identical to keras.Model, NaN gating, serialization, wrap."""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _run
from keras_slim._step import apply as step_apply
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import mlp
from tests.helpers import weights


def _reference_gradients(model, x, y):
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    return tape.gradient(loss, model.trainable_variables)


def test_policy_update_equals_hand_computed_sgd_step():
    x, y = classification_data(64)
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 3.0, r".*/bias": 0.5},
        freeze=["fc1/bias"],
        clip_norm=0.05,
    )
    model = compile_model(mlp(policy), keras.optimizers.SGD(0.1))
    w0 = weights(model)
    grads = [g.numpy() for g in _reference_gradients(model, x, y)]
    model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
    multipliers = [1.0, None, 3.0, 1.5]  # fc1/bias is frozen
    for w_before, g, m, v in zip(w0, grads, multipliers, model.weights):
        if m is None:
            np.testing.assert_array_equal(v.numpy(), w_before)
            continue
        g = g * m
        g = g * min(1.0, 0.05 / np.linalg.norm(g))
        np.testing.assert_allclose(v.numpy(), w_before - 0.1 * g, atol=1e-7)


def test_global_norm_clip_update_equals_hand_computed():
    x, y = classification_data(64)
    policy = keras_slim.GradientPolicy(clip_global_norm=0.01)
    model = compile_model(mlp(policy), keras.optimizers.SGD(1.0))
    w0 = weights(model)
    grads = [g.numpy() for g in _reference_gradients(model, x, y)]
    norm = np.sqrt(sum(np.sum(g**2) for g in grads))
    assert norm > 0.01
    model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
    for w_before, g, v in zip(w0, grads, model.weights):
        np.testing.assert_allclose(
            v.numpy(), w_before - g * 0.01 / norm, atol=1e-7
        )


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_history_equals_builtin_train_step(steps_per_execution):
    x, y = classification_data(192)
    sw = np.linspace(0.5, 1.5, 192).astype("float32")
    histories, finals = [], []
    for cls in (keras.Model, keras_slim.SlimModel):
        model = compile_model(
            mlp(cls=cls, regularizer=keras.regularizers.L2(0.01)),
            steps_per_execution=steps_per_execution,
        )
        history = model.fit(
            x,
            y,
            sample_weight=sw,
            batch_size=32,
            epochs=2,
            shuffle=False,
            verbose=0,
        )
        histories.append(history.history)
        finals.append(weights(model))
    assert histories[0].keys() == histories[1].keys()
    for key in histories[0]:
        np.testing.assert_allclose(
            histories[1][key], histories[0][key], rtol=1e-6
        )
    assert max_abs_diff(*finals) < 1e-6


@pytest.mark.parametrize(
    "optimizer",
    [
        lambda: keras.optimizers.AdamW(0.05, weight_decay=0.5),
        lambda: keras.optimizers.SGD(0.5, momentum=0.9),
    ],
    ids=["adamw_weight_decay", "sgd_momentum"],
)
def test_frozen_variables_stay_bitwise_unchanged(optimizer):
    x, y = classification_data(128)
    policy = keras_slim.GradientPolicy(freeze=["fc1/.*"])
    model = compile_model(mlp(policy), optimizer())
    before = weights(model)
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)
    after = weights(model)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert not np.array_equal(after[2], before[2])


def test_trainable_patterns_train_only_matching():
    x, y = classification_data(64)
    policy = keras_slim.GradientPolicy(trainable=["logits/kernel"])
    model = compile_model(mlp(policy))
    before = weights(model)
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)
    after = weights(model)
    changed = [not np.array_equal(a, b) for a, b in zip(after, before)]
    assert changed == [False, False, True, False]


def _nan_data():
    x, y = classification_data(128)
    x[70] = np.nan  # in the third batch of 32
    return x, y


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_nan_loss_skips_step_and_raises(steps_per_execution):
    x, y = _nan_data()
    model = compile_model(
        mlp(),
        keras.optimizers.Adam(0.01),
        steps_per_execution=steps_per_execution,
    )
    reference = compile_model(mlp(), keras.optimizers.Adam(0.01))
    reference.fit(x[:64], y[:64], batch_size=32, shuffle=False, verbose=0)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
    assert info.value.step == 3
    assert np.isnan(info.value.loss)
    assert "loss = nan at global step 3" in str(info.value)
    assert "LossTensor is inf or nan" in str(info.value)
    assert global_step(model) == 2
    # The two finite steps ran, the NaN step changed nothing.
    assert max_abs_diff(weights(model), weights(reference)) == 0.0
    for variable in model.optimizer.variables:
        assert np.all(np.isfinite(variable.numpy()))


def test_infinite_loss_is_caught_too():
    x, y = classification_data(32)
    x[3] = 1e30
    model = compile_model(mlp(), keras.optimizers.SGD(0.1))
    model.get_layer("fc1").kernel.assign(np.full((8, 16), 1e30, "float32"))
    model.get_layer("fc1").activation = keras.activations.linear
    before = weights(model)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(x, y, batch_size=32, verbose=0)
    assert not np.isfinite(info.value.loss)
    assert max_abs_diff(weights(model), before) == 0.0


def test_check_numerics_false_trains_through():
    x, y = _nan_data()
    policy = keras_slim.GradientPolicy(check_numerics=False)
    model = compile_model(mlp(policy))
    history = model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
    assert np.isnan(history.history["loss"][0])
    assert global_step(model) == 4


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_nan_check_under_xla_fails_the_step(steps_per_execution):
    """XLA compiles the step's Assert away: the compiled step returns its
    verdict and the loop around it fails the step, which changed nothing."""
    x, y = _nan_data()
    model = compile_model(
        mlp(),
        keras.optimizers.Adam(0.01),
        steps_per_execution=steps_per_execution,
        jit_compile=True,
    )
    reference = compile_model(
        mlp(), keras.optimizers.Adam(0.01), jit_compile=True
    )
    reference.fit(x[:64], y[:64], batch_size=32, shuffle=False, verbose=0)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
    assert info.value.step == 3
    assert np.isnan(info.value.loss)
    assert info.value.cause == "loss"
    assert global_step(model) == 2
    assert max_abs_diff(weights(model), weights(reference)) == 0.0
    for variable in model.optimizer.variables:
        assert np.all(np.isfinite(variable.numpy()))


@tf.custom_gradient
def _nan_gradient_above_100(h):
    """The identity, whose gradient is NaN where `|h| > 100`."""

    def grad(upstream):
        return tf.where(tf.abs(h) > 100.0, float("nan"), upstream)

    return tf.identity(h), grad


def test_nan_gradient_under_xla_names_the_gradient():
    """A finite loss with a NaN gradient fails under XLA as without it.
    (XLA computes `guarded_sqrt`'s gradient without the NaN: a custom
    gradient makes one that survives its simplifications.)"""
    x, y = classification_data(64)
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(4, name="fc1")(inputs)
    hidden = keras.layers.Lambda(_nan_gradient_above_100)(hidden)
    outputs = keras.layers.Dense(3, name="logits")(keras.ops.tanh(hidden))
    model = compile_model(
        keras_slim.SlimModel(inputs, outputs), jit_compile=True
    )
    model.fit(x[:32], y[:32], batch_size=32, verbose=0)
    before = weights(model)
    x[40] = 1e4  # in the second batch: tanh keeps the loss finite
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(x[32:], y[32:], batch_size=32, verbose=0)
    error = info.value
    assert (error.step, error.cause) == (2, "gradient")
    assert np.isfinite(error.loss)
    assert np.isnan(error.gradient_norm)
    assert max_abs_diff(weights(model), before) == 0.0


def test_xla_with_the_check_trains_like_without_xla():
    x, y = classification_data(128)
    policy = keras_slim.GradientPolicy(
        clip_norm=0.1, multipliers={"fc1/.*": 0.5}, freeze=["logits/bias"]
    )
    results = []
    for jit in (False, True):
        model = compile_model(mlp(policy), jit_compile=jit)
        model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
        results.append(weights(model))
        assert model.jit_compile is jit
    assert max_abs_diff(*results) < 1e-5


def test_auto_jit_compile_follows_keras(monkeypatch):
    """XLA where Keras picks it, the numeric check kept: on an accelerator,
    without a distribution strategy; never on a CPU-only machine."""
    assert compile_model(mlp(), jit_compile="auto").jit_compile is False
    devices = tf.config.list_physical_devices()
    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda *a: [*devices, gpu]
    )
    assert compile_model(mlp(), jit_compile="auto").jit_compile is True


def test_jit_compile_with_several_local_replicas_is_an_error(mirrored):
    x, y = classification_data(32)
    with mirrored.scope():
        model = compile_model(mlp(), jit_compile=True)
    with pytest.raises(ValueError, match="jit_compile=True under a strategy"):
        model.fit(x, y, verbose=0)
    assert global_step(model) == 0


def test_jit_compile_without_check_numerics():
    x, y = classification_data(64)
    policy = keras_slim.GradientPolicy(check_numerics=False, clip_norm=0.1)
    results = []
    for jit in (False, True):
        model = compile_model(mlp(policy), jit_compile=jit)
        model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
        results.append(weights(model))
    assert max_abs_diff(*results) < 1e-5


def test_unmatched_pattern_fails_before_any_step():
    x, y = classification_data(32)
    policy = keras_slim.GradientPolicy(multipliers={"conv1/.*": 2.0})
    model = compile_model(mlp(policy))
    before = weights(model)
    with pytest.raises(ValueError, match="'conv1/.\\*' of the gradient"):
        model.fit(x, y, verbose=0)
    assert global_step(model) == 0
    assert max_abs_diff(weights(model), before) == 0.0


def test_policy_is_resolved_once_per_train_function(monkeypatch):
    calls = []
    original = keras_slim.GradientPolicy.resolve
    monkeypatch.setattr(
        keras_slim.GradientPolicy,
        "resolve",
        lambda self, model: calls.append(1) or original(self, model),
    )
    x, y = classification_data(64)
    model = compile_model(mlp(keras_slim.GradientPolicy(clip_norm=1.0)))
    model.fit(x, y, batch_size=8, epochs=3, verbose=0)
    assert len(calls) == 1
    model.gradient_policy = keras_slim.GradientPolicy(freeze=["fc1/.*"])
    before = weights(model)
    model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert len(calls) == 2
    np.testing.assert_array_equal(weights(model)[0], before[0])


def test_gradient_policy_type_is_checked():
    with pytest.raises(TypeError, match="Received: gradient_policy=.clip"):
        mlp("clip")


def test_presummed_context_is_left_clean():
    x, y = classification_data(64)
    model = compile_model(mlp())
    model.fit(x, y, batch_size=32, verbose=0)
    assert step_apply.install(model.optimizer).depth == 0


def test_loss_scale_optimizer_clips_like_unscaled():
    x, y = classification_data(64)
    policy = keras_slim.GradientPolicy(clip_norm=0.05)
    results = []
    for scaled in (False, True):
        optimizer = keras.optimizers.SGD(0.5)
        if scaled:
            optimizer = keras.optimizers.LossScaleOptimizer(
                optimizer, initial_scale=1024.0
            )
        model = compile_model(mlp(policy), optimizer)
        model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0)
        results.append(weights(model))
    assert max_abs_diff(*results) < 1e-6


class Subclassed(keras_slim.SlimModel):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.fc1 = keras.layers.Dense(4, name="fc1")
        self.logits = keras.layers.Dense(3, name="logits")

    def call(self, x, training=False):
        return self.logits(self.fc1(x))


def test_subclassed_slim_model_applies_policy():
    x, y = classification_data(64)
    # A subclassed model's paths start with its name: subclassed/fc1/kernel.
    model = Subclassed(
        gradient_policy=keras_slim.GradientPolicy(freeze=["subclassed/fc1/.*"])
    )
    model(x[:1])
    compile_model(model)
    before = weights(model)
    model.fit(x, y, batch_size=32, verbose=0)
    after = weights(model)
    np.testing.assert_array_equal(after[0], before[0])
    assert not np.array_equal(after[2], before[2])


def test_save_and_load_keeps_policy_and_weights(tmp_path):
    x, y = classification_data(64)
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0}, freeze=["fc1/bias"], clip_norm=0.5
    )
    model = compile_model(mlp(policy))
    model.fit(x, y, batch_size=32, verbose=0)
    model.save(tmp_path / "m.keras")
    loaded = keras.models.load_model(tmp_path / "m.keras")
    assert type(loaded) is keras_slim.model.FunctionalSlimModel
    assert loaded.gradient_policy == policy
    assert max_abs_diff(weights(loaded), weights(model)) == 0.0
    # Both continue identically: optimizer state was saved too.
    model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
    loaded.fit(x, y, batch_size=32, shuffle=False, verbose=0)
    assert max_abs_diff(weights(loaded), weights(model)) < 1e-6


def test_config_round_trip():
    policy = keras_slim.GradientPolicy(trainable=["logits"])
    model = mlp(policy)
    config = model.get_config()
    assert config["gradient_policy"]["config"]["trainable"] == ["logits"]
    revived = keras_slim.SlimModel.from_config(config)
    assert type(revived) is type(model)
    assert revived.gradient_policy == policy
    assert [v.path for v in revived.weights] == [v.path for v in model.weights]


@pytest.mark.parametrize("kind", ["sequential", "functional"])
def test_wrap_shares_layers_and_weights(kind):
    keras.utils.set_random_seed(0)
    if kind == "sequential":
        base = keras.Sequential(
            [
                keras.Input((8,)),
                keras.layers.Dense(16, name="fc1"),
                keras.layers.Dense(3, name="logits"),
            ],
            name="base",
        )
    else:
        base = mlp(cls=keras.Model, name="base")
    compile_model(base)
    policy = keras_slim.GradientPolicy(freeze=[".*fc1/.*"])
    model = keras_slim.wrap(base, policy)
    assert isinstance(model, keras_slim.SlimModel) and model.name == "base"
    assert [v.path for v in model.weights] == [v.path for v in base.weights]
    assert all(a is b for a, b in zip(model.weights, base.weights))
    assert model.compiled and model.gradient_policy is policy
    x, y = classification_data(64)
    np.testing.assert_array_equal(
        model.predict(x, verbose=0), base.predict(x, verbose=0)
    )
    before = weights(model)
    model.fit(x, y, batch_size=32, verbose=0)
    np.testing.assert_array_equal(weights(base)[0], before[0])
    assert not np.array_equal(weights(base)[2], before[2])


def test_wrap_rejects_what_it_cannot_wrap():
    with pytest.raises(TypeError, match="expects a keras.Model"):
        keras_slim.wrap("model")
    with pytest.raises(TypeError, match="Subclass keras_slim.SlimModel"):
        keras_slim.wrap(Subclassed())
    with pytest.raises(TypeError, match="cannot be built from `inputs`"):
        Subclassed(keras.Input((2,)), keras.Input((2,)))
    with pytest.raises(ValueError, match="is not built"):
        keras_slim.wrap(keras.Sequential([keras.layers.Dense(1)]))


def test_subclassed_model_built_on_first_trace():
    x, y = classification_data(64)
    model = compile_model(
        Subclassed(
            gradient_policy=keras_slim.GradientPolicy(
                multipliers={".*/logits/.*": 2.0}
            )
        )
    )
    model.fit(x, y, batch_size=32, verbose=0)
    assert global_step(model) == 2
    assert [v.path for v in model._policy_plan.variables] == [
        "subclassed/fc1/kernel",
        "subclassed/fc1/bias",
        "subclassed/logits/kernel",
        "subclassed/logits/bias",
    ]
    assert model._policy_plan.multipliers == (None, None, 2.0, 2.0)


@pytest.mark.parametrize("jit_compile", [False, True])
def test_nonfinite_step_skipped_silently_when_not_raising(jit_compile):
    """The mode keras_slim.train(fail_on_nan_loss=False) builds on, with
    and without XLA."""
    x, y = _nan_data()

    def build():
        return compile_model(
            mlp(), keras.optimizers.Adam(0.01), jit_compile=jit_compile
        )

    model, reference = build(), build()
    # The batch holding the NaN row is a step that updates nothing but
    # the step count.
    reference.fit(x[:64], y[:64], batch_size=32, shuffle=False, verbose=0)
    reference.optimizer.iterations.assign_add(1)
    reference.fit(x[96:], y[96:], batch_size=32, shuffle=False, verbose=0)
    guard = keras_slim.callbacks.NanLossGuard(fail=False)
    with _run.start(model) as run:
        model.fit(
            x, y, batch_size=32, shuffle=False, verbose=0, callbacks=[guard]
        )
        assert run.step_options.skipped_steps.read() == (1, 3, 3)
    assert global_step(model) == 4
    assert max_abs_diff(weights(model), weights(reference)) < 1e-6


def test_keras_iterates_an_unread_dataset(monkeypatch):
    """Where the train function reads a host feed, Keras's `fit` iterates
    an `UnreadDataset` of the data's length and spec, never read (its
    iterator raises if read): the steps read the host feed."""
    from keras_slim import _keras

    given = []
    original = keras.Model.fit

    def recording(self, x=None, *args, **kwargs):
        given.append(x)
        return original(self, x, *args, **kwargs)

    monkeypatch.setattr(keras.Model, "fit", recording)
    x, y = classification_data(n=64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
    short = compile_model(mlp(), metrics=[])
    for _ in range(4):
        short.fit(data, steps_per_epoch=1, verbose=0)
    assert all(isinstance(g, _keras.UnreadDataset) for g in given)
    assert given[0].element_spec == data.element_spec
    assert int(given[0].cardinality) == tf.data.INFINITE_CARDINALITY
    assert global_step(short) == 4
    untrained = compile_model(mlp(), metrics=[])
    assert max_abs_diff(weights(short), weights(untrained)) > 1e-3


def test_fits_on_one_dataset_prepare_it_once_and_read_its_passes(
    monkeypatch,
):
    """Successive `fit` calls on one reshuffling dataset prepare it once
    (the train function's `InputCache`) and read its successive passes:
    the same weights as a `keras.Model` fitted on those passes' batches
    (read from an identical dataset), in order. Another dataset is
    prepared afresh."""
    from keras_slim._fit import input_options

    prepared = []
    original = input_options.for_fit

    def counting(dataset):
        prepared.append(dataset)
        return original(dataset)

    def shuffled():
        data = tf.data.Dataset.from_tensor_slices(classification_data(n=64))
        return data.shuffle(64, seed=3).batch(16)

    monkeypatch.setattr(input_options, "for_fit", counting)
    model = compile_model(mlp(), metrics=[])
    data = shuffled()
    for _ in range(3):
        model.fit(data, verbose=0)
    assert len(prepared) == 1

    identical = shuffled()
    batches = [batch for _ in range(3) for batch in identical]
    reference = compile_model(mlp(cls=keras.Model), metrics=[])
    reference.fit(
        np.concatenate([x for x, _ in batches]),
        np.concatenate([y for _, y in batches]),
        batch_size=16,
        shuffle=False,
        verbose=0,
    )
    assert max_abs_diff(weights(model), weights(reference)) < 1e-6
    model.fit(data.take(2), verbose=0)
    model.fit(data, verbose=0)
    assert len(prepared) == 3


def test_a_second_fit_without_checkpoints_makes_no_variables():
    """The input position's variables (`DataState`) are made when a
    checkpoint saves or restores them, not by every `fit`."""
    x, y = classification_data(n=64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    model = compile_model(mlp(), metrics=[])
    model.fit(data, verbose=0)  # builds the model and the optimizer
    made = []

    def recording(next_creator, **kwargs):
        made.append(kwargs.get("name"))
        return next_creator(**kwargs)

    with tf.variable_creator_scope(recording):
        model.fit(data, verbose=0)
    assert made == []


@pytest.mark.parametrize(
    "spec",
    [
        (tf.TensorSpec([None, 8]), tf.TensorSpec([None], tf.int32)),
        {"a": tf.TensorSpec([16, 8]), "b": tf.TensorSpec([16], tf.int64)},
        (tf.TensorSpec([None, None, 3]), tf.TensorSpec([None])),
        (tf.TensorSpec([4, 8]), tf.TensorSpec([None])),
    ],
)
@pytest.mark.parametrize("cardinality", [3, tf.data.INFINITE_CARDINALITY, -2])
def test_keras_counts_what_the_unread_dataset_says(spec, cardinality):
    """Keras's adapter reads the input's spec and length from it: the
    batches of a finite input, none (until the data runs out) otherwise."""
    from keras.src.trainers.data_adapters import get_data_adapter

    from keras_slim import _keras

    unread = _keras.UnreadDataset(spec, int(cardinality))
    assert unread.element_spec == spec
    adapter = get_data_adapter(unread)
    assert adapter.num_batches == (3 if cardinality == 3 else None)
