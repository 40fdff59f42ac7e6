"""The networks `keras-slim-train` builds: TF-Slim's `nets_factory`."""

import dataclasses
import functools
import numbers
from collections.abc import Callable

import keras

from keras_slim import checks
from keras_slim.image.nets import _slim
from keras_slim.image.nets import alexnet
from keras_slim.image.nets import cifarnet
from keras_slim.image.nets import digits_cnn
from keras_slim.image.nets import inception_resnet_v2
from keras_slim.image.nets import inception_v1
from keras_slim.image.nets import inception_v2
from keras_slim.image.nets import inception_v3
from keras_slim.image.nets import inception_v4
from keras_slim.image.nets import lenet
from keras_slim.image.nets import mobilenet_v1
from keras_slim.image.nets import mobilenet_v2
from keras_slim.image.nets import overfeat
from keras_slim.image.nets import resnet_v1
from keras_slim.image.nets import resnet_v2
from keras_slim.image.nets import vgg
from keras_slim.model import SlimModel

__all__ = [
    "NETWORKS",
    "build",
    "default_image_size",
    "get_network_fn",
    "minimum_image_size",
    "preprocessing_name",
    "slim_name_map",
    "slim_scope",
]


@dataclasses.dataclass(frozen=True)
class _Net:
    """One `nets_factory` entry: TF-Slim's `networks_map` and
    `arg_scopes_map` in one row, with the net's sizes and scope.

    Attributes:
        function: The net's function in its family module.
        arg_scope: The family's arg scope function.
        scope: The net's TF-Slim variable scope (`InceptionV3`).
        default_size: TF-Slim's `default_image_size`.
        minimum_size: The smallest image side TF-Slim's net takes.
        preprocessing: TF-Slim's `preprocessing_factory` name for it.
    """

    function: Callable
    arg_scope: Callable
    scope: str
    default_size: int
    minimum_size: int
    preprocessing: str


def _resnets(module, version, minimum):
    return {
        f"resnet_{version}_{depth}": _Net(
            getattr(module, f"resnet_{version}_{depth}"),
            module.resnet_arg_scope,
            f"resnet_{version}_{depth}",
            224,
            minimum,
            "vgg",
        )
        for depth in (50, 101, 152, 200)
    }


def _mobilenets(module, names, arg_scope, scope):
    return {
        name: _Net(getattr(module, name), arg_scope, scope, 224, 1, "inception")
        for name in names
    }


_NETS = {
    "alexnet_v2": _Net(
        alexnet.alexnet_v2,
        alexnet.alexnet_v2_arg_scope,
        "alexnet_v2",
        224,
        195,
        "vgg",
    ),
    "cifarnet": _Net(
        cifarnet.cifarnet,
        cifarnet.cifarnet_arg_scope,
        "CifarNet",
        32,
        4,
        "cifarnet",
    ),
    "overfeat": _Net(
        overfeat.overfeat,
        overfeat.overfeat_arg_scope,
        "overfeat",
        231,
        231,
        "vgg",
    ),
    **{
        name: _Net(getattr(vgg, name), vgg.vgg_arg_scope, name, 224, 224, "vgg")
        for name in ("vgg_a", "vgg_16", "vgg_19")
    },
    "inception_v1": _Net(
        inception_v1.inception_v1,
        inception_v1.inception_v1_arg_scope,
        "InceptionV1",
        224,
        193,
        "inception",
    ),
    "inception_v2": _Net(
        inception_v2.inception_v2,
        inception_v2.inception_v2_arg_scope,
        "InceptionV2",
        224,
        1,
        "inception",
    ),
    "inception_v3": _Net(
        inception_v3.inception_v3,
        inception_v3.inception_v3_arg_scope,
        "InceptionV3",
        299,
        107,
        "inception",
    ),
    "inception_v4": _Net(
        inception_v4.inception_v4,
        inception_v4.inception_v4_arg_scope,
        "InceptionV4",
        299,
        107,
        "inception",
    ),
    "inception_resnet_v2": _Net(
        inception_resnet_v2.inception_resnet_v2,
        inception_resnet_v2.inception_resnet_v2_arg_scope,
        "InceptionResnetV2",
        299,
        107,
        "inception",
    ),
    "lenet": _Net(
        lenet.lenet,
        lenet.lenet_arg_scope,
        "LeNet",
        28,
        4,
        "lenet",
    ),
    **_resnets(resnet_v1, "v1", 1),
    **_resnets(resnet_v2, "v2", 1),
    **_mobilenets(
        mobilenet_v1,
        (
            "mobilenet_v1",
            "mobilenet_v1_075",
            "mobilenet_v1_050",
            "mobilenet_v1_025",
        ),
        mobilenet_v1.mobilenet_v1_arg_scope,
        "MobilenetV1",
    ),
    **_mobilenets(
        mobilenet_v2,
        ("mobilenet_v2", "mobilenet_v2_140", "mobilenet_v2_035"),
        mobilenet_v2.mobilenet_v2_arg_scope,
        "MobilenetV2",
    ),
}

