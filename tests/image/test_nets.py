"""keras_slim.image.nets: the nets factory, TF-Slim's names and scopes.

Each family's function against TF-Slim's own is in tests/image/nets/.
"""

import re

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim import checkpoints
from keras_slim.image import nets
from tests.checkpoint_files import write_tf1

#: research/slim's nets_factory names, with the sizes TF-Slim gives them.
TF_SLIM = {
    "alexnet_v2": (224, "vgg"),
    "cifarnet": (32, "cifarnet"),
    "overfeat": (231, "vgg"),
    "vgg_a": (224, "vgg"),
    "vgg_16": (224, "vgg"),
    "vgg_19": (224, "vgg"),
    "inception_v1": (224, "inception"),
    "inception_v2": (224, "inception"),
    "inception_v3": (299, "inception"),
    "inception_v4": (299, "inception"),
    "inception_resnet_v2": (299, "inception"),
    "lenet": (28, "lenet"),
    **{
        f"resnet_v{v}_{depth}": (224, "vgg")
        for v in (1, 2)
        for depth in (50, 101, 152, 200)
    },
    **{
        name: (224, "inception")
        for name in (
            "mobilenet_v1",
            "mobilenet_v1_075",
            "mobilenet_v1_050",
            "mobilenet_v1_025",
            "mobilenet_v2",
            "mobilenet_v2_140",
            "mobilenet_v2_035",
        )
    },
}


def test_networks_are_tf_slims_names_and_the_digits_cnn():
    assert set(nets.NETWORKS) == {"digits_cnn", *TF_SLIM}
    assert nets.NETWORKS[0] == "digits_cnn"


@pytest.mark.parametrize("name", sorted(TF_SLIM))
def test_sizes_and_preprocessing_are_tf_slims(name):
    default, preprocessing = TF_SLIM[name]
    assert nets.default_image_size(name) == default
    assert nets.preprocessing_name(name) == preprocessing
    assert 1 <= nets.minimum_image_size(name) <= default
    assert nets.get_network_fn(name, 5).default_image_size == default


def test_the_digits_cnn():
    assert nets.default_image_size("digits_cnn") == 8
    assert nets.minimum_image_size("digits_cnn") == 8
    assert nets.preprocessing_name("digits_cnn") == "digits"
    model = nets.build("digits_cnn", 5)
    assert model.inputs[0].shape == (None, 8, 8, 1)
    assert [v.path for v in model.weights][:2] == [
        "conv1/kernel",
        "conv1_bn/gamma",
    ]


@pytest.mark.parametrize(
    "name, size, outputs",
    [
        ("mobilenet_v1_025", 32, [(None, 5)]),
        ("inception_v3", 107, [(None, 5), (None, 5)]),
    ],
)
def test_build_gives_a_slim_model_of_the_logits(name, size, outputs):
    policy = keras_slim.GradientPolicy(clip_norm=1.0)
    model = nets.build(name, 5, image_size=size, gradient_policy=policy)
    assert isinstance(model, keras_slim.SlimModel)
    assert model.name == name
    assert model.gradient_policy is policy
    assert model.inputs[0].name == "images"
    assert [tuple(o.shape) for o in model.outputs] == outputs
    logits = model(np.zeros((2, size, size, 3), "float32"))
    logits = logits[0] if isinstance(logits, list) else logits
    assert tuple(logits.shape) == (2, 5)


def test_paths_do_not_depend_on_what_was_built_before():
    first = [v.path for v in nets.build("mobilenet_v1_025", 3).weights]
    keras.layers.Conv2D(1, 1)
    keras.layers.BatchNormalization()
    again = [v.path for v in nets.build("mobilenet_v1_025", 3).weights]
    assert first == again
    assert first[0] == "Conv2d_0/kernel"


def test_channels_default_to_the_nets_own():
    model = nets.build("mobilenet_v1_025", 3, image_size=32, channels=1)
    assert model.inputs[0].shape == (None, 32, 32, 1)
    assert model.get_layer("Conv2d_0").kernel.shape == (3, 3, 1, 8)


def test_weight_decay_is_the_arg_scopes_halved_l2():
    model = nets.build("mobilenet_v1_025", 5, image_size=32, weight_decay=4e-5)
    kernels = [v for v in model.trainable_weights if v.regularizer]
    assert len(model.losses) == len(kernels) == 15  # no depthwise weights
    assert not any("depthwise" in v.path for v in kernels)
    expected = sum(2e-5 * np.sum(np.square(v.numpy())) for v in kernels)
    total = float(keras.ops.sum(keras.ops.stack(model.losses)))
    np.testing.assert_allclose(total, expected, rtol=1e-5)


