"""keras_slim.image.nets: the nets factory and its TF-Slim name map."""

import re

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim.image import nets
from tests.checkpoint_files import write_tf1

MINIMUM = {
    "digits_cnn": 8,
    "mobilenet_v2": 32,
    "resnet50": 32,
    "inception_v3": 75,
}

# The paths the module docstring promises, per net.
DOCUMENTED_PATHS = {
    "digits_cnn": [
        "conv1/kernel",
        "conv1_bn/gamma",
        "conv2/kernel",
        "conv2_bn/gamma",
        "logits/kernel",
        "logits/bias",
    ],
    "mobilenet_v2": [
        "Conv1/kernel",
        "bn_Conv1/gamma",
        "expanded_conv_depthwise/kernel",
        "expanded_conv_project/kernel",
        "block_1_expand/kernel",
        "block_16_project_BN/beta",
        "Conv_1/kernel",
        "Conv_1_bn/gamma",
        "logits/kernel",
        "logits/bias",
    ],
    "resnet50": [
        "conv1_conv/kernel",
        "conv2_block1_1_conv/kernel",
        "conv5_block3_3_bn/gamma",
        "logits/kernel",
        "logits/bias",
    ],
    "inception_v3": [
        "conv2d/kernel",
        "conv2d_93/kernel",
        "batch_normalization/beta",
        "batch_normalization_93/beta",
        "logits/kernel",
        "logits/bias",
    ],
}

BN = ("gamma", "beta", "moving_mean", "moving_variance")


@pytest.fixture(scope="module")
def minimal():
    """Each net at its minimum size, 5 classes, built once per module."""
    cache = {}

    def get(name):
        if name not in cache:
            keras.utils.set_random_seed(0)
            cache[name] = nets.build(name, 5, image_size=MINIMUM[name])
        return cache[name]

    return get


def paths(model):
    return [v.path for v in model.weights]


def test_networks():
    assert nets.NETWORKS == (
        "digits_cnn",
        "mobilenet_v2",
        "resnet50",
        "inception_v3",
    )


@pytest.mark.parametrize(
    "name, default, minimum, preprocessing",
    [
        ("digits_cnn", 8, 8, "digits"),
        ("mobilenet_v2", 224, 32, "inception"),
        ("resnet50", 224, 32, "vgg"),
        ("inception_v3", 299, 75, "inception"),
    ],
)
def test_sizes_and_preprocessing(name, default, minimum, preprocessing):
    assert nets.default_image_size(name) == default
    assert nets.minimum_image_size(name) == minimum
    assert nets.preprocessing_name(name) == preprocessing


@pytest.mark.parametrize("name", nets.NETWORKS)
def test_builds_at_its_minimum_size(minimal, name):
    model = minimal(name)
    size = MINIMUM[name]
    channels = 1 if name == "digits_cnn" else 3
    assert isinstance(model, keras_slim.SlimModel)
    assert model.name == name
    assert model.inputs[0].name == "images"
    assert tuple(model.inputs[0].shape) == (None, size, size, channels)
    logits = model(np.zeros((2, size, size, channels), "float32"))
    assert tuple(logits.shape) == (2, 5)
    assert model.layers[-1].name == "logits"
    assert model.layers[-1].activation is keras.activations.linear
    assert model.losses == []
    assert set(DOCUMENTED_PATHS[name]) <= set(paths(model))


def test_inception_v3_paths_do_not_depend_on_earlier_layers(minimal):
    # Unnamed layers take Keras's session-wide counters: after these (and
    # the fixture's net), Keras alone would name the first conv `conv2d_N`.
    keras.layers.Conv2D(1, 1)
    keras.layers.BatchNormalization()
    model = nets.build("inception_v3", 5, image_size=75)
    assert paths(model) == paths(minimal("inception_v3"))
    assert paths(model)[0] == "conv2d/kernel"


