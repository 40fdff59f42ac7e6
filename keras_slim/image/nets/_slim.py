"""TF-Slim's layer vocabulary in Keras layers, for writing TF-Slim's nets."""

import dataclasses
import re

import keras
import tensorflow as tf

from keras_slim.image.nets._fused_batch_norm import FusedBatchNormalization

#: TF-Slim's variable names of Keras's.
_SLIM_VARIABLES = {
    "kernel": "weights",
    "bias": "biases",
    # A Keras SeparableConv2D's (inception_v2's first layer).
    "depthwise_kernel": "depthwise_weights",
    "pointwise_kernel": "pointwise_weights",
    "gamma": "gamma",
    "beta": "beta",
    "moving_mean": "moving_mean",
    "moving_variance": "moving_variance",
}

#: The default of arguments that `ArgScope` decides.
_SCOPE = object()


@keras.saving.register_keras_serializable(package="keras_slim")
class L2Loss(keras.regularizers.Regularizer):
    """TF-Slim's `slim.l2_regularizer(scale)`: `scale * tf.nn.l2_loss(w)`.

    The same penalty as `keras.regularizers.L2(scale / 2)`, on TensorFlow's
    `L2Loss` kernel, whose gradient is one multiplication, where Keras's
    `sum(square(w))` differentiates through a broadcast: on inception_v1
    the weight decay's ops cost a twentieth of the step.

    Args:
        scale: Non-negative float: TF-Slim's weight decay.

    Raises:
        ValueError: If `scale` is negative or not finite.

    Example:
    ```python
    keras.layers.Conv2D(8, 3, kernel_regularizer=L2Loss(4e-5))
    ```
    """

    def __init__(self, scale):
        scale = float(scale)
        if not 0.0 <= scale < float("inf"):
            raise ValueError(
                f"Received: weight_decay={scale}. Expected a non-negative "
                "finite number (TF-Slim's l2_regularizer scale)."
            )
        self.scale = scale

    def __call__(self, x):
        return self.scale * tf.nn.l2_loss(x)

    def get_config(self):
        return {"scale": self.scale}


@dataclasses.dataclass(frozen=True)
class BatchNorm:
    """TF-Slim's `batch_norm_params` of a net's arg scope.

    Attributes:
        decay: The moving averages' decay (Keras's `momentum`).
        epsilon: Added to the variance.
        center: Whether there is a `beta`.
        scale: Whether there is a `gamma` (inception's nets have none).
    """

    decay: float = 0.9997
    epsilon: float = 0.001
    center: bool = True
    scale: bool = False


@dataclasses.dataclass(frozen=True)
class ArgScope:
    """What TF-Slim's `arg_scope` of a net sets for its layers.

    Attributes:
        weight_decay: The L2 factor of weights (TF-Slim's
            `l2_regularizer(weight_decay)`, `L2Loss`); 0 for none.
        batch_norm: A `BatchNorm` after each convolution (TF-Slim's
            `normalizer_fn=slim.batch_norm`), or `None`.
        activation: The activation after each convolution: `"relu"`,
            `"relu6"` or `None`.
        padding: The default padding of convolutions: `"same"` or
            `"valid"`.
        regularize_depthwise: Whether depthwise weights get weight decay.
        weights_initializer: A Keras initializer identifier of the
            weights: TF-Slim's default `xavier_initializer()` is
            `"glorot_uniform"`; `truncated_normal(stddev)` for
            `truncated_normal_initializer(stddev=stddev)`.
        biases_initializer: A Keras initializer identifier of the biases
            (TF-Slim's default: zeros).
    """

    weight_decay: float = 0.0
    batch_norm: BatchNorm | None = None
    activation: str | None = "relu"
    padding: str = "same"
    regularize_depthwise: bool = False
    weights_initializer: object = "glorot_uniform"
    biases_initializer: object = "zeros"

    def regularizer(self, depthwise=False):
        """The L2 regularizer of weights, or `None`."""
        if not self.weight_decay or (
            depthwise and not self.regularize_depthwise
        ):
            return None
        return L2Loss(self.weight_decay)


def truncated_normal(stddev):
    """TF's `truncated_normal_initializer(stddev=stddev)` as an
    `ArgScope` initializer: a Keras identifier, so each layer gets its
    own initializer (one instance would draw the same values twice).

    Args:
        stddev: The standard deviation (values beyond two are redrawn,
            as TensorFlow's).

    Returns:
        A Keras initializer identifier (`keras.initializers.get`).
    """
    return {"class_name": "TruncatedNormal", "config": {"stddev": stddev}}