@pytest.mark.parametrize(
    "function",
    [
        nets.default_image_size,
        nets.minimum_image_size,
        nets.preprocessing_name,
        nets.slim_name_map,
        lambda name: nets.build(name, 5),
        lambda name: nets.get_network_fn(name, 5),
    ],
    ids=["default", "minimum", "preprocessing", "map", "build", "network_fn"],
)
def test_unknown_name_lists_the_known_ones(function):
    with pytest.raises(
        ValueError,
        match=re.escape("Received: model_name='resnet50'. Expected one of ("),
    ):
        function("resnet50")


@pytest.mark.parametrize(
    "name, size, expected",
    [
        ("digits_cnn", 7, "an integer of at least 8 for digits_cnn"),
        ("inception_v3", 106, "an integer of at least 107 for inception_v3"),
        ("vgg_16", 200, "an integer of at least 224 for vgg_16"),
        ("mobilenet_v1", 32.0, "an integer of at least 1 for mobilenet_v1"),
        ("lenet", 3, "an integer of at least 4 for lenet"),
    ],
)
def test_image_too_small_is_named(name, size, expected):
    with pytest.raises(ValueError, match=re.escape(expected)):
        nets.build(name, 5, image_size=size)


def test_image_too_large_for_a_fixed_pool_is_named():
    with pytest.raises(
        ValueError,
        match=re.escape("Received: image_size=299, on which inception_v1"),
    ):
        nets.build("inception_v1", 5, image_size=299)


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


def test_the_digits_cnn_has_no_tf_slim_names():
    with pytest.raises(ValueError, match="digits_cnn has no TF-Slim"):
        nets.slim_name_map("digits_cnn")
    assert nets.slim_scope("digits_cnn", "logits") == "logits"


@pytest.mark.parametrize(
    "name, scope, pattern",
    [
        ("inception_v3", "InceptionV3/Logits", "Logits"),
        ("inception_v3", "InceptionV3/AuxLogits", "AuxLogits"),
        ("resnet_v1_50", "resnet_v1_50/logits", "logits"),
        ("vgg_16", "vgg_16/fc8", "fc8"),
        ("inception_v3", "Logits", "Logits"),  # a Keras path already
        (
            "mobilenet_v1",
            "MobilenetV1/Conv2d_13_pointwise",
            "Conv2d_13_pointwise",
        ),
    ],
)
def test_slim_scope(name, scope, pattern):
    assert nets.slim_scope(name, scope) == pattern


def test_a_tf_slim_checkpoint_warm_starts_all_but_the_excluded_head(tmp_path):
    """TF-Slim's names, and `--checkpoint_exclude_scopes` as TF-Slim's
    README writes it: every variable of the body restored by its TF-Slim
    name, the 1001-class head left as it is."""
    model = nets.build("mobilenet_v1_025", 5, image_size=32)
    name_map = nets.slim_name_map("mobilenet_v1_025")
    rng = np.random.default_rng(0)
    values = {
        name_map(v.path): rng.normal(size=v.shape).astype("float32")
        for v in checkpoints.variables_to_restore(model)
    }
    head = "MobilenetV1/Logits/Conv2d_1c_1x1"
    values[f"{head}/weights"] = np.zeros((1, 1, 256, 1001), "float32")
    values[f"{head}/biases"] = np.zeros((1001,), "float32")
    prefix = write_tf1(tmp_path / "mobilenet_v1_0.25_224.ckpt", values)
    before = model.get_layer("Logits.Conv2d_1c_1x1").kernel.numpy()
    exclude = nets.slim_scope("mobilenet_v1_025", "MobilenetV1/Logits")
    report = keras_slim.callbacks.WarmStart(
        prefix, name_map=name_map, exclude=f"{exclude}.*"
    ).apply(model)
    assert report["missing"] == report["mismatched"] == []
    assert len(report["restored"]) == len(values) - 2
    for variable in checkpoints.variables_to_restore(model):
        if variable.path.startswith("Logits."):
            continue
        np.testing.assert_array_equal(
            variable.numpy(), values[name_map(variable.path)]
        )
    np.testing.assert_array_equal(
        model.get_layer("Logits.Conv2d_1c_1x1").kernel, before
    )


def test_slim_end_points_name_the_layers_of_tf_slims_end_points():
    """What train_image_classifier summarized: the net's end_points, here
    the layers producing them (29 of mobilenet_v1's 86 layers)."""
    import keras

    model = nets.build("mobilenet_v1_025", 5, image_size=64)
    names = {layer.name for layer in model.layers}
    assert 10 < len(model.slim_end_points) < len(model.layers) / 2
    assert set(model.slim_end_points) <= names
    assert "Conv2d_13_pointwise.Relu6" in model.slim_end_points
    _, end_points = nets.get_network_fn("mobilenet_v1_025", 5)(
        keras.Input((64, 64, 3))
    )
    # Every end point but Predictions: the model outputs the logits, its
    # softmax is not one of its layers.
    assert "Predictions" in end_points
    assert (
        len(model.slim_end_points)
        == len({id(t) for t in end_points.values()}) - 1
    )
    assert nets.build("digits_cnn", 10).slim_end_points == ()
