"""keras_slim's mobilenets against the published facts of TF-Slim's.

TF-Slim's mobilenets (tensorflow/models research/slim: nets/mobilenet_v1.py,
nets/mobilenet/) are not in the `tf_slim` package, so they cannot run here
as a peer. These tests hold the Keras nets to what TF-Slim states, written
here as data independently of the implementation:

- every TF-Slim variable name and shape, generated from TF-Slim's layer
  tables and depth rules (`mobilenet_v1`'s `_CONV_DEFS` and
  `max(int(d * multiplier), 8)`; `mobilenet_v2`'s bottlenecks, expansion
  6 and `_make_divisible(d * multiplier, 8)`);
- the parameter counts TF-Slim publishes for its checkpoints;
- a TF1 checkpoint under TF-Slim's names loads completely, and the net runs.
"""

import math

import keras
import numpy as np
import pytest

from keras_slim import checkpoints
from keras_slim.image import nets
from keras_slim.image.nets import mobilenet_v1
from keras_slim.image.nets import mobilenet_v2
from tests.checkpoint_files import write_tf1

BN = ("beta", "gamma", "moving_mean", "moving_variance")

# mobilenet_v1.py's _CONV_DEFS: Conv2d_0, a 3x3 convolution of stride 2 to
# 32 channels, then Conv2d_1 to Conv2d_13, each a 3x3 depthwise convolution
# and a 1x1 pointwise one to these depths.
V1_POINTWISE_DEPTHS = (64, 128, 128, 256, 256, 512) + (512,) * 5 + (1024,) * 2

# mobilenet_v2.py's V2_DEF as the MobileNetV2 paper's table 2: (expansion,
# output channels, repeats, stride of the first), between `Conv` (3x3,
# stride 2, 32) and `Conv_1` (1x1, 1280).
V2_BOTTLENECKS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)

# Published parameter counts, in millions.
# research/slim/nets/mobilenet_v1.md, "Pre-trained Models", column
# "Million Parameters" (MobileNet_v1_<multiplier>_224). They count TF-Slim's
# model variables as mobilenet_v1_test.py's
# testModelHasExpectedNumberOfParameters does (slim.batch_norm's default
# `scale=False`, so BatchNorm's beta, moving_mean and moving_variance but
# no gamma): 4.24, 2.59, 1.34 and 0.47 are those counts (with the 1001
# logits) rounded; the trainable variables would round to 4.23 and 1.33
# for 1.0 and 0.5, all of the checkpoint's (gamma too) to 4.25 and 0.48 for
# 1.0 and 0.25.
V1_PUBLISHED = {1.0: 4.24, 0.75: 2.59, 0.5: 1.34, 0.25: 0.47}
V1_COUNTED = {
    "weights",
    "depthwise_weights",
    "biases",
    "beta",
    "moving_mean",
    "moving_variance",
}
# research/slim/nets/mobilenet/README.md, "Mobilenet V2 Imagenet
# Checkpoints", column "Parameters (M)" (mobilenet_v2_<multiplier>_224):
# the convolutions' weights and the logits' biases, batch norm aside (the
# MobileNetV2 paper's count). 0.35 with its last layer kept at 1280
# (finegrain_classification_mode, as TF-Slim's mobilenet_v2_035); it
# would be 0.74 otherwise.
V2_PUBLISHED = {1.4: 6.06, 1.0: 3.47, 0.35: 1.66}
V2_COUNTED = {"weights", "depthwise_weights", "biases"}
# research/slim/nets/mobilenet_v1.py's docstring: the "params" totals of
# "100% Mobilenet V1 (base)" and "75% Mobilenet V1 (base)" (the weights of
# Conv2d_0 to Conv2d_13); mobilenet_v1_test.py's
# testModelHasExpectedNumberOfParameters: 3217920 for the 1.0 base.
V1_BASE_WEIGHTS = {1.0: 3_185_088, 0.75: 1_800_144}
V1_BASE_MODEL_VARIABLES = 3_217_920

CLASSES = 1001
SIZE = 64