#: The command's own small CNN for the bundled 8x8 digits.
DIGITS_CNN = "digits_cnn"

NETWORKS = (DIGITS_CNN, *_NETS)


def _check_name(model_name):
    if not isinstance(model_name, str) or model_name not in NETWORKS:
        raise checks.invalid("model_name", model_name, f"one of {NETWORKS}")
    return model_name


def _net(model_name):
    _check_name(model_name)
    if model_name == DIGITS_CNN:
        return None
    return _NETS[model_name]


def default_image_size(model_name):
    """The side of the square images a net is trained on by default.

    Args:
        model_name: One of `NETWORKS`.

    Returns:
        TF-Slim's `default_image_size` (299 for `inception_v3`, 224 for
        `resnet_v1_50`), 8 for `digits_cnn`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.default_image_size("inception_v3")  # 299
    ```
    """
    net = _net(model_name)
    return 8 if net is None else net.default_size


def minimum_image_size(model_name):
    """The smallest image side a net accepts.

    Args:
        model_name: One of `NETWORKS`.

    Returns:
        The smallest side TF-Slim's net builds on: 224 for `vgg_16`, whose
        `fc6` is a 7x7 `VALID` convolution; 107 for `inception_v3`, whose
        auxiliary head pools 5x5 `VALID`; 1 for the nets of `SAME`
        convolutions (resnets, mobilenets).

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.minimum_image_size("vgg_16")  # 224
    ```
    """
    net = _net(model_name)
    return 8 if net is None else net.minimum_size


def preprocessing_name(model_name):
    """The image preprocessing a net is trained with by default.

    Args:
        model_name: One of `NETWORKS`.

    Returns:
        The family TF-Slim's `preprocessing_factory` maps the net's name
        to (TF-Slim's train_image_classifier preprocesses with
        `--preprocessing_name or --model_name`): `"inception"` for the
        inception and mobilenet nets, `"vgg"` for the vgg and resnet nets;
        for the nets TF-Slim's map lacks (where TF-Slim raises without
        `--preprocessing_name`), their family's: `"vgg"` for
        `alexnet_v2` and `overfeat`, `"inception"` for
        `mobilenet_v1_075`, `_050` and `_025`; `"lenet"` and
        `"cifarnet"` for `lenet` and `cifarnet`; `"digits"` for
        `digits_cnn`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.preprocessing_name("resnet_v1_50")  # "vgg"
    ```
    """
    net = _net(model_name)
    return "digits" if net is None else net.preprocessing


def _image_size(model_name, image_size):
    minimum = minimum_image_size(model_name)
    if image_size is None:
        return default_image_size(model_name)
    if not checks.is_int(image_size) or image_size < minimum:
        raise checks.invalid(
            "image_size",
            image_size,
            f"an integer of at least {minimum} for {model_name} "
            "(its minimum image size)",
        )
    return int(image_size)


