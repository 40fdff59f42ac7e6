"""TF-Slim's MobileNet v1 (nets/mobilenet_v1.py): `mobilenet_v1` and its
depth multipliers (`mobilenet_v1_075`, `mobilenet_v1_050`,
`mobilenet_v1_025`).
"""

import collections
import dataclasses

import keras

from keras_slim.image.nets import _mobilenet
from keras_slim.image.nets import _slim
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import depthwise_conv2d

#: A 3x3 convolution of the body.
Conv = collections.namedtuple("Conv", ["kernel", "stride", "depth"])
#: A depthwise separable convolution: depthwise `kernel`, pointwise 1x1.
DepthSepConv = collections.namedtuple(
    "DepthSepConv", ["kernel", "stride", "depth"]
)

#: TF-Slim's `_CONV_DEFS`: the body, layers `Conv2d_0` to `Conv2d_13`.
_CONV_DEFS = (
    Conv(kernel=[3, 3], stride=2, depth=32),
    DepthSepConv(kernel=[3, 3], stride=1, depth=64),
    DepthSepConv(kernel=[3, 3], stride=2, depth=128),
    DepthSepConv(kernel=[3, 3], stride=1, depth=128),
    DepthSepConv(kernel=[3, 3], stride=2, depth=256),
    DepthSepConv(kernel=[3, 3], stride=1, depth=256),
    DepthSepConv(kernel=[3, 3], stride=2, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=1, depth=512),
    DepthSepConv(kernel=[3, 3], stride=2, depth=1024),
    DepthSepConv(kernel=[3, 3], stride=1, depth=1024),
)


def mobilenet_v1_arg_scope(
    weight_decay=0.00004,
    regularize_depthwise=False,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
):
    """TF-Slim's `mobilenet_v1_arg_scope`: batch norm with `beta` and
    `gamma`, ReLU6, weight decay on the weights.

    Args:
        weight_decay: The L2 factor of the weights.
        regularize_depthwise: Whether depthwise weights are decayed too.
        batch_norm_decay: The decay of the batch-norm moving averages.
        batch_norm_epsilon: Added to the variance in batch norm.

    Returns:
        An `ArgScope`.
    """
    return _slim.ArgScope(
        weight_decay=weight_decay,
        batch_norm=_slim.BatchNorm(
            decay=batch_norm_decay,
            epsilon=batch_norm_epsilon,
            center=True,
            scale=True,
        ),
        activation="relu6",
        regularize_depthwise=regularize_depthwise,
    )


def mobilenet_v1_base(
    inputs,
    final_endpoint="Conv2d_13_pointwise",
    min_depth=8,
    depth_multiplier=1.0,
    conv_defs=None,
    output_stride=None,
    use_explicit_padding=False,
    *,
    sc,
):
    """TF-Slim's `mobilenet_v1_base`: the body up to `final_endpoint`.

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        final_endpoint: The last end point built: `Conv2d_0`,
            `Conv2d_<i>_depthwise` or `Conv2d_<i>_pointwise`.
        min_depth: The least depth of a convolution.
        depth_multiplier: The multiplier of every convolution's depth.
        conv_defs: A sequence of `Conv` and `DepthSepConv`; `_CONV_DEFS`
            when `None`.
        output_stride: `None`, 8, 16 or 32: the largest ratio of input to
            output size (dilated convolutions beyond it).
        use_explicit_padding: Whether convolutions are `VALID` on
            explicitly padded inputs rather than `SAME`.
        sc: The `ArgScope` (`mobilenet_v1_arg_scope()`).

    Returns:
        `(net, end_points)`: Keras tensors.

    Raises:
        ValueError: for an unknown `final_endpoint`, a `depth_multiplier`
            not above 0 or another `output_stride`.
    """
    if depth_multiplier <= 0:
        raise ValueError("depth_multiplier is not greater than zero.")
    if output_stride is not None and output_stride not in (8, 16, 32):
        raise ValueError("Only allowed output_stride values are 8, 16, 32.")
    conv_defs = _CONV_DEFS if conv_defs is None else conv_defs
    if sc.batch_norm is None:  # The layers name slim.batch_norm itself.
        sc = dataclasses.replace(sc, batch_norm=_slim.BatchNorm(decay=0.999))
    padding = "valid" if use_explicit_padding else "same"
    pads = _mobilenet.Scopes()

    def depth(d):
        return max(int(d * depth_multiplier), min_depth)

    end_points = {}
    # The output stride so far, and the rate of the dilated convolutions
    # that replace strides beyond `output_stride`.
    current_stride = 1
    rate = 1
    net = inputs
    for i, conv_def in enumerate(conv_defs):
        end_point_base = f"Conv2d_{i}"
        if output_stride is not None and current_stride == output_stride:
            layer_stride = 1
            layer_rate = rate
            rate *= conv_def.stride
        else:
            layer_stride = conv_def.stride
            layer_rate = 1
            current_stride *= conv_def.stride
        if isinstance(conv_def, Conv):
            end_point = end_point_base
            if use_explicit_padding:
                net = _mobilenet.fixed_padding(
                    net, conv_def.kernel, scope=pads("Pad")
                )
            # As TF-Slim: the def's own stride, not dilated.
            net = conv2d(
                net,
                depth(conv_def.depth),
                conv_def.kernel,
                stride=conv_def.stride,
                padding=padding,
                scope=end_point,
                sc=sc,
            )
            end_points[end_point] = net
            if end_point == final_endpoint:
                return net, end_points
        elif isinstance(conv_def, DepthSepConv):
            layers = _depth_sep_conv(
                net,
                conv_def,
                depth(conv_def.depth),
                scope=end_point_base,
                stride=layer_stride,
                rate=layer_rate,
                padding=padding,
                pad_scope=pads("Pad") if use_explicit_padding else None,
                sc=sc,
            )
            for end_point, net in layers:
                end_points[end_point] = net
                if end_point == final_endpoint:
                    return net, end_points
        else:
            raise ValueError(
                f"Unknown convolution type {type(conv_def).__name__} "
                f"for layer {i}"
            )
    raise ValueError(f"Unknown final endpoint {final_endpoint}")