def test_channels_default_to_the_nets_own():
    assert nets.build("digits_cnn", 3).inputs[0].shape == (None, 8, 8, 1)
    model = nets.build("digits_cnn", 3, image_size=12, channels=3)
    assert model.inputs[0].shape == (None, 12, 12, 3)
    model = nets.build("mobilenet_v2", 3, image_size=32, channels=1)
    assert model.inputs[0].shape == (None, 32, 32, 1)
    assert model.get_layer("Conv1").kernel.shape == (3, 3, 1, 32)


def test_passes_the_gradient_policy():
    policy = keras_slim.GradientPolicy(clip_norm=1.0)
    model = nets.build("digits_cnn", 3, gradient_policy=policy)
    assert model.gradient_policy is policy


@pytest.mark.parametrize(
    "function",
    [
        nets.default_image_size,
        nets.minimum_image_size,
        nets.preprocessing_name,
        nets.slim_name_map,
        lambda name: nets.build(name, 5),
    ],
    ids=[
        "default_image_size",
        "minimum_image_size",
        "preprocessing",
        "map",
        "build",
    ],
)
def test_unknown_name(function):
    expected = re.escape(
        "Invalid value for argument `model_name`. "
        "Received: model_name='vgg_16'. Expected one of ('digits_cnn', "
        "'mobilenet_v2', 'resnet50', 'inception_v3')."
    )
    with pytest.raises(ValueError, match=expected):
        function("vgg_16")


@pytest.mark.parametrize(
    "name, size",
    [
        ("digits_cnn", 7),
        ("mobilenet_v2", 31),
        ("resnet50", 16),
        ("inception_v3", 74),
        ("mobilenet_v2", 32.0),
    ],
)
def test_image_too_small(name, size):
    expected = re.escape(
        f"Invalid value for argument `image_size`. Received: "
        f"image_size={size!r}. Expected an integer of at least "
        f"{MINIMUM[name]} for {name} (its minimum image size)."
    )
    with pytest.raises(ValueError, match=expected):
        nets.build(name, 5, image_size=size)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_classes": 0}, "Received: num_classes=0. Expected a positive"),
        ({"channels": 0}, "Received: channels=0. Expected a positive"),
        (
            {"weight_decay": -1e-4},
            "Received: weight_decay=-0.0001. Expected a non-negative number",
        ),
    ],
)
def test_invalid_arguments(kwargs, message):
    kwargs = {"model_name": "digits_cnn", "num_classes": 5, **kwargs}
    with pytest.raises(ValueError, match=re.escape(message)):
        nets.build(**kwargs)


def test_no_name_map_for_resnet50():
    expected = re.escape(
        "Received: model_name='resnet50'. Expected a net with a TF-Slim "
        "name map: one of ('mobilenet_v2',)."
    )
    with pytest.raises(ValueError, match=expected):
        nets.slim_name_map("resnet50")


@pytest.mark.parametrize(
    "name, regularized",
    [
        ("digits_cnn", 3),
        # Conv1, 16 expand, 17 project, Conv_1, logits; no depthwise.
        ("mobilenet_v2", 36),
    ],
)
def test_weight_decay_adds_halved_l2_on_kernels(name, regularized):
    model = nets.build(name, 5, image_size=MINIMUM[name], weight_decay=4e-5)
    kernels = [v for v in model.trainable_weights if v.regularizer]
    assert len(model.losses) == regularized
    assert len(kernels) == regularized
    assert all(v.path.endswith("/kernel") for v in kernels)
    assert not any("depthwise" in v.path for v in kernels)
    expected = sum(2e-5 * np.sum(np.square(v.numpy())) for v in kernels)
    total = float(keras.ops.sum(keras.ops.stack(model.losses)))
    np.testing.assert_allclose(total, expected, rtol=1e-5)