def name_of(scope):
    """The Keras layer name of a TF-Slim scope (`a/b` -> `a.b`)."""
    return scope.replace("/", ".")


def _pair(value):
    return tuple(value) if isinstance(value, (list, tuple)) else (value, value)


def activate(net, activation, scope):
    """The layer's `activation_fn`: a ReLU layer `<scope>.Relu`, or none."""
    if activation is None:
        return net
    if activation == "relu":
        return keras.layers.ReLU(name=name_of(f"{scope}/Relu"))(net)
    if activation == "relu6":
        return keras.layers.ReLU(6.0, name=name_of(f"{scope}/Relu6"))(net)
    raise ValueError(f"Unknown activation {activation!r}.")


def batch_norm(net, *, scope, sc, activation=None):
    """TF-Slim's `slim.batch_norm` (resnet_v2's `preact`, `postnorm`).

    Args:
        net: The input tensor.
        scope: Its TF-Slim scope.
        sc: The net's `ArgScope` (its `batch_norm` parameters).
        activation: An activation after it, or `None`.

    Returns:
        The output tensor.
    """
    params = sc.batch_norm or BatchNorm()
    net = FusedBatchNormalization(
        momentum=params.decay,
        epsilon=params.epsilon,
        center=params.center,
        scale=params.scale,
        name=name_of(scope),
    )(net)
    return activate(net, activation, scope)


def conv2d(
    net,
    num_outputs,
    kernel_size,
    *,
    scope,
    sc,
    stride=1,
    padding=None,
    rate=1,
    activation=_SCOPE,
    normalize=True,
):
    """TF-Slim's `slim.conv2d`: convolution, batch norm, activation.

    Args:
        net: The input tensor.
        num_outputs: The output channels.
        kernel_size: An int or `[height, width]`.
        scope: Its TF-Slim scope, below the net's.
        sc: The net's `ArgScope`.
        stride: An int or a pair. Defaults to `1`.
        padding: `"same"` or `"valid"`; `None` for the scope's.
        rate: The dilation rate. Defaults to `1`.
        activation: `"relu"`, `"relu6"` or `None`; the scope's by
            default.
        normalize: Whether the scope's batch norm applies (TF-Slim's
            `normalizer_fn=None` for logits is `False`). Defaults to `True`.

    Returns:
        The output tensor.
    """
    batch_normed = normalize and sc.batch_norm is not None
    net = keras.layers.Conv2D(
        num_outputs,
        _pair(kernel_size),
        strides=_pair(stride),
        padding=padding or sc.padding,
        dilation_rate=_pair(rate),
        use_bias=not batch_normed,
        kernel_initializer=sc.weights_initializer,
        bias_initializer=sc.biases_initializer,
        kernel_regularizer=sc.regularizer(),
        name=name_of(scope),
    )(net)
    if batch_normed:
        net = batch_norm(net, scope=f"{scope}/BatchNorm", sc=sc)
    return activate(
        net, sc.activation if activation is _SCOPE else activation, scope
    )


def depthwise_conv2d(
    net,
    kernel_size,
    *,
    scope,
    sc,
    stride=1,
    padding=None,
    rate=1,
    depth_multiplier=1,
    activation=_SCOPE,
):
    """TF-Slim's `slim.separable_conv2d(net, None, ...)`: the depthwise
    convolution alone (`depthwise_weights`), batch norm, activation.

    Args:
        net: The input tensor.
        kernel_size: An int or `[height, width]`.
        scope: Its TF-Slim scope.
        sc: The net's `ArgScope`.
        stride: An int or a pair. Defaults to `1`.
        padding: `"same"` or `"valid"`; `None` for the scope's.
        rate: The dilation rate. Defaults to `1`.
        depth_multiplier: Output channels per input channel.
            Defaults to `1`.
        activation: As for `conv2d`.

    Returns:
        The output tensor.
    """
    batch_normed = sc.batch_norm is not None
    net = keras.layers.DepthwiseConv2D(
        _pair(kernel_size),
        strides=_pair(stride),
        padding=padding or sc.padding,
        dilation_rate=_pair(rate),
        depth_multiplier=depth_multiplier,
        use_bias=not batch_normed,
        depthwise_regularizer=sc.regularizer(depthwise=True),
        name=name_of(scope),
    )(net)
    if batch_normed:
        net = batch_norm(net, scope=f"{scope}/BatchNorm", sc=sc)
    return activate(
        net, sc.activation if activation is _SCOPE else activation, scope
    )


