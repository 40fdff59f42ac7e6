"""TF-Slim's Inception V2 (nets/inception_v2.py): BN-Inception."""

import dataclasses

import keras

from keras_slim.image.nets import _slim
from keras_slim.image.nets import inception_utils
from keras_slim.image.nets._slim import avg_pool2d
from keras_slim.image.nets._slim import concat
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d
from keras_slim.image.nets.inception_utils import layer


def inception_v2_arg_scope(weight_decay=0.00004):
    """TF-Slim's `inception_v2_arg_scope`.

    Args:
        weight_decay: The L2 factor of the convolutions' weights (not the
            first layer's: TF-Slim's scope does not reach its separable
            convolution).

    Returns:
        An `ArgScope`: ReLU, batch norm without `gamma` (decay 0.9997,
        epsilon 0.001).
    """
    return inception_utils.inception_arg_scope(weight_decay=weight_decay)


def separable_conv2d(
    net, num_outputs, kernel_size, *, depth_multiplier, stride, scope
):
    """TF-Slim's `slim.separable_conv2d` with its own defaults (the arg
    scope sets only `slim.conv2d`'s): a depthwise then a pointwise
    convolution, `SAME` padding, biases, ReLU, no batch norm, no weight
    decay.

    Args:
        net: The input tensor.
        num_outputs: The pointwise convolution's channels.
        kernel_size: The depthwise convolution's `[height, width]`.
        depth_multiplier: The depthwise channels per input channel.
        stride: The depthwise convolution's stride.
        scope: Its TF-Slim scope (variables `depthwise_kernel`,
            `pointwise_kernel` and `bias`: TF-Slim's `depthwise_weights`,
            `pointwise_weights` and `biases`).

    Returns:
        The output tensor.
    """
    net = keras.layers.SeparableConv2D(
        num_outputs,
        tuple(kernel_size),
        strides=stride,
        padding="same",
        depth_multiplier=depth_multiplier,
        name=_slim.name_of(scope),
    )(net)
    return keras.layers.ReLU(name=_slim.name_of(f"{scope}/Relu"))(net)


