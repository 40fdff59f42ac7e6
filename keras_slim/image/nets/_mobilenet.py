"""TF-Slim's mobilenet library (nets/mobilenet/mobilenet.py and
conv_blocks.py) in Keras layers: the ops of a conv def, the expanded
convolution block, depth rounding, the base builder, the classification
head and the training scope that `mobilenet_v2` uses.
"""

import dataclasses

import keras

from keras_slim.image.nets import _slim
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import depthwise_conv2d


@dataclasses.dataclass(frozen=True)
class TrainingScope(_slim.ArgScope):
    """TF-Slim's `mobilenet.training_scope`: an `ArgScope` that also sets
    the dropout before the logits.

    Attributes:
        dropout_keep_prob: The keep probability of that dropout.
    """

    dropout_keep_prob: float = 0.8


def training_scope(weight_decay=0.00004, dropout_keep_prob=0.8, bn_decay=0.997):
    """TF-Slim's `mobilenet.training_scope`.

    Weight decay on the convolutions' weights (the logits' included), none
    on depthwise weights nor biases; batch norm with decay `bn_decay` and
    `slim.batch_norm`'s epsilon 0.001; dropout `dropout_keep_prob`. Whether
    batch norm has `gamma`, the activation and the padding belong to the
    net's conv defs (`mobilenet_v2`'s: `gamma`, ReLU6, `SAME`).

    Args:
        weight_decay: The L2 factor of the weights.
        dropout_keep_prob: The keep probability of the dropout.
        bn_decay: The decay of the batch-norm moving averages.

    Returns:
        A `TrainingScope`.
    """
    return TrainingScope(
        weight_decay=weight_decay,
        batch_norm=_slim.BatchNorm(decay=bn_decay, epsilon=0.001),
        activation="relu6",
        regularize_depthwise=False,
        dropout_keep_prob=dropout_keep_prob,
    )


@dataclasses.dataclass(frozen=True)
class Conv:
    """`op(slim.conv2d, ...)` of a conv def: a convolution, batch norm and
    the activation, in scope `Conv` (`Conv_1`, ...).

    Attributes:
        num_outputs: The output channels, before the depth multiplier.
        kernel_size: `(height, width)`.
        stride: The stride.
    """

    num_outputs: float
    kernel_size: tuple = (3, 3)
    stride: int = 1


@dataclasses.dataclass(frozen=True)
class ExpandedConv:
    """`op(ops.expanded_conv, ...)` of a conv def: an inverted residual
    block, in scope `expanded_conv` (`expanded_conv_1`, ...).

    Attributes:
        num_outputs: The output channels, before the depth multiplier.
        stride: The depthwise stride.
        expansion: The expansion factor of the input channels
            (`expand_input_by_factor(expansion, divisible_by)`).
        divisible_by: The rounding of the expanded channels.
        kernel_size: The depthwise kernel.
        residual: Whether the input is added to the output (when the
            stride is 1 and the depths match).
    """

    num_outputs: float
    stride: int = 1
    expansion: float = 6
    divisible_by: int = 8
    kernel_size: tuple = (3, 3)
    residual: bool = True


def make_divisible(v, divisor, min_value=None):
    """TF-Slim's `_make_divisible`: `v` rounded to the nearest multiple of
    `divisor`, at least `min_value` (`divisor` when `None`), and not more
    than 10% below `v`."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return int(new_v)


class Scopes:
    """TensorFlow's unique default names: `name`, then `name_1`, ..."""

    def __init__(self):
        self._counts = {}

    def __call__(self, name):
        count = self._counts.get(name, 0)
        self._counts[name] = count + 1
        return name if count == 0 else f"{name}_{count}"