def max_pool2d(net, kernel_size, *, scope, stride=2, padding="valid"):
    """TF-Slim's `slim.max_pool2d` (its default padding is `VALID`)."""
    return keras.layers.MaxPooling2D(
        _pair(kernel_size), _pair(stride), padding, name=name_of(scope)
    )(net)


def avg_pool2d(net, kernel_size, *, scope, stride=2, padding="valid"):
    """TF-Slim's `slim.avg_pool2d` (its default padding is `VALID`)."""
    return keras.layers.AveragePooling2D(
        _pair(kernel_size), _pair(stride), padding, name=name_of(scope)
    )(net)


def global_pool(net, *, scope):
    """`tf.reduce_mean(net, [1, 2], keep_dims=True)`: `[N, 1, 1, C]`."""
    return keras.layers.GlobalAveragePooling2D(
        keepdims=True, name=name_of(scope)
    )(net)


def dropout(net, keep_prob, *, scope):
    """TF-Slim's `slim.dropout(net, keep_prob)`: active in training."""
    return keras.layers.Dropout(1.0 - keep_prob, name=name_of(scope))(net)


def softmax(logits, scope="Predictions"):
    """TF-Slim's `slim.softmax`, the nets' default `prediction_fn`.

    Args:
        logits: The logits, classes last.
        scope: The layer's scope.

    Returns:
        The softmax over the last axis.
    """
    return keras.layers.Softmax(name=name_of(scope))(logits)


def concat(values, *, scope, axis=3):
    """`tf.concat(values, axis)`."""
    return keras.layers.Concatenate(axis=axis, name=name_of(scope))(values)


def squeeze(net, *, scope):
    """`tf.squeeze(net, [1, 2])`: logits `[N, 1, 1, C]` -> `[N, C]`
    (an error, as TensorFlow's, when the spatial size is not 1x1)."""
    return keras.layers.Reshape((net.shape[-1],), name=name_of(scope))(net)


def repeat(net, repetitions, layer, *args, scope, **kwargs):
    """TF-Slim's `slim.repeat`: `layer` `repetitions` times, scopes
    `<scope>/<scope>_1`, `<scope>/<scope>_2`, ...

    Args:
        net: The input tensor.
        repetitions: How many layers.
        layer: A function of this module (`conv2d`).
        *args: Its arguments after `net`.
        scope: The scope of the repetition.
        **kwargs: Its keyword arguments.

    Returns:
        The output tensor.
    """
    base = scope.rsplit("/", 1)[-1]
    for i in range(1, repetitions + 1):
        net = layer(net, *args, scope=f"{scope}/{base}_{i}", **kwargs)
    return net


_DEPTHWISE = re.compile(r"depthwise", re.IGNORECASE)


def slim_name(path, net_scope):
    """TF-Slim's checkpoint name of a Keras variable path of a net.

    Args:
        path: A variable path, `<layer name>/<variable>`.
        net_scope: The net's TF-Slim scope (`InceptionV3`).

    Returns:
        `<net_scope>/<scope>/<TF-Slim variable>`; a depthwise layer's
        kernel is `depthwise_weights`. A path of no TF-Slim variable
        (a seed generator's state) is returned unchanged.

    Example:
    ```python
    slim_name("Conv2d_1a_3x3.BatchNorm/beta", "InceptionV3")
    # "InceptionV3/Conv2d_1a_3x3/BatchNorm/beta"
    ```
    """
    layer, _, variable = path.rpartition("/")
    if variable not in _SLIM_VARIABLES or not layer:
        return path
    name = _SLIM_VARIABLES[variable]
    last = layer.rsplit(".", 1)[-1]
    if variable == "kernel" and _DEPTHWISE.search(last):
        name = "depthwise_weights"
    return f"{net_scope}/{layer.replace('.', '/')}/{name}"


def keras_scope(scope, net_scope):
    """A TF-Slim scope as a pattern on Keras variable paths.

    `--checkpoint_exclude_scopes` and `--trainable_scopes` name TF-Slim
    scopes (`InceptionV3/Logits`); the variables they select are those
    whose TF-Slim name starts with the scope, so whose Keras path starts
    with `Logits` (the net's scope removed, `/` as `.`).

    Args:
        scope: A TF-Slim scope, with or without the net's scope first.
        net_scope: The net's TF-Slim scope.

    Returns:
        A regular expression for `re.match` on variable paths.
    """
    prefix = f"{net_scope}/"
    if scope.startswith(prefix):
        scope = scope[len(prefix) :]
    elif scope == net_scope:
        return ".*"
    return re.escape(name_of(scope))
