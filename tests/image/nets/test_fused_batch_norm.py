"""keras_slim.image.nets._fused_batch_norm against tf_slim's batch_norm.

The reference is `slim.batch_norm` itself (its default `fused=None`, as
TF-Slim's nets call it) in TF1 graph mode, run in a separate process:
three training steps on three batches (outputs, the gradients of a
weighted sum, the moving averages after each update), then inference.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image.nets._fused_batch_norm import FusedBatchNormalization
from tests import tf_slim_peer

# (decay, epsilon, center, scale): inception's (no gamma), mobilenet's,
# resnet's epsilon below the kernel's floor.
CASES = [
    (0.9997, 0.001, True, False),
    (0.9, 0.001, True, True),
    (0.5, 1e-5, False, True),
]
SHAPE = (4, 5, 6, 3)


def _batches():
    rng = np.random.default_rng(0)
    return [rng.normal(i, 1.0 + i, SHAPE).astype("float32") for i in range(4)]


def _weights():
    return np.random.default_rng(1).normal(size=SHAPE).astype("float32")


REFERENCE = """
cases, batches, weights = {cases}, np.array({batches}, "float32"), np.array(
    {weights}, "float32")
results = []
for decay, epsilon, center, scale in cases:
    with tf.Graph().as_default():
        x = tf1.placeholder(tf.float32, {shape})
        y = slim.batch_norm(
            x, decay=decay, epsilon=epsilon, center=center, scale=scale,
            is_training=True, scope="BatchNorm")
        objective = tf.reduce_sum(y * weights)
        params = [v for v in tf1.trainable_variables()]
        grads = tf1.gradients(objective, [x] + params)
        updates = tf1.get_collection(tf1.GraphKeys.UPDATE_OPS)
        mean, variance = [
            v for v in tf1.global_variables() if "moving" in v.op.name]
        inference = slim.batch_norm(
            x, decay=decay, epsilon=epsilon, center=center, scale=scale,
            is_training=False, scope="BatchNorm", reuse=True)
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            steps = []
            for batch in batches[:3]:
                out, g, _ = session.run([y, grads, updates], {{x: batch}})
                steps.append({{
                    "y": out.tolist(), "grads": [a.tolist() for a in g],
                    "mean": session.run(mean).tolist(),
                    "variance": session.run(variance).tolist()}})
            results.append({{
                "types": sorted({{
                    op.type for op in tf1.get_default_graph().get_operations()
                }}),
                "steps": steps,
                "params": [v.op.name for v in params],
                "inference": session.run(
                    inference, {{x: batches[3]}}).tolist()}})
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def reference():
    code = REFERENCE.format(
        cases=CASES,
        batches=np.array(_batches()).tolist(),
        weights=_weights().tolist(),
        shape=list(SHAPE),
    )
    return tf_slim_peer.run(code)


def _layer(decay, epsilon, center, scale):
    layer = FusedBatchNormalization(
        momentum=decay, epsilon=epsilon, center=center, scale=scale
    )
    layer.build(SHAPE)
    return layer


@pytest.mark.parametrize("case", range(len(CASES)))
def test_train_steps_and_inference_equal_tf_slims(reference, case):
    expected = reference[case]
    layer = _layer(*CASES[case])
    assert [v.name for v in layer.trainable_variables] == [
        p.rsplit("/", 1)[-1] for p in expected["params"]
    ]
    weights = tf.constant(_weights())
    batches = _batches()
    for batch, step in zip(batches[:3], expected["steps"]):
        x = tf.constant(batch)
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x, training=True)
            objective = tf.reduce_sum(y * weights)
        grads = tape.gradient(objective, [x, *layer.trainable_variables])
        np.testing.assert_allclose(y, step["y"], rtol=1e-5, atol=1e-5)
        for ours, theirs in zip(grads, step["grads"]):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-4)
        # The moving variance tracks the batch variance with Bessel's
        # correction, as TF-Slim's did.
        np.testing.assert_allclose(layer.moving_mean, step["mean"], rtol=1e-6)
        np.testing.assert_allclose(
            layer.moving_variance, step["variance"], rtol=1e-6
        )
    np.testing.assert_allclose(
        layer(batches[3], training=False),
        expected["inference"],
        rtol=1e-5,
        atol=1e-5,
    )


def test_keeps_keras_batch_norms_variables_and_config():
    fused = _layer(0.9, 0.001, True, True)
    plain = keras.layers.BatchNormalization(momentum=0.9, epsilon=0.001)
    plain.build(SHAPE)
    assert [v.path for v in fused.weights] == [
        v.path.replace(plain.name, fused.name) for v in plain.weights
    ]
    again = FusedBatchNormalization.from_config(fused.get_config())
    assert (again.momentum, again.epsilon, again.center, again.scale) == (
        0.9,
        0.001,
        True,
        True,
    )
    restored = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(fused)
    )
    assert type(restored) is FusedBatchNormalization


def test_a_layer_that_is_not_trainable_normalizes_with_the_moving_averages():
    layer = _layer(0.9, 0.001, True, True)
    layer.trainable = False
    batch = _batches()[1]
    np.testing.assert_allclose(
        layer(batch, training=True),
        layer(batch, training=False),
    )
    np.testing.assert_array_equal(layer.moving_mean, np.zeros(3))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"axis": 1}, "Received: axis=1"),
        ({"synchronized": True}, "Received: synchronized=True"),
        ({"renorm": True}, "Received: renorm=True"),
    ],
)
def test_what_the_fused_kernel_cannot_do_is_an_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        FusedBatchNormalization(**kwargs)


def test_inputs_that_are_not_images_are_an_error():
    with pytest.raises(ValueError, match=r"Received: input_shape=\(2, 3\)"):
        FusedBatchNormalization()(np.zeros((2, 3), "float32"))


def test_reference_runs_tf_slims_fused_kernel(reference):
    """The reference is TF-Slim's fused kernel, not a slower one."""
    assert all("FusedBatchNormV3" in case["types"] for case in reference)


def test_an_empty_batch_moves_no_average():
    layer = _layer(0.9, 0.001, True, True)
    layer(np.zeros((0,) + SHAPE[1:], "float32"), training=True)
    np.testing.assert_array_equal(layer.moving_mean, np.zeros(3))
    np.testing.assert_array_equal(layer.moving_variance, np.ones(3))