# The nets_factory name of each depth multiplier.
V1_NETS = {
    1.0: "mobilenet_v1",
    0.75: "mobilenet_v1_075",
    0.5: "mobilenet_v1_050",
    0.25: "mobilenet_v1_025",
}
V2_NETS = {
    1.0: "mobilenet_v2",
    1.4: "mobilenet_v2_140",
    0.35: "mobilenet_v2_035",
}


def _conv(scope, kernel, depth_in, depth_out):
    """A convolution with batch norm: TF-Slim's variables."""
    return {
        f"{scope}/weights": (kernel, kernel, depth_in, depth_out),
        **{f"{scope}/BatchNorm/{v}": (depth_out,) for v in BN},
    }


def _depthwise(scope, depth):
    return {
        f"{scope}/depthwise_weights": (3, 3, depth, 1),
        **{f"{scope}/BatchNorm/{v}": (depth,) for v in BN},
    }


def _logits(scope, depth):
    return {
        f"{scope}/Logits/Conv2d_1c_1x1/weights": (1, 1, depth, CLASSES),
        f"{scope}/Logits/Conv2d_1c_1x1/biases": (CLASSES,),
    }


def v1_variables(multiplier):
    """TF-Slim's variables of mobilenet_v1: `{name: shape}`."""

    def depth(d):
        return max(int(d * multiplier), 8)

    scope = "MobilenetV1"
    variables = _conv(f"{scope}/Conv2d_0", 3, 3, depth(32))
    channels = depth(32)
    for i, d in enumerate(V1_POINTWISE_DEPTHS, 1):
        variables |= _depthwise(f"{scope}/Conv2d_{i}_depthwise", channels)
        variables |= _conv(
            f"{scope}/Conv2d_{i}_pointwise", 1, channels, depth(d)
        )
        channels = depth(d)
    return variables | _logits(scope, channels)


def _divisible(value, divisor):
    """TF-Slim's `_make_divisible` with its default least value."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


def v2_blocks(multiplier):
    """`(scope, stride, input depth, expanded depth, output depth)` of each
    `expanded_conv` block of mobilenet_v2."""
    channels = _divisible(32 * multiplier, 8)
    blocks = []
    for expansion, outputs, repeats, stride in V2_BOTTLENECKS:
        for r in range(repeats):
            n = len(blocks)
            scope = "expanded_conv" + (f"_{n}" if n else "")
            inner = _divisible(channels * expansion, 8 if expansion > 1 else 1)
            depth = _divisible(outputs * multiplier, 8)
            blocks.append(
                (scope, stride if r == 0 else 1, channels, inner, depth)
            )
            channels = depth
    return blocks


def v2_variables(multiplier):
    """TF-Slim's variables of mobilenet_v2: `{name: shape}`; below 1, the
    last layer kept at 1280 (finegrain_classification_mode, as TF-Slim's
    mobilenet_v2_035 and mobilenet_v2_050 and their checkpoints)."""
    scope = "MobilenetV2"
    variables = _conv(f"{scope}/Conv", 3, 3, _divisible(32 * multiplier, 8))
    blocks = v2_blocks(multiplier)
    for block, _, depth_in, inner, depth in blocks:
        if inner > depth_in:
            variables |= _conv(f"{scope}/{block}/expand", 1, depth_in, inner)
        variables |= _depthwise(f"{scope}/{block}/depthwise", inner)
        variables |= _conv(f"{scope}/{block}/project", 1, inner, depth)
    last = 1280 if multiplier < 1 else _divisible(1280 * multiplier, 8)
    variables |= _conv(f"{scope}/Conv_1", 1, blocks[-1][-1], last)
    return variables | _logits(scope, last)


def expected(family, multiplier):
    return (v1_variables if family == "v1" else v2_variables)(multiplier)


def _build(family, multiplier):
    """The net through nets_factory, with TF-Slim's default weight decay;
    mobilenet_v2_035 from its module (the factory's misses TF-Slim's
    finegrain_classification_mode)."""
    keras.utils.set_random_seed(0)
    images = keras.Input((SIZE, SIZE, 3))
    if (family, multiplier) == ("v2", 0.35):
        logits, end_points = mobilenet_v2.mobilenet_v2_035(images, CLASSES)
    else:
        name = (V1_NETS if family == "v1" else V2_NETS)[multiplier]
        network_fn = nets.get_network_fn(name, CLASSES, weight_decay=4e-5)
        logits, end_points = network_fn(images)
    features = "AvgPool_1a" if family == "v1" else "global_pool"
    return keras.Model(images, [logits, end_points[features]])


@pytest.fixture(scope="module")
def built():
    """Each net with 1001 classes at 64 pixels, built once per module."""
    cache = {}

    def get(family, multiplier):
        if (family, multiplier) not in cache:
            cache[family, multiplier] = _build(family, multiplier)
        return cache[family, multiplier]

    return get


def slim_variables(model, scope):
    """The model's variables by their TF-Slim names: `{name: shape}`."""
    name_map = nets.slim_name_map(
        "mobilenet_v1" if scope == "MobilenetV1" else "mobilenet_v2"
    )
    return {
        name_map(v.path): tuple(v.shape)
        for v in checkpoints.variables_to_restore(model)
    }