def fixed_padding(net, kernel_size, rate=1, *, scope):
    """TF-Slim's `_fixed_padding`: the zero padding that makes a `VALID`
    convolution give the output size of a `SAME` one, whatever the input
    size (TF-Slim takes the kernel's height for both sides).

    Args:
        net: The input tensor.
        kernel_size: The kernel `[height, width]`.
        rate: The dilation rate.
        scope: Its TF-Slim name (`Pad`).

    Returns:
        The padded tensor (`net` itself for a 1x1 kernel).
    """
    effective = kernel_size[0] + (kernel_size[0] - 1) * (rate - 1)
    total = effective - 1
    if not total:
        return net
    begin = total // 2
    padding = ((begin, total - begin), (begin, total - begin))
    return keras.layers.ZeroPadding2D(padding, name=_slim.name_of(scope))(net)


def expanded_conv(
    net,
    num_outputs,
    expansion_size,
    *,
    scope,
    sc,
    stride=1,
    rate=1,
    kernel_size=(3, 3),
    residual=True,
    use_explicit_padding=False,
):
    """TF-Slim's `expanded_conv` (its default `depthwise_location`):
    a 1x1 `expand` convolution when it widens the input, a `depthwise`
    convolution, both with batch norm and the activation, a 1x1 `project`
    convolution with batch norm and no activation, and the input added
    when the stride is 1 and the depths match.

    Args:
        net: The input tensor.
        num_outputs: The output channels.
        expansion_size: The expanded channels, or a function of the input
            channels giving them.
        scope: The block's TF-Slim scope (`expanded_conv_3`).
        sc: The net's `ArgScope`.
        stride: The depthwise stride.
        rate: The depthwise dilation rate.
        kernel_size: The depthwise kernel.
        residual: Whether the input may be added to the output.
        use_explicit_padding: Whether the depthwise convolution is `VALID`
            on an explicitly padded input.

    Returns:
        `(output, end_points)`: the end points `expansion_output` (when
        there is an expansion), `depthwise_output` and `output`.
    """
    end_points = {}
    prev_depth = net.shape[3]
    input_tensor = net
    inner_size = (
        expansion_size(prev_depth)
        if callable(expansion_size)
        else expansion_size
    )
    if inner_size > prev_depth:
        net = conv2d(net, inner_size, [1, 1], scope=f"{scope}/expand", sc=sc)
        end_points["expansion_output"] = net
    padding = "same"
    if use_explicit_padding:
        padding = "valid"
        net = fixed_padding(net, kernel_size, rate, scope=f"{scope}/Pad")
    net = depthwise_conv2d(
        net,
        kernel_size,
        stride=stride,
        rate=rate,
        padding=padding,
        scope=f"{scope}/depthwise",
        sc=sc,
    )
    end_points["depthwise_output"] = net
    net = conv2d(
        net,
        num_outputs,
        [1, 1],
        activation=None,
        scope=f"{scope}/project",
        sc=sc,
    )
    if residual and stride == 1 and net.shape[3] == input_tensor.shape[3]:
        net = keras.layers.Add(name=_slim.name_of(f"{scope}/add"))(
            [net, input_tensor]
        )
    end_points["output"] = net
    return net, end_points