def _weight_decay(value):
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not value >= 0
    ):
        raise checks.invalid("weight_decay", value, "a non-negative number")
    return float(value)


def get_network_fn(model_name, num_classes, weight_decay=0.0):
    """TF-Slim's `nets_factory.get_network_fn`, on Keras tensors.

    Args:
        model_name: One of `NETWORKS` but `digits_cnn`.
        num_classes: The logits; `None` or 0 for the pre-logit features.
        weight_decay: The L2 factor of the net's arg scope.
            Defaults to `0.0`.

    Returns:
        `network_fn(images) -> (logits, end_points)`, with the net's
        `default_image_size`.

    Raises:
        ValueError: for an unknown `model_name`.

    Example:
    ```python
    network_fn = nets.get_network_fn("inception_v3", 1001)
    images = keras.Input((299, 299, 3))
    logits, end_points = network_fn(images)
    ```
    """
    net = _net(model_name)
    if net is None:
        raise checks.invalid("model_name", model_name, "one of TF-Slim's nets")
    sc = net.arg_scope(weight_decay=weight_decay)

    @functools.wraps(net.function)
    def network_fn(images):
        return net.function(images, num_classes, sc=sc)

    network_fn.default_image_size = net.default_size
    return network_fn


def build(
    model_name,
    num_classes,
    *,
    image_size=None,
    channels=None,
    weight_decay=0.0,
    gradient_policy=None,
):
    """Builds a net of `NETWORKS` as a functional `SlimModel`.

    Call it under the strategy's scope; seed first
    (`keras.utils.set_random_seed`) for reproducible weights.

    Args:
        model_name: One of `NETWORKS` (`--model_name`).
        num_classes: Positive integer: the number of logits.
        image_size: The side of the square input images, at least
            `minimum_image_size(model_name)`; `None` for
            `default_image_size(model_name)`.
            Defaults to `None`.
        channels: Positive integer: the channels of the input images;
            `None` for the net's own (1 for `digits_cnn`, 3 otherwise).
            Defaults to `None`.
        weight_decay: Non-negative float: TF-Slim's L2 factor on the
            weights (a penalty of `weight_decay / 2 * sum(w**2)`, as
            `tf.nn.l2_loss`); 0 adds no loss.
            Defaults to `0.0`.
        gradient_policy: A `keras_slim.GradientPolicy` for the model, or
            `None` for the default one.
            Defaults to `None`.

    Returns:
        An uncompiled `keras_slim.SlimModel` named `model_name`, from the
        input `images` to the logits `(batch, num_classes)`; with two
        outputs, the logits and the auxiliary logits, for a net with
        TF-Slim's `AuxLogits` head (TF-Slim's train_image_classifier
        weighs their loss 0.4). Its `slim_end_points` are the names of
        the layers whose outputs are TF-Slim's end_points (empty for
        `digits_cnn`): what train_image_classifier summarized
        (`Summaries(activations=model.slim_end_points)`).

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`, for an
            `image_size` below the net's minimum, or for an invalid
            `num_classes`, `channels` or `weight_decay`.
        TypeError: if `gradient_policy` is not a `GradientPolicy` or `None`.

    Example:
    ```python
    keras.utils.set_random_seed(0)
    model = nets.build("mobilenet_v1_050", 5, image_size=96)
    model.compile(
        optimizer="sgd",
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
    )
    ```
    """
    _check_name(model_name)
    num_classes = checks.positive_int("num_classes", num_classes)
    image_size = _image_size(model_name, image_size)
    channels = checks.positive_int_or_none("channels", channels)
    weight_decay = _weight_decay(weight_decay)
    default_channels = 1 if model_name == DIGITS_CNN else 3
    inputs = keras.Input(
        (image_size, image_size, channels or default_channels), name="images"
    )
    if model_name == DIGITS_CNN:
        outputs = digits_cnn.network(num_classes, weight_decay)(inputs)
    else:
        network_fn = get_network_fn(model_name, num_classes, weight_decay)
        try:
            outputs, end_points = network_fn(inputs)
        except ValueError as error:
            raise ValueError(
                f"Invalid value for argument `image_size`. Received: "
                f"image_size={image_size}, on which {model_name}'s layers "
                "do not fit (its logits would not be 1x1, as in TF-Slim). "
                f"Expected {default_image_size(model_name)}, TF-Slim's size "
                f"for {model_name}, or a size close to it and at least "
                f"{minimum_image_size(model_name)}."
            ) from error
        if "AuxLogits" in end_points:
            outputs = [outputs, end_points["AuxLogits"]]
    model = SlimModel(
        inputs, outputs, name=model_name, gradient_policy=gradient_policy
    )
    model.slim_end_points = (
        ()
        if model_name == DIGITS_CNN
        else (_end_point_layers(model, end_points))
    )
    return model