def count(variables, kinds):
    return sum(
        math.prod(shape)
        for name, shape in variables.items()
        if name.rsplit("/", 1)[-1] in kinds
    )


NETS = [("v1", m) for m in V1_NETS] + [("v2", m) for m in V2_NETS]


def _scope(family):
    return "MobilenetV1" if family == "v1" else "MobilenetV2"


@pytest.mark.parametrize("family, multiplier", NETS)
def test_variables_are_tf_slims(built, family, multiplier):
    ours = slim_variables(built(family, multiplier), _scope(family))
    theirs = expected(family, multiplier)
    assert sorted(set(theirs) - set(ours)) == [], "missing in keras_slim"
    assert sorted(set(ours) - set(theirs)) == [], "not in TF-Slim's net"
    assert ours == theirs


@pytest.mark.parametrize("family, multiplier", NETS)
def test_parameter_counts_are_the_published_ones(built, family, multiplier):
    ours = slim_variables(built(family, multiplier), _scope(family))
    if family == "v1":
        published, kinds = V1_PUBLISHED[multiplier], V1_COUNTED
    else:
        published, kinds = V2_PUBLISHED[multiplier], V2_COUNTED
    assert round(count(ours, kinds) / 1e6, 2) == published


@pytest.mark.parametrize("multiplier", sorted(V1_BASE_WEIGHTS))
def test_mobilenet_v1_base_has_the_published_weights(built, multiplier):
    ours = slim_variables(built("v1", multiplier), "MobilenetV1")
    base = {k: v for k, v in ours.items() if "/Logits/" not in k}
    weights = {"weights", "depthwise_weights"}
    assert count(base, weights) == V1_BASE_WEIGHTS[multiplier]
    if multiplier == 1.0:
        assert count(base, V1_COUNTED) == V1_BASE_MODEL_VARIABLES


@pytest.mark.parametrize("family", ["v1", "v2"])
def test_relu6_follows_every_convolution_but_projections(built, family):
    model = built(family, 1.0)
    relus = {
        layer.name
        for layer in model.layers
        if isinstance(layer, keras.layers.ReLU)
    }
    assert all(
        layer.max_value == 6.0
        for layer in model.layers
        if isinstance(layer, keras.layers.ReLU)
    )
    scope = _scope(family)
    normalized = {
        name[len(scope) + 1 : -len("/BatchNorm/beta")]
        for name in expected(family, 1.0)
        if name.endswith("/BatchNorm/beta")
    }
    assert relus == {
        f"{s}/Relu6".replace("/", ".")
        for s in normalized
        if not s.endswith("/project")
    }


