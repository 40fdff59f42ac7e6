"""SlimModel under MirroredStrategy on 4 logical CPUs equals one device.

Same initial weights, same global batch (64 = 4 x 16), same data order: the
final weights must agree to 1e-5 and the reported loss and metrics to 1e-5,
for each policy field. Keras 3's own optimizer clipping, which clips each
replica's gradient before the sum, fails this comparison (shown last).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import mlp
from tests.helpers import weights

POLICIES = {
    "default": {},
    "clip_global_norm": {"clip_global_norm": 0.05},
    "no_check_numerics": {"check_numerics": False},
    # Every other stage at once: each alone is checked on one device.
    "all": {
        "multipliers": {"logits/.*": 3.0, r"fc1/bias": 0.5},
        "freeze": ["logits/bias"],
        "trainable": ["fc1", "logits"],
        "clip_norm": 0.05,
    },
}


def _train(policy, strategy=None, steps_per_execution=1, epochs=3):
    x, y = classification_data(256)

    def build():
        model = mlp(keras_slim.GradientPolicy(**policy))
        return compile_model(model, steps_per_execution=steps_per_execution)

    if strategy is None:
        model = build()
    else:
        with strategy.scope():
            model = build()
    history = model.fit(
        x, y, batch_size=64, epochs=epochs, shuffle=False, verbose=0
    )
    return model, history.history


def _assert_same(one, many):
    (m1, h1), (m4, h4) = one, many
    assert max_abs_diff(weights(m1), weights(m4)) < 1e-5
    for key in h1:
        np.testing.assert_allclose(h4[key], h1[key], rtol=1e-5, atol=1e-6)
    assert global_step(m4) == global_step(m1)


@pytest.mark.parametrize("name", list(POLICIES))
def test_four_replicas_equal_one_device(mirrored, name):
    _assert_same(_train(POLICIES[name]), _train(POLICIES[name], mirrored))


def test_steps_per_execution_under_mirrored(mirrored):
    policy = POLICIES["all"]
    # 4 batches an epoch in executions of 3: one full, one partial.
    _assert_same(_train(policy), _train(policy, mirrored, 3))


def test_frozen_bitwise_unchanged_under_mirrored_adamw(mirrored):
    x, y = classification_data(128)
    with mirrored.scope():
        model = compile_model(
            mlp(keras_slim.GradientPolicy(freeze=["fc1/.*"])),
            keras.optimizers.AdamW(0.05, weight_decay=0.5),
        )
    before = weights(model)
    model.fit(x, y, batch_size=64, epochs=2, verbose=0)
    after = weights(model)
    np.testing.assert_array_equal(after[0], before[0])
    np.testing.assert_array_equal(after[1], before[1])
    assert not np.array_equal(after[2], before[2])


def test_nan_under_mirrored_skips_step_on_every_replica(mirrored):
    x, y = classification_data(256)
    x[200] = np.nan  # fourth global batch
    with mirrored.scope():
        model = compile_model(mlp(), keras.optimizers.Adam(0.01))
    reference = compile_model(mlp(), keras.optimizers.Adam(0.01))
    reference.fit(x[:192], y[:192], batch_size=64, shuffle=False, verbose=0)
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(x, y, batch_size=64, shuffle=False, verbose=0)
    assert info.value.step == 4
    assert global_step(model) == 3
    assert max_abs_diff(weights(model), weights(reference)) < 1e-5
    for variable in model.weights:
        replicas = variable.value.values
        for replica in replicas[1:]:
            np.testing.assert_array_equal(replica.numpy(), replicas[0].numpy())


def _embedding_model(policy):
    keras.utils.set_random_seed(3)
    inputs = keras.Input((5,), dtype="int32")
    embedded = keras.layers.Embedding(50, 8, name="embed")(inputs)
    pooled = keras.layers.GlobalAveragePooling1D()(embedded)
    outputs = keras.layers.Dense(3, name="logits")(pooled)
    model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    return compile_model(model, keras.optimizers.SGD(1.0))


def test_sparse_embedding_gradients_clip_norm_under_mirrored(mirrored):
    rng = np.random.default_rng(0)
    x = rng.integers(0, 50, size=(128, 5)).astype("int32")
    y = rng.integers(0, 3, size=128).astype("int32")
    policy = keras_slim.GradientPolicy(clip_norm=0.01)
    results = []
    for strategy in (None, mirrored):
        if strategy is None:
            model = _embedding_model(policy)
        else:
            with strategy.scope():
                model = _embedding_model(policy)
        model.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0)
        results.append(weights(model))
    assert max_abs_diff(*results) < 1e-5
    # The clip was active: without it the embedding ends elsewhere.
    unclipped = _embedding_model(keras_slim.GradientPolicy())
    unclipped.fit(x, y, batch_size=64, epochs=2, shuffle=False, verbose=0)
    assert max_abs_diff(weights(unclipped), results[0]) > 1e-3


def test_keras_optimizer_clipnorm_is_not_exact_under_mirrored(mirrored):
    """Why SlimModel exists: Keras clips per replica, before the sum."""
    results = []
    for strategy in (None, mirrored):

        def build():
            model = mlp(cls=keras.Model)
            return compile_model(
                model, keras.optimizers.SGD(0.5, momentum=0.9, clipnorm=0.05)
            )

        if strategy is None:
            model = build()
        else:
            with strategy.scope():
                model = build()
        x, y = classification_data(256)
        model.fit(x, y, batch_size=64, epochs=3, shuffle=False, verbose=0)
        results.append(weights(model))
    assert max_abs_diff(*results) > 1e-3


def test_a_nan_gradient_on_one_replica_is_skipped_on_all(mirrored):
    """The gradient check runs on the sum: one replica's NaN gradient
    (under a finite loss) skips the step on every replica, which still
    counts it, as on one device."""
    from keras_slim.callbacks import NanLossGuard
    from tests.callbacks.test_nan_loss_guard import guarded_sqrt
    from tests.callbacks.test_nan_loss_guard import nan_gradient_batches

    x, y, bad = nan_gradient_batches()  # bad's first row: replica 0's
    data = tf.data.Dataset.from_tensor_slices(
        (np.stack([x, bad, x]), np.stack([y] * 3))
    )
    with mirrored.scope():
        model = guarded_sqrt(keras_slim.SlimModel)
    model.fit(data, verbose=0, callbacks=[NanLossGuard(fail=False)])
    reference = guarded_sqrt(keras_slim.SlimModel)
    reference.fit(data, verbose=0, callbacks=[NanLossGuard(fail=False)])
    assert global_step(model) == 3
    assert global_step(reference) == 3
    assert max_abs_diff(weights(model), weights(reference)) < 1e-5
    for variable in model.weights:
        replicas = variable.value.values
        for replica in replicas[1:]:
            np.testing.assert_array_equal(replica.numpy(), replicas[0].numpy())
