"""The networks `keras-slim-train` builds: TF-Slim's `nets_factory`.

Import it as `from keras_slim.image import nets`.

`build(model_name, num_classes)` returns a functional `keras_slim.SlimModel`
named after the net, from an input `images` of shape
`(image_size, image_size, channels)` to `logits` (no softmax: train with
`from_logits=True` losses). The nets are

- `digits_cnn`: the command's small CNN for 8x8 digits (the default);
- `mobilenet_v2`, `resnet50`, `inception_v3`: Keras Applications without
  their top and with random weights (nothing is downloaded), global
  average pooling, then a dense `logits` layer.

Scopes. `--trainable_scopes`, `--checkpoint_exclude_scopes` and
`--freeze` are regular expressions matched with `re.match` against Keras
variable paths (`variable.path`): the layer name, a slash, the variable
(`kernel`, `bias`, `gamma`, `beta`, `moving_mean`, `moving_variance`).
List them with

```python
model = nets.build("mobilenet_v2", 5, image_size=96)
print([v.path for v in model.trainable_variables])
```

For `mobilenet_v2` they are `Conv1/kernel` and `bn_Conv1/gamma` (the stem),
`expanded_conv_depthwise/kernel` and `expanded_conv_project/kernel`
(block 0), `block_1_expand/kernel` ... `block_16_project_BN/beta` (blocks
1 to 16), `Conv_1/kernel` and `Conv_1_bn/gamma` (the last 1x1 conv), and
`logits/kernel`, `logits/bias` (the head). So `--trainable_scopes logits`
trains the head alone, `--trainable_scopes "logits|block_16_|Conv_1"`
the head and the last block. `digits_cnn` has `conv1`, `conv1_bn`,
`conv2`, `conv2_bn` and `logits`; `resnet50` has `conv1_conv`,
`conv2_block1_1_conv` ... `conv5_block3_3_bn` and `logits`.
`inception_v3`'s layers are unnamed in Keras, so its paths are the names
a fresh Keras session gives them (`conv2d/kernel` ... `conv2d_93/kernel`,
`batch_normalization/beta` ... `batch_normalization_93/beta`), whatever
was built before it, and `logits`.

Weight decay is TF-Slim's: an L2 penalty `weight_decay / 2 * sum(w**2)`
(`tf.nn.l2_loss`) on each convolution and dense kernel; depthwise kernels
are left out, as TF-Slim's `regularize_depthwise=False`.

Warm-starting from TF-Slim's checkpoints: `slim_name_map("mobilenet_v2")`
maps the paths above to the names in TF-Slim's `mobilenet_v2_1.0_224.ckpt`
(see `slim_name_map`). Exclude the head, whose shape differs, with
`--checkpoint_exclude_scopes logits`, as TF-Slim's fine-tuning tutorial
excludes its logits.
"""

import collections
import numbers

import keras

from keras_slim import _validation
from keras_slim.image.nets import digits_cnn
from keras_slim.image.nets import keras_applications
from keras_slim.model import SlimModel

__all__ = [
    "NETWORKS",
    "build",
    "default_image_size",
    "minimum_image_size",
    "preprocessing_name",
    "slim_name_map",
]

_Net = collections.namedtuple(
    "_Net", ["default_size", "minimum_size", "channels", "preprocessing"]
)

# TF-Slim's default sizes and preprocessing; Keras's minimum sizes.
_NETS = {
    "digits_cnn": _Net(8, 8, 1, "digits"),
    "mobilenet_v2": _Net(224, 32, 3, "inception"),
    "resnet50": _Net(224, 32, 3, "vgg"),
    "inception_v3": _Net(299, 75, 3, "inception"),
}

NETWORKS = tuple(_NETS)


def _net(model_name):
    if not isinstance(model_name, str) or model_name not in _NETS:
        raise _validation.invalid(
            "model_name", model_name, f"one of {NETWORKS}"
        )
    return _NETS[model_name]


def default_image_size(model_name):
    """The side of the square images a net is trained on by default.

    Args:
        model_name: One of `NETWORKS`.

    Returns:
        TF-Slim's default size: 8 for `digits_cnn`, 224 for `mobilenet_v2`
        and `resnet50`, 299 for `inception_v3`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.default_image_size("inception_v3")  # 299
    ```
    """
    return _net(model_name).default_size


def minimum_image_size(model_name):
    """The smallest image side a net accepts.

    Args:
        model_name: One of `NETWORKS`.

    Returns:
        Keras's minimum: 8 for `digits_cnn`, 32 for `mobilenet_v2` and
        `resnet50`, 75 for `inception_v3`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.minimum_image_size("mobilenet_v2")  # 32
    ```
    """
    return _net(model_name).minimum_size