def _depth_sep_conv(
    net, conv_def, depth, *, scope, stride, rate, padding, pad_scope, sc
):
    """A `DepthSepConv`: its `_depthwise` then `_pointwise` layers.

    Returns:
        `[(end point, net), ...]` of the two layers.
    """
    if pad_scope is not None:
        net = _mobilenet.fixed_padding(
            net, conv_def.kernel, rate, scope=pad_scope
        )
    depthwise = depthwise_conv2d(
        net,
        conv_def.kernel,
        stride=stride,
        rate=rate,
        padding=padding,
        scope=f"{scope}_depthwise",
        sc=sc,
    )
    pointwise = conv2d(
        depthwise,
        depth,
        [1, 1],
        padding=padding,
        scope=f"{scope}_pointwise",
        sc=sc,
    )
    return [
        (f"{scope}_depthwise", depthwise),
        (f"{scope}_pointwise", pointwise),
    ]


def _reduced_kernel_size_for_small_input(net, kernel_size):
    """The pool's kernel, cut to the input's size where it is known."""
    height, width = net.shape[1:3]
    if height is None or width is None:
        return kernel_size
    return [min(height, kernel_size[0]), min(width, kernel_size[1])]


def mobilenet_v1(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.999,
    min_depth=8,
    depth_multiplier=1.0,
    conv_defs=None,
    spatial_squeeze=True,
    global_pool=False,
    *,
    sc=None,
):
    """MobileNet v1 for classification (TF-Slim's `mobilenet_v1`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        num_classes: The logits; `None` or 0 for the pooled features
            (`AvgPool_1a`, or `global_pool`).
        dropout_keep_prob: The keep probability of the dropout before the
            logits.
        min_depth: The least depth of a convolution.
        depth_multiplier: The multiplier of every convolution's depth.
        conv_defs: The body; `_CONV_DEFS` when `None`.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`
            rather than `[batch, 1, 1, num_classes]`.
        global_pool: Whether the pool averages the whole feature map
            rather than a 7x7 window (the whole 224-pixel map).
        sc: The `ArgScope`; `mobilenet_v1_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors; end points as TF-Slim's
        (`Conv2d_13_pointwise`, `AvgPool_1a` or `global_pool`, `Logits`,
        `Predictions`).

    Raises:
        ValueError: for inputs not of rank 4 or a `depth_multiplier` not
            above 0.
    """
    if len(inputs.shape) != 4:
        raise ValueError(
            f"Invalid input tensor rank, expected 4, was: {len(inputs.shape)}"
        )
    sc = sc or mobilenet_v1_arg_scope()
    net, end_points = mobilenet_v1_base(
        inputs,
        min_depth=min_depth,
        depth_multiplier=depth_multiplier,
        conv_defs=conv_defs,
        sc=sc,
    )
    if global_pool:
        net = _slim.global_pool(net, scope="Logits/global_pool")
        end_points["global_pool"] = net
    else:
        kernel_size = _reduced_kernel_size_for_small_input(net, [7, 7])
        net = _slim.avg_pool2d(net, kernel_size, scope="Logits/AvgPool_1a")
        end_points["AvgPool_1a"] = net
    if not num_classes:
        return net, end_points
    net = _slim.dropout(net, dropout_keep_prob, scope="Logits/Dropout_1b")
    logits = conv2d(
        net,
        num_classes,
        [1, 1],
        activation=None,
        normalize=False,
        scope="Logits/Conv2d_1c_1x1",
        sc=sc,
    )
    if spatial_squeeze:
        logits = _slim.squeeze(logits, scope="Logits/SpatialSqueeze")
    end_points["Logits"] = logits
    end_points["Predictions"] = keras.layers.Softmax(name="Predictions")(logits)
    return logits, end_points


def mobilenet_v1_075(inputs, num_classes=1000, **kwargs):
    """TF-Slim's `mobilenet_v1_075`: depth multiplier 0.75. Args and
    Returns as `mobilenet_v1`."""
    return mobilenet_v1(inputs, num_classes, depth_multiplier=0.75, **kwargs)


def mobilenet_v1_050(inputs, num_classes=1000, **kwargs):
    """TF-Slim's `mobilenet_v1_050`: depth multiplier 0.5. Args and
    Returns as `mobilenet_v1`."""
    return mobilenet_v1(inputs, num_classes, depth_multiplier=0.5, **kwargs)


def mobilenet_v1_025(inputs, num_classes=1000, **kwargs):
    """TF-Slim's `mobilenet_v1_025`: depth multiplier 0.25. Args and
    Returns as `mobilenet_v1`."""
    return mobilenet_v1(inputs, num_classes, depth_multiplier=0.25, **kwargs)
