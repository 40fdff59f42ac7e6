"""keras_slim.image.nets._slim: TF-Slim's layer vocabulary and name rule."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image.nets import _slim
from keras_slim.image.nets._fused_batch_norm import FusedBatchNormalization


@pytest.mark.parametrize(
    "path, name",
    [
        ("conv1.conv1_1/kernel", "vgg_16/conv1/conv1_1/weights"),
        ("fc8/bias", "vgg_16/fc8/biases"),
        (
            "Mixed_5b.Branch_1.Conv2d_0b_5x5.BatchNorm/moving_variance",
            "vgg_16/Mixed_5b/Branch_1/Conv2d_0b_5x5/BatchNorm/moving_variance",
        ),
        (
            "expanded_conv_3.depthwise/kernel",
            "vgg_16/expanded_conv_3/depthwise/depthwise_weights",
        ),
        (
            "Conv2d_1_depthwise/kernel",
            "vgg_16/Conv2d_1_depthwise/depthwise_weights",
        ),
        (
            "block1.unit_1.bottleneck_v2.preact/gamma",
            "vgg_16/block1/unit_1/bottleneck_v2/preact/gamma",
        ),
        ("dropout6/seed_generator_state", "dropout6/seed_generator_state"),
    ],
)
def test_slim_name(path, name):
    assert _slim.slim_name(path, "vgg_16") == name


@pytest.mark.parametrize(
    "scope, pattern",
    [
        ("InceptionV3/Logits", "Logits"),
        ("InceptionV3/Mixed_7c/Branch_1", r"Mixed_7c\.Branch_1"),
        ("Mixed_6a", "Mixed_6a"),
        ("InceptionV3", ".*"),
    ],
)
def test_keras_scope(scope, pattern):
    assert _slim.keras_scope(scope, "InceptionV3") == pattern


def test_conv2d_is_tensorflows_same_convolution_then_batch_norm():
    """TF-Slim's conv2d: SAME padding as TensorFlow's (stride 2 on an
    even size pads bottom-right), no bias before batch norm (the fused
    kernel's, as TF-Slim's), TF-Slim's epsilon, ReLU."""
    sc = _slim.ArgScope(batch_norm=_slim.BatchNorm(epsilon=0.001))
    images = keras.Input((8, 8, 3))
    net = _slim.conv2d(images, 4, [3, 3], stride=2, scope="a/b", sc=sc)
    model = keras.Model(images, net)
    assert type(model.get_layer("a.b.BatchNorm")) is FusedBatchNormalization
    assert [v.path for v in model.weights] == [
        "a.b/kernel",
        "a.b.BatchNorm/beta",
        "a.b.BatchNorm/moving_mean",
        "a.b.BatchNorm/moving_variance",
    ]
    rng = np.random.default_rng(0)
    kernel = rng.normal(size=(3, 3, 3, 4)).astype("float32")
    beta, mean = rng.normal(size=(3, 4)).astype("float32")[:2]
    variance = rng.uniform(0.5, 1.5, 4).astype("float32")
    model.set_weights([kernel, beta, mean, variance])
    x = rng.normal(size=(2, 8, 8, 3)).astype("float32")
    conv = tf.nn.conv2d(x, kernel, 2, "SAME")
    expected = tf.nn.relu((conv - mean) / np.sqrt(variance + 0.001) + beta)
    np.testing.assert_allclose(
        model(x, training=False), expected, rtol=1e-5, atol=1e-5
    )


def test_weight_decay_is_halved_l2_on_weights_only():
    sc = _slim.ArgScope(weight_decay=4e-5)
    images = keras.Input((4, 4, 3))
    net = _slim.conv2d(images, 2, [1, 1], scope="conv", sc=sc)
    net = _slim.depthwise_conv2d(net, [3, 3], scope="dw", sc=sc)
    model = keras.Model(images, net)
    kernel = model.get_layer("conv").kernel
    assert len(model.losses) == 1  # not the biases, nor the depthwise
    np.testing.assert_allclose(
        float(model.losses[0]), 2e-5 * np.sum(kernel.numpy() ** 2), rtol=1e-5
    )
    # TF-Slim's l2_regularizer: scale * tf.nn.l2_loss, its kernel.
    regularizer = model.get_layer("conv").kernel_regularizer
    assert float(regularizer(kernel)) == float(4e-5 * tf.nn.l2_loss(kernel))
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(regularizer)
    )
    assert type(again) is _slim.L2Loss and again.scale == 4e-5


@pytest.mark.parametrize("scale", [-1e-4, float("inf"), float("nan")])
def test_a_bad_weight_decay_is_named(scale):
    with pytest.raises(ValueError, match=f"weight_decay={scale}"):
        _slim.L2Loss(scale)


def test_repeat_names_as_tf_slim():
    images = keras.Input((4, 4, 3))
    net = _slim.repeat(
        images,
        3,
        _slim.conv2d,
        2,
        [1, 1],
        scope="net/conv3",
        sc=_slim.ArgScope(),
    )
    names = [v.path for v in keras.Model(images, net).weights]
    assert names[::2] == [f"net.conv3.conv3_{i}/kernel" for i in (1, 2, 3)]


def test_squeeze_keeps_tensorflows_error_for_a_spatial_size():
    images = keras.Input((2, 2, 3))
    with pytest.raises(ValueError):
        _slim.squeeze(images, scope="squeezed")
