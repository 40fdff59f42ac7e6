"""keras_slim.gradients: exact values, slim's error cases, TF-Slim as peer."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim import gradients
from tests import tf_slim_peer


def keras_var(path_name, value):
    layer = keras.layers.Dense(1, name=path_name)
    layer.build((None, 1))
    layer.kernel.assign(np.asarray(value, "float32").reshape(1, 1))
    return layer.kernel


@pytest.fixture
def kv():
    layer = keras.layers.Dense(2, name="fc1")
    layer.build((None, 2))
    return layer.kernel, layer.bias


def test_variable_path_keras_and_tf(kv):
    kernel, bias = kv
    assert gradients.variable_path(kernel) == "fc1/kernel"
    assert gradients.variable_path(bias) == "fc1/bias"
    with tf.name_scope("scope"):
        tfv = tf.Variable(1.0, name="w")
    assert tfv.name == "scope/w:0"
    assert gradients.variable_path(tfv) == "scope/w"


def test_clip_gradient_norms_dense_none_and_sparse(kv):
    kernel, bias = kv
    sparse = tf.IndexedSlices(
        tf.constant([[3.0, 0.0], [0.0, 4.0]]),
        tf.constant([1, 3]),
        tf.constant([5, 2]),
    )
    out = gradients.clip_gradient_norms(
        [
            (tf.constant([3.0, 4.0]), bias),
            (None, kernel),
            (sparse, kernel),
            (tf.constant([0.3, 0.4]), bias),
        ],
        1.0,
    )
    np.testing.assert_allclose(out[0][0].numpy(), [0.6, 0.8], rtol=1e-6)
    assert out[1][0] is None and out[1][1] is kernel
    assert isinstance(out[2][0], tf.IndexedSlices)
    np.testing.assert_array_equal(out[2][0].indices.numpy(), [1, 3])
    np.testing.assert_allclose(
        out[2][0].values.numpy(), [[0.6, 0.0], [0.0, 0.8]], rtol=1e-6
    )
    np.testing.assert_allclose(out[3][0].numpy(), [0.3, 0.4], rtol=1e-6)


def test_clip_by_global_norm(kv):
    kernel, bias = kv
    out = gradients.clip_by_global_norm(
        [
            (tf.constant([3.0]), bias),
            (None, kernel),
            (tf.constant([4.0]), kernel),
        ],
        1.0,
    )
    np.testing.assert_allclose(out[0][0].numpy(), [0.6], rtol=1e-6)
    assert out[1][0] is None
    np.testing.assert_allclose(out[2][0].numpy(), [0.8], rtol=1e-6)


def test_multiply_gradients_by_path_ref_and_tensor(kv):
    kernel, bias = kv
    tfv = tf.Variable([1.0, 1.0], name="tfvar")
    other = keras_var("other", 1.0)
    sparse = tf.IndexedSlices(tf.constant([[1.0, 2.0]]), tf.constant([0]))
    out = gradients.multiply_gradients(
        [
            (tf.constant([1.0, 2.0]), bias),
            (sparse, kernel),
            (tf.constant([1.0, 1.0]), tfv),
            (tf.constant([5.0]), other),
        ],
        {"fc1/bias": 3.0, "fc1/kernel": tf.constant(0.5), tfv.ref(): 2},
    )
    np.testing.assert_array_equal(out[0][0].numpy(), [3.0, 6.0])
    assert isinstance(out[1][0], tf.IndexedSlices)
    np.testing.assert_array_equal(out[1][0].values.numpy(), [[0.5, 1.0]])
    np.testing.assert_array_equal(out[1][0].indices.numpy(), [0])
    np.testing.assert_array_equal(out[2][0].numpy(), [2.0, 2.0])
    np.testing.assert_array_equal(out[3][0].numpy(), [5.0])


@pytest.mark.parametrize(
    "pairs,multipliers,message",
    [
        ("tuple", {"fc1/bias": 1.0}, "`grads_and_vars` must be a list"),
        ("list", {}, "`gradient_multipliers` is empty"),
        ("list", [("fc1/bias", 1.0)], "`gradient_multipliers` must be a dict"),
        ("none", {"fc1/bias": 2.0}, "Requested multiple of `None` gradient"),
    ],
)
def test_multiply_gradients_errors_where_slim_raises(
    kv, pairs, multipliers, message
):
    _, bias = kv
    pair = (None if pairs == "none" else tf.constant([1.0, 1.0]), bias)
    grads_and_vars = (pair,) if pairs == "tuple" else [pair]
    with pytest.raises(ValueError, match=message):
        gradients.multiply_gradients(grads_and_vars, multipliers)


def test_regex_helpers(kv):
    kernel, bias = kv
    pairs = [(tf.constant([1.0, 1.0]), bias), (tf.ones((2, 2)), kernel)]
    out = gradients.multiply_gradients_matching_regex(pairs, [r".*/bias"], 4)
    np.testing.assert_array_equal(out[0][0].numpy(), [4.0, 4.0])
    np.testing.assert_array_equal(out[1][0].numpy(), np.ones((2, 2)))
    kept = gradients.freeze_gradients_matching_regex(pairs, ["fc1/k", ""])
    assert len(kept) == 1 and kept[0][1] is bias
    with pytest.raises(ValueError, match="is empty"):
        gradients.multiply_gradients_matching_regex(pairs, ["nothing"], 2.0)


def test_same_numbers_as_tf_slim():
    """multiply then clip, as create_train_op does, against TF-Slim itself."""
    grads = {"a": [[3.0, -4.0], [1.0, 2.0]], "b": [0.5, -0.25]}
    multipliers = {"a": 2.0, "b": -3.0}
    slim_out = tf_slim_peer.run(f"""
        grads = {grads!r}
        mults = {multipliers!r}
        pairs = []
        for name, g in grads.items():
            v = tf1.get_variable(name, initializer=np.zeros_like(g, "float32"))
            pairs.append((tf.constant(g, tf.float32), v))
        out = slim.learning.multiply_gradients(
            pairs, {{v: mults[v.op.name] for _, v in pairs}})
        out = slim.learning.clip_gradient_norms(out, 2.5)
        with tf1.Session() as sess:
            print(json.dumps([sess.run(g).tolist() for g, _ in out]))
    """)
    pairs = []
    for name, g in grads.items():
        layer = keras.layers.Dense(1, name=name)
        layer.build((None, 1))
        pairs.append((tf.constant(g, tf.float32), layer.kernel))
    ours = gradients.multiply_gradients(
        pairs, {f"{n}/kernel": m for n, m in multipliers.items()}
    )
    ours = gradients.clip_gradient_norms(ours, 2.5)
    for (g, _), expected in zip(ours, slim_out):
        np.testing.assert_allclose(g.numpy(), expected, rtol=1e-6)


def test_squared_global_norm_is_the_sum_of_the_squared_norms():
    # One reduction over every gradient (dense, sparse values, float16,
    # a scalar), equal to the per-gradient norms' sum.
    grads = [
        tf.constant([[3.0, 0.0], [0.0, 4.0]]),
        tf.IndexedSlices(
            tf.constant([[1.0, 2.0]]), tf.constant([4]), tf.constant([5, 2])
        ),
        tf.constant([0.5, -1.5], tf.float16),
        tf.constant(2.0),
    ]
    total = gradients.squared_global_norm(grads)
    assert total.dtype == tf.float32 and total.shape == ()
    expected = float(tf.reduce_sum(gradients.squared_norms(grads)))
    assert float(total) == pytest.approx(expected, rel=1e-6)
    assert float(total) == pytest.approx(25.0 + 5.0 + 2.5 + 4.0, rel=1e-6)