def _end_point_layers(model, end_points):
    """The names of the layers whose outputs are the net's end points."""
    by_output = {}
    for layer in model.layers:
        try:
            by_output[id(layer.output)] = layer.name
        except (AttributeError, ValueError):  # several nodes or outputs
            continue
    names = [by_output.get(id(t)) for t in end_points.values()]
    return tuple(dict.fromkeys(n for n in names if n is not None))


def slim_name_map(model_name):
    """How a net's variables are named in TF-Slim's checkpoints.

    `Mixed_5b.Branch_1.Conv2d_0b_5x5/kernel` ->
    `InceptionV3/Mixed_5b/Branch_1/Conv2d_0b_5x5/weights`: the net's scope,
    the layer name's `.` as `/`, and TF-Slim's variable names (`weights`,
    `biases`, `depthwise_weights`, `BatchNorm/{gamma, beta, moving_mean,
    moving_variance}`). A path of no TF-Slim variable is returned as it
    is, so a warm start reports it missing.

    Args:
        model_name: One of `NETWORKS` but `digits_cnn`.

    Returns:
        A callable `variable path -> TF-Slim checkpoint name`, for
        `keras_slim.callbacks.WarmStart(name_map=...)`.

    Raises:
        ValueError: if `model_name` is not one of TF-Slim's nets.

    Example:
    ```python
    model = nets.build("inception_v3", 5)
    warm = keras_slim.callbacks.WarmStart(
        "/tmp/inception_v3.ckpt",
        name_map=nets.slim_name_map("inception_v3"),
        exclude=[nets.slim_scope("inception_v3", "InceptionV3/Logits"),
                 nets.slim_scope("inception_v3", "InceptionV3/AuxLogits")],
    )
    model.fit(dataset, epochs=1, callbacks=[warm])
    ```
    """
    net = _net(model_name)
    if net is None:
        raise checks.invalid(
            "model_name",
            model_name,
            "one of TF-Slim's nets (digits_cnn has no TF-Slim checkpoint)",
        )
    return functools.partial(_slim.slim_name, net_scope=net.scope)


def slim_scope(model_name, scope):
    """A TF-Slim scope of a net as a pattern on its Keras variable paths.

    `--checkpoint_exclude_scopes` and `--trainable_scopes` as TF-Slim's
    README writes them (`InceptionV3/Logits`) select the variables whose
    TF-Slim name starts with the scope; the pattern selects the same
    variables by path (`Logits`, matched with `re.match`). A scope that
    does not start with the net's TF-Slim scope is a pattern on Keras
    paths already, and is returned as it is.

    Args:
        model_name: One of `NETWORKS`.
        scope: A scope, TF-Slim's or a Keras path prefix.

    Returns:
        A regular expression.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.slim_scope("inception_v3", "InceptionV3/AuxLogits")  # "AuxLogits"
    ```
    """
    net = _net(model_name)
    if net is None or not (
        scope == net.scope or scope.startswith(f"{net.scope}/")
    ):
        return scope
    return _slim.keras_scope(scope, net.scope)