@pytest.mark.parametrize(
    "family, multiplier, decay, keep_prob, convolutions",
    [
        # mobilenet_v1_arg_scope; mobilenet_v1's dropout_keep_prob.
        ("v1", 0.25, 0.9997, 0.999, 1 + 13 + 1),
        # mobilenet.training_scope: bn_decay, dropout_keep_prob.
        ("v2", 0.35, 0.997, 0.8, 2 + 16 + 17 + 1),
    ],
)
def test_the_arg_scopes_are_tf_slims(
    built, family, multiplier, decay, keep_prob, convolutions
):
    model = built(family, multiplier)  # Weight decay 4e-5.
    norms = [
        layer
        for layer in model.layers
        if isinstance(layer, keras.layers.BatchNormalization)
    ]
    assert {(n.momentum, n.epsilon, n.center, n.scale) for n in norms} == {
        (decay, 0.001, True, True)
    }
    (drop,) = [
        layer
        for layer in model.layers
        if isinstance(layer, keras.layers.Dropout)
    ]
    assert drop.rate == pytest.approx(1 - keep_prob)
    # tf.nn.l2_loss's factor 1/2 on the weights of convolutions (the
    # logits' included); none on depthwise weights nor on biases.
    convs = [
        layer for layer in model.layers if type(layer) is keras.layers.Conv2D
    ]
    assert len(convs) == convolutions == len(model.losses)
    assert all(c.kernel_regularizer.scale == pytest.approx(4e-5) for c in convs)
    assert [c.use_bias for c in convs].count(True) == 1
    assert all(
        layer.depthwise_regularizer is None
        for layer in model.layers
        if isinstance(layer, keras.layers.DepthwiseConv2D)
    )


def test_mobilenet_v2_adds_the_input_of_stride_1_blocks_of_equal_depth(built):
    model = built("v2", 1.0)
    adds = {
        layer.name
        for layer in model.layers
        if isinstance(layer, keras.layers.Add)
    }
    assert adds == {
        f"{scope}.add"
        for scope, stride, depth_in, _, depth in v2_blocks(1.0)
        if stride == 1 and depth_in == depth
    }
    assert len(adds) == 10


@pytest.mark.parametrize(
    "model_name, family, multiplier",
    [("mobilenet_v1", "v1", 1.0), ("mobilenet_v2", "v2", 1.0)],
)
def test_a_tf_slim_checkpoint_loads_and_the_net_runs(
    built, tmp_path, model_name, family, multiplier
):
    rng = np.random.default_rng(0)
    values = {}
    for name, shape in expected(family, multiplier).items():
        if name.endswith("moving_variance"):
            value = rng.uniform(0.5, 1.5, shape)
        else:
            value = rng.normal(0.0, 0.1, shape)
        values[name] = value.astype(np.float32)
    prefix = write_tf1(tmp_path / "model.ckpt", values)
    model = built(family, multiplier)
    name_map = nets.slim_name_map(model_name)
    var_map = {
        name_map(v.path): v for v in checkpoints.variables_to_restore(model)
    }
    assert checkpoints.assign_from_checkpoint(var_map, prefix) == len(values)
    for name, variable in var_map.items():
        np.testing.assert_array_equal(variable.numpy(), values[name], name)
    images = rng.uniform(-1, 1, (2, SIZE, SIZE, 3)).astype(np.float32)
    logits, features = model(images, training=False)
    assert logits.shape == (2, CLASSES)
    assert features.shape[-1] == (1024 if family == "v1" else 1280)
    assert np.isfinite(np.asarray(logits)).all()


def test_mobilenet_v1_output_stride_as_tf_slims_tests():
    # mobilenet_v1_test.py: testOutputStride8BuildAndCheckAllEndPoints...
    images = keras.Input((224, 224, 3))
    _, end_points = mobilenet_v1.mobilenet_v1_base(
        images, output_stride=8, sc=mobilenet_v1.mobilenet_v1_arg_scope()
    )
    shapes = {k: tuple(v.shape[1:]) for k, v in end_points.items()}
    assert shapes["Conv2d_4_depthwise"] == (28, 28, 128)
    assert shapes["Conv2d_6_depthwise"] == (28, 28, 256)
    assert shapes["Conv2d_13_pointwise"] == (28, 28, 1024)
    assert len(shapes) == 27


def test_mobilenet_v2_depth_rounding_as_tf_slims_tests():
    # mobilenet_v2_test.py's testDivisibleBy: the depths of the
    # (non-depthwise) convolutions.
    images = keras.Input((224, 224, 2))
    logits, _ = mobilenet_v2.mobilenet_v2(images, divisible_by=16, min_depth=32)
    model = keras.Model(images, logits)
    depths = {
        layer.filters
        for layer in model.layers
        if type(layer) is keras.layers.Conv2D
    }
    assert depths == {
        32, 64, 96, 160, 192, 320, 384, 576, 960, 1280, 1001,
    }  # fmt: skip