def slim_mobilenet_v2_names():
    """TF-Slim's MobilenetV2 variables (mobilenet_v2_1.0_224.ckpt), without
    the logits, written out from mobilenet_v2.py's layer list."""
    scopes = ["Conv", "expanded_conv/depthwise", "expanded_conv/project"]
    for i in range(1, 17):
        scopes += [
            f"expanded_conv_{i}/{op}"
            for op in ("expand", "depthwise", "project")
        ]
    scopes.append("Conv_1")
    names = []
    for scope in scopes:
        weights = "depthwise_weights" if "depthwise" in scope else "weights"
        names.append(f"MobilenetV2/{scope}/{weights}")
        names += [f"MobilenetV2/{scope}/BatchNorm/{v}" for v in BN]
    return names


def test_slim_name_map_gives_every_tf_slim_name_once(minimal):
    name_map = nets.slim_name_map("mobilenet_v2")
    body = [p for p in paths(minimal("mobilenet_v2")) if "logits" not in p]
    mapped = [name_map(p) for p in body]
    assert len(mapped) == 260
    assert sorted(mapped) == sorted(slim_mobilenet_v2_names())


@pytest.mark.parametrize(
    "path, slim_name",
    [
        ("Conv1/kernel", "MobilenetV2/Conv/weights"),
        (
            "bn_Conv1/moving_variance",
            "MobilenetV2/Conv/BatchNorm/moving_variance",
        ),
        (
            "expanded_conv_depthwise/kernel",
            "MobilenetV2/expanded_conv/depthwise/depthwise_weights",
        ),
        (
            "expanded_conv_project_BN/beta",
            "MobilenetV2/expanded_conv/project/BatchNorm/beta",
        ),
        ("block_1_expand/kernel", "MobilenetV2/expanded_conv_1/expand/weights"),
        (
            "block_12_depthwise/kernel",
            "MobilenetV2/expanded_conv_12/depthwise/depthwise_weights",
        ),
        (
            "block_16_project_BN/gamma",
            "MobilenetV2/expanded_conv_16/project/BatchNorm/gamma",
        ),
        ("Conv_1/kernel", "MobilenetV2/Conv_1/weights"),
        ("Conv_1_bn/moving_mean", "MobilenetV2/Conv_1/BatchNorm/moving_mean"),
        ("logits/kernel", "MobilenetV2/Logits/Conv2d_1c_1x1/weights"),
        ("logits/bias", "MobilenetV2/Logits/Conv2d_1c_1x1/biases"),
        ("dense/kernel", "dense/kernel"),
    ],
)
def test_slim_name_map_cases(path, slim_name):
    assert nets.slim_name_map("mobilenet_v2")(path) == slim_name


def test_warm_starts_mobilenet_v2_from_a_tf_slim_checkpoint(tmp_path, rng):
    model = nets.build("mobilenet_v2", 5, image_size=32)
    name_map = nets.slim_name_map("mobilenet_v2")
    body = [v for v in model.weights if not v.path.startswith("logits/")]
    values = {
        name_map(v.path): rng.normal(size=v.shape).astype("float32")
        for v in body
    }
    # TF-Slim's head: a 1x1 conv over 1001 classes.
    values["MobilenetV2/Logits/Conv2d_1c_1x1/weights"] = np.zeros(
        (1, 1, 1280, 1001), "float32"
    )
    values["MobilenetV2/Logits/Conv2d_1c_1x1/biases"] = np.zeros(
        (1001,), "float32"
    )
    prefix = write_tf1(tmp_path / "mobilenet_v2_1.0_224.ckpt", values)
    head = model.get_layer("logits").kernel.numpy()

    with pytest.raises(ValueError, match="Shapes differ"):
        keras_slim.callbacks.WarmStart(prefix, name_map=name_map).apply(model)
    warm = keras_slim.callbacks.WarmStart(
        prefix, name_map=name_map, exclude="logits"
    )
    report = warm.apply(model)

    assert report == {
        "restored": sorted(v.path for v in body),
        "missing": [],
        "mismatched": [],
    }
    for variable in body:
        np.testing.assert_array_equal(
            variable.numpy(), values[name_map(variable.path)], variable.path
        )
    np.testing.assert_array_equal(model.get_layer("logits").kernel, head)