def mobilenet_base(
    inputs,
    conv_defs,
    multiplier=1.0,
    *,
    sc,
    min_depth=8,
    divisible_by=8,
    final_endpoint=None,
    output_stride=None,
    use_explicit_padding=False,
):
    """TF-Slim's `mobilenet.mobilenet_base`: the ops of `conv_defs`, end
    points `layer_1`, `layer_2`, ... and, for each block, `layer_<i>/output`
    (`/depthwise_output`, `/expansion_output`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        conv_defs: A sequence of `Conv` and `ExpandedConv`.
        multiplier: The depth multiplier of every op's `num_outputs`.
        sc: The `ArgScope` of the layers.
        min_depth: The least depth of an op.
        divisible_by: The depths are multiples of it.
        final_endpoint: The last end point built (`layer_19`); `None`
            for all.
        output_stride: `None`, 1 or an even number: the largest ratio of
            input to output size; dilated convolutions then replace the
            later strides.
        use_explicit_padding: Whether convolutions are `VALID` on
            explicitly padded inputs rather than `SAME`.

    Returns:
        `(net, end_points)`.

    Raises:
        ValueError: for a `multiplier` not above 0 or an odd
            `output_stride`.
    """
    if multiplier <= 0:
        raise ValueError("multiplier is not greater than zero.")
    if output_stride is not None and (
        output_stride == 0 or (output_stride > 1 and output_stride % 2)
    ):
        raise ValueError("Output stride must be None, 1 or a multiple of 2.")
    padding = "valid" if use_explicit_padding else "same"
    scopes = Scopes()
    # The output stride so far, and the rate of the dilated convolutions
    # that replace strides beyond `output_stride`.
    current_stride = 1
    rate = 1
    net = inputs
    end_points = {}
    for i, opdef in enumerate(conv_defs):
        num_outputs = make_divisible(
            opdef.num_outputs * multiplier, divisible_by, min_depth
        )
        if output_stride is not None and current_stride == output_stride:
            layer_stride = 1
            layer_rate = rate
            rate *= opdef.stride
        else:
            layer_stride = opdef.stride
            layer_rate = 1
            current_stride *= opdef.stride
        end_point = f"layer_{i + 1}"
        if isinstance(opdef, Conv):
            if use_explicit_padding:
                net = fixed_padding(
                    net, opdef.kernel_size, layer_rate, scope=scopes("Pad")
                )
            # No dilation of a 1x1 convolution.
            op_rate = 1 if tuple(opdef.kernel_size) == (1, 1) else layer_rate
            net = conv2d(
                net,
                num_outputs,
                opdef.kernel_size,
                stride=layer_stride,
                rate=op_rate,
                padding=padding,
                scope=scopes("Conv"),
                sc=sc,
            )
            end_points[end_point] = net
        elif isinstance(opdef, ExpandedConv):
            net, block_points = expanded_conv(
                net,
                num_outputs,
                lambda depth, opdef=opdef: make_divisible(
                    depth * opdef.expansion, opdef.divisible_by
                ),
                stride=layer_stride,
                rate=layer_rate,
                kernel_size=opdef.kernel_size,
                residual=opdef.residual,
                use_explicit_padding=use_explicit_padding,
                scope=scopes("expanded_conv"),
                sc=sc,
            )
            end_points[end_point] = net
            for name, tensor in block_points.items():
                end_points[f"{end_point}/{name}"] = tensor
        else:
            raise ValueError(f"Unknown op {opdef!r} of layer {i + 1}.")
        if final_endpoint is not None and end_point == final_endpoint:
            break
    return net, end_points


def mobilenet_head(net, end_points, num_classes, *, sc):
    """TF-Slim's `mobilenet.mobilenet` after the base, in scope `Logits`:
    a global average pool (end point `global_pool`), dropout and the 1x1
    logits convolution `Conv2d_1c_1x1` with biases, squeezed (`Logits`).

    Args:
        net: The base's output.
        end_points: The base's end points, completed in place.
        num_classes: The logits; `None` or 0 for the pooled features.
        sc: The `ArgScope` (its `dropout_keep_prob`, slim.dropout's 0.5
            when it has none).

    Returns:
        `(logits, end_points)`, or `(global_pool, end_points)` without
        classes.
    """
    net = _slim.global_pool(net, scope="Logits/global_pool")
    end_points["global_pool"] = net
    if not num_classes:
        return net, end_points
    keep_prob = getattr(sc, "dropout_keep_prob", 0.5)
    net = _slim.dropout(net, keep_prob, scope="Logits/Dropout")
    logits = conv2d(
        net,
        num_classes,
        [1, 1],
        activation=None,
        normalize=False,
        scope="Logits/Conv2d_1c_1x1",
        sc=sc,
    )
    logits = _slim.squeeze(logits, scope="Logits/Squeeze")
    end_points["Logits"] = logits
    end_points["Predictions"] = keras.layers.Softmax(name="Predictions")(logits)
    return logits, end_points