def _mixed(net, depths, *, depth, scope, sc, pool=avg_pool2d):
    """An inception module: a 1x1 convolution; 1x1 then 3x3; 1x1 then
    two 3x3; a 3x3 pool then 1x1; concatenated.

    Args:
        net: The input tensor.
        depths: `(Branch_0, (Branch_1's 1x1, 3x3), (Branch_2's 1x1, 3x3),
            Branch_3)`, TF-Slim's numbers before `depth`.
        depth: The net's depth function.
        scope: The block's scope (`Mixed_3b`).
        sc: The `ArgScope`.
        pool: `Branch_3`'s pool: `avg_pool2d` (`AvgPool_0a_3x3`) or
            `max_pool2d` (`MaxPool_0a_3x3`, `Mixed_5c`'s).

    Returns:
        The concatenated branches.
    """
    depth_0, depth_1, depth_2, depth_3 = depths
    b = f"{scope}/Branch_"
    branch_0 = conv2d(
        net, depth(depth_0), [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        net, depth(depth_1[0]), [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth(depth_1[1]), [3, 3], scope=f"{b}1/Conv2d_0b_3x3", sc=sc
    )
    branch_2 = conv2d(
        net, depth(depth_2[0]), [1, 1], scope=f"{b}2/Conv2d_0a_1x1", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth(depth_2[1]), [3, 3], scope=f"{b}2/Conv2d_0b_3x3", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth(depth_2[1]), [3, 3], scope=f"{b}2/Conv2d_0c_3x3", sc=sc
    )
    name = "AvgPool_0a_3x3" if pool is avg_pool2d else "MaxPool_0a_3x3"
    branch_3 = pool(net, [3, 3], stride=1, padding="same", scope=f"{b}3/{name}")
    branch_3 = conv2d(
        branch_3, depth(depth_3), [1, 1], scope=f"{b}3/Conv2d_0b_1x1", sc=sc
    )
    return concat(
        [branch_0, branch_1, branch_2, branch_3], scope=f"{scope}/concat"
    )


def _reduction(net, depths, *, depth, scope, sc):
    """A grid reduction (`Mixed_4a`, `Mixed_5a`): 1x1 then a 3x3 of
    stride 2; 1x1, 3x3, then a 3x3 of stride 2; a 3x3 max pool of
    stride 2; concatenated.

    Args:
        net: The input tensor.
        depths: `((Branch_0's 1x1, 3x3), (Branch_1's 1x1, 3x3))`,
            TF-Slim's numbers before `depth`.
        depth: The net's depth function.
        scope: The block's scope.
        sc: The `ArgScope`.

    Returns:
        The concatenated branches.
    """
    depth_0, depth_1 = depths
    b = f"{scope}/Branch_"
    branch_0 = conv2d(
        net, depth(depth_0[0]), [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc
    )
    branch_0 = conv2d(
        branch_0,
        depth(depth_0[1]),
        [3, 3],
        stride=2,
        scope=f"{b}0/Conv2d_1a_3x3",
        sc=sc,
    )
    branch_1 = conv2d(
        net, depth(depth_1[0]), [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth(depth_1[1]), [3, 3], scope=f"{b}1/Conv2d_0b_3x3", sc=sc
    )
    branch_1 = conv2d(
        branch_1,
        depth(depth_1[1]),
        [3, 3],
        stride=2,
        scope=f"{b}1/Conv2d_1a_3x3",
        sc=sc,
    )
    branch_2 = max_pool2d(
        net, [3, 3], stride=2, padding="same", scope=f"{b}2/MaxPool_1a_3x3"
    )
    return concat([branch_0, branch_1, branch_2], scope=f"{scope}/concat")


def _layers(depth, sc):
    """TF-Slim's end points of `inception_v2_base`, in order: all of
    stride 1 and `SAME` padding unless said."""
    sc = dataclasses.replace(sc, padding="same")
    # The depthwise multiplier (channels of the 7x7 depthwise convolution
    # per input channel, TF-Slim's 3 assumed) keeps the separable
    # convolution from being overparameterized.
    depthwise_multiplier = min(int(depth(64) / 3), 8)
    mixed = dict(depth=depth, sc=sc)
    return {
        "Conv2d_1a_7x7": layer(
            separable_conv2d,
            depth(64),
            [7, 7],
            depth_multiplier=depthwise_multiplier,
            stride=2,
        ),
        "MaxPool_2a_3x3": layer(max_pool2d, [3, 3], stride=2, padding="same"),
        "Conv2d_2b_1x1": layer(conv2d, depth(64), [1, 1], sc=sc),
        "Conv2d_2c_3x3": layer(conv2d, depth(192), [3, 3], sc=sc),
        "MaxPool_3a_3x3": layer(max_pool2d, [3, 3], stride=2, padding="same"),
        "Mixed_3b": layer(_mixed, (64, (64, 64), (64, 96), 32), **mixed),
        "Mixed_3c": layer(_mixed, (64, (64, 96), (64, 96), 64), **mixed),
        "Mixed_4a": layer(_reduction, ((128, 160), (64, 96)), **mixed),
        "Mixed_4b": layer(_mixed, (224, (64, 96), (96, 128), 128), **mixed),
        "Mixed_4c": layer(_mixed, (192, (96, 128), (96, 128), 128), **mixed),
        "Mixed_4d": layer(_mixed, (160, (128, 160), (128, 160), 96), **mixed),
        "Mixed_4e": layer(_mixed, (96, (128, 192), (160, 192), 96), **mixed),
        "Mixed_5a": layer(_reduction, ((128, 192), (192, 256)), **mixed),
        "Mixed_5b": layer(_mixed, (352, (192, 320), (160, 224), 128), **mixed),
        "Mixed_5c": layer(
            _mixed, (352, (192, 320), (192, 224), 128), pool=max_pool2d, **mixed
        ),
    }


def inception_v2_base(
    inputs,
    final_endpoint="Mixed_5c",
    min_depth=16,
    depth_multiplier=1.0,
    *,
    sc=None,
):
    """Inception V2 up to `final_endpoint` (TF-Slim's `inception_v2_base`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        final_endpoint: The last end point built: one of `Conv2d_1a_7x7`,
            `MaxPool_2a_3x3`, `Conv2d_2b_1x1`, `Conv2d_2c_3x3`,
            `MaxPool_3a_3x3`, `Mixed_3b`, `Mixed_3c`, `Mixed_4a`,
            `Mixed_4b`, `Mixed_4c`, `Mixed_4d`, `Mixed_4e`, `Mixed_5a`,
            `Mixed_5b`, `Mixed_5c`.
        min_depth: The fewest channels of a convolution (binding when
            `depth_multiplier < 1`).
        depth_multiplier: The factor of every convolution's channels,
            greater than zero.
        sc: The `ArgScope`; `inception_v2_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`: `final_endpoint`'s tensor and each end
        point's up to it.

    Raises:
        ValueError: for an unknown `final_endpoint`, or a
            `depth_multiplier` not greater than zero.
    """
    depth = inception_utils.depth_fn(min_depth, depth_multiplier)
    layers = _layers(depth, sc or inception_v2_arg_scope())
    return inception_utils.build(inputs, layers, final_endpoint)


def inception_v2(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.8,
    min_depth=16,
    depth_multiplier=1.0,
    prediction_fn=inception_utils.softmax,
    spatial_squeeze=True,
    global_pool=False,
    *,
    sc=None,
):
    """Inception V2 with its logits (TF-Slim's `inception_v2`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`,
            224 pixels by default.
        num_classes: The logits; `None` or 0 for the pooled features
            (research/slim's).
        dropout_keep_prob: The keep probability of the dropout before
            the logits.
        min_depth: As for `inception_v2_base`.
        depth_multiplier: As for `inception_v2_base`.
        prediction_fn: A function `(logits, scope)` of the
            `Predictions` end point.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`
            rather than `[batch, 1, 1, num_classes]` (images of more than
            256 pixels leave more than 1x1: set it `False`, or
            `global_pool`).
        global_pool: Whether `Mixed_5c` is averaged whole (research/slim's
            `global_pool`) rather than by TF-Slim's pool of at most 7x7
            and stride 2.
        sc: The `ArgScope`; `inception_v2_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (`end_points["Logits"]`, `["Predictions"]`, and the pooled
        features as `["AvgPool_1a"]` or `["global_pool"]`).

    Raises:
        ValueError: if `depth_multiplier` is not greater than zero.
    """
    sc = sc or inception_v2_arg_scope()
    net, end_points = inception_v2_base(
        inputs, min_depth=min_depth, depth_multiplier=depth_multiplier, sc=sc
    )
    if global_pool:
        net = _slim.global_pool(net, scope="Logits/global_pool")
        end_points["global_pool"] = net
    else:
        kernel_size = inception_utils.reduced_kernel_size_for_small_input(
            net, [7, 7]
        )
        net = avg_pool2d(
            net,
            kernel_size,
            scope="Logits/AvgPool_1a_{}x{}".format(*kernel_size),
        )
        end_points["AvgPool_1a"] = net
    if not num_classes:
        return net, end_points
    _, logits = inception_utils.logits(
        net,
        num_classes,
        dropout_keep_prob,
        dropout="Dropout_1b",
        conv="Conv2d_1c_1x1",
        spatial_squeeze=spatial_squeeze,
        sc=sc,
    )
    end_points["Logits"] = logits
    end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points