def preprocessing_name(model_name):
    """The image preprocessing a net is trained with by default.

    Args:
        model_name: One of `NETWORKS`.

    Returns:
        The name TF-Slim's `preprocessing_factory` maps the net to:
        `"digits"` for `digits_cnn`, `"inception"` for `mobilenet_v2` and
        `inception_v3`, `"vgg"` for `resnet50`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`.

    Example:
    ```python
    nets.preprocessing_name("resnet50")  # "vgg"
    ```
    """
    return _net(model_name).preprocessing


def _image_size(model_name, image_size):
    net = _net(model_name)
    if image_size is None:
        return net.default_size
    if not _validation.is_int(image_size) or image_size < net.minimum_size:
        raise _validation.invalid(
            "image_size",
            image_size,
            f"an integer of at least {net.minimum_size} for {model_name} "
            "(its minimum image size)",
        )
    return int(image_size)


def _weight_decay(value):
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not value >= 0
    ):
        raise _validation.invalid(
            "weight_decay", value, "a non-negative number"
        )
    return float(value)


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
        weight_decay: Non-negative float: TF-Slim's L2 factor on conv and
            dense kernels (a penalty of `weight_decay / 2 * sum(w**2)`,
            as `tf.nn.l2_loss`); 0 adds no loss.
            Defaults to `0.0`.
        gradient_policy: A `keras_slim.GradientPolicy` for the model, or
            `None` for the default one.
            Defaults to `None`.

    Returns:
        An uncompiled `keras_slim.SlimModel` named `model_name`, from
        the input `images` to the `logits` layer's output
        `(batch, num_classes)`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`, for an
            `image_size` below the net's minimum, or for an invalid
            `num_classes`, `channels` or `weight_decay`.
        TypeError: if `gradient_policy` is not a `GradientPolicy` or `None`.

    Example:
    ```python
    keras.utils.set_random_seed(0)
    model = nets.build("mobilenet_v2", 5, image_size=96)
    model.compile(
        optimizer="sgd",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    ```
    """
    net = _net(model_name)
    num_classes = _validation.positive_int("num_classes", num_classes)
    image_size = _image_size(model_name, image_size)
    channels = _validation.positive_int_or_none("channels", channels)
    weight_decay = _weight_decay(weight_decay)
    inputs = keras.Input(
        (image_size, image_size, channels or net.channels), name="images"
    )
    if model_name == "digits_cnn":
        logits = digits_cnn.network(num_classes, weight_decay)(inputs)
    else:
        features = keras_applications.features(model_name, inputs)
        logits = keras.layers.Dense(num_classes, name="logits")(features)
    model = SlimModel(
        inputs, logits, name=model_name, gradient_policy=gradient_policy
    )
    if weight_decay and model_name != "digits_cnn":
        keras_applications.regularize(model, weight_decay)
    return model


_NAME_MAPS = {"mobilenet_v2": keras_applications.mobilenet_v2_name}


def slim_name_map(model_name):
    """How a net's variables are named in TF-Slim's checkpoints.

    For `mobilenet_v2`, the names of TF-Slim's `mobilenet_v2.py`
    (`mobilenet_v2_1.0_224.ckpt`, scope `MobilenetV2`): `Conv1/kernel` ->
    `MobilenetV2/Conv/weights`, `bn_Conv1/gamma` ->
    `MobilenetV2/Conv/BatchNorm/gamma`, `expanded_conv_depthwise/kernel`
    -> `MobilenetV2/expanded_conv/depthwise/depthwise_weights`,
    `block_{i}_{expand,depthwise,project}[_BN]` ->
    `MobilenetV2/expanded_conv_{i}/{expand,depthwise,project}[/BatchNorm]`,
    `Conv_1` and `Conv_1_bn` -> `MobilenetV2/Conv_1[/BatchNorm]`. The head
    `logits/{kernel,bias}` maps to
    `MobilenetV2/Logits/Conv2d_1c_1x1/{weights,biases}`, whose shape
    (a 1x1 conv over 1001 classes) differs: exclude it from the warm start
    (`exclude="logits"`). A path of no Keras MobileNetV2 layer is returned
    unchanged, so it is reported missing.

    Args:
        model_name: A net of `NETWORKS` with a map: `"mobilenet_v2"`.

    Returns:
        A callable `variable path -> TF-Slim checkpoint name`, for
        `keras_slim.callbacks.WarmStart(name_map=...)`.

    Raises:
        ValueError: if `model_name` is not one of `NETWORKS`, or names a
            net without a map.

    Example:
    ```python
    model = nets.build("mobilenet_v2", 5)
    warm = keras_slim.callbacks.WarmStart(
        "/tmp/mobilenet_v2_1.0_224.ckpt",
        name_map=nets.slim_name_map("mobilenet_v2"),
        exclude="logits",
    )
    model.fit(dataset, epochs=1, callbacks=[warm])
    ```
    """
    _net(model_name)
    if model_name not in _NAME_MAPS:
        raise _validation.invalid(
            "model_name",
            model_name,
            f"a net with a TF-Slim name map: one of {tuple(_NAME_MAPS)}",
        )
    return _NAME_MAPS[model_name]
