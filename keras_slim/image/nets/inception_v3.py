"""TF-Slim's Inception V3 (nets/inception_v3.py), with its `AuxLogits`."""

import dataclasses

from keras_slim.image.nets import _slim
from keras_slim.image.nets import inception_utils
from keras_slim.image.nets._slim import avg_pool2d
from keras_slim.image.nets._slim import concat
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d
from keras_slim.image.nets.inception_utils import layer


def inception_v3_arg_scope(
    weight_decay=0.00004, batch_norm_decay=0.9997, batch_norm_epsilon=0.001
):
    """TF-Slim's `inception_v3_arg_scope`.

    Args:
        weight_decay: The L2 factor of the convolutions' weights.
        batch_norm_decay: The moving averages' decay.
        batch_norm_epsilon: Added to the variance.

    Returns:
        An `ArgScope`: ReLU, batch norm without `gamma`.
    """
    return inception_utils.inception_arg_scope(
        weight_decay=weight_decay,
        batch_norm_decay=batch_norm_decay,
        batch_norm_epsilon=batch_norm_epsilon,
    )


def _mixed_35x35(
    net,
    pool_depth,
    *,
    depth,
    scope,
    sc,
    branch_1_scopes=("Conv2d_0a_1x1", "Conv2d_0b_5x5"),
):
    """`Mixed_5b`, `Mixed_5c`, `Mixed_5d`: 1x1; 1x1 then 5x5; 1x1 then
    two 3x3; a 3x3 average pool then 1x1; concatenated.

    Args:
        net: The input tensor.
        pool_depth: `Branch_3`'s depth (32 in `Mixed_5b`, 64 after).
        depth: The net's depth function.
        scope: The block's scope.
        sc: The `ArgScope`.
        branch_1_scopes: The scopes of `Branch_1`'s convolutions (`Mixed_5c`
            names them `Conv2d_0b_1x1`, `Conv_1_0c_5x5`).

    Returns:
        The concatenated branches.
    """
    b = f"{scope}/Branch_"
    branch_0 = conv2d(
        net, depth(64), [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc
    )
    conv_1x1, conv_5x5 = branch_1_scopes
    branch_1 = conv2d(net, depth(48), [1, 1], scope=f"{b}1/{conv_1x1}", sc=sc)
    branch_1 = conv2d(
        branch_1, depth(64), [5, 5], scope=f"{b}1/{conv_5x5}", sc=sc
    )
    branch_2 = conv2d(
        net, depth(64), [1, 1], scope=f"{b}2/Conv2d_0a_1x1", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth(96), [3, 3], scope=f"{b}2/Conv2d_0b_3x3", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth(96), [3, 3], scope=f"{b}2/Conv2d_0c_3x3", sc=sc
    )
    branch_3 = avg_pool2d(
        net, [3, 3], stride=1, padding="same", scope=f"{b}3/AvgPool_0a_3x3"
    )
    branch_3 = conv2d(
        branch_3, depth(pool_depth), [1, 1], scope=f"{b}3/Conv2d_0b_1x1", sc=sc
    )
    return concat(
        [branch_0, branch_1, branch_2, branch_3], scope=f"{scope}/concat"
    )


def _mixed_6a(net, *, depth, scope, sc):
    """`Mixed_6a`, the reduction to 17x17: a 3x3 of stride 2; 1x1, 3x3,
    then a 3x3 of stride 2; a 3x3 max pool of stride 2 (all `VALID`);
    concatenated."""
    b = f"{scope}/Branch_"
    branch_0 = conv2d(
        net,
        depth(384),
        [3, 3],
        stride=2,
        padding="valid",
        scope=f"{b}0/Conv2d_1a_1x1",
        sc=sc,
    )
    branch_1 = conv2d(
        net, depth(64), [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth(96), [3, 3], scope=f"{b}1/Conv2d_0b_3x3", sc=sc
    )
    branch_1 = conv2d(
        branch_1,
        depth(96),
        [3, 3],
        stride=2,
        padding="valid",
        scope=f"{b}1/Conv2d_1a_1x1",
        sc=sc,
    )
    branch_2 = max_pool2d(net, [3, 3], stride=2, scope=f"{b}2/MaxPool_1a_3x3")
    return concat([branch_0, branch_1, branch_2], scope=f"{scope}/concat")


def _mixed_17x17(net, depth_7x7, *, depth, scope, sc):
    """`Mixed_6b` ... `Mixed_6e`: 1x1; 1x1, 1x7, 7x1; 1x1, 7x1, 1x7,
    7x1, 1x7; a 3x3 average pool then 1x1; concatenated.

    Args:
        net: The input tensor.
        depth_7x7: The depth inside the factorized 7x7 branches (128,
            160, 160, 192).
        depth: The net's depth function.
        scope: The block's scope.
        sc: The `ArgScope`.

    Returns:
        The concatenated branches.
    """
    b = f"{scope}/Branch_"
    inner = depth(depth_7x7)
    branch_0 = conv2d(
        net, depth(192), [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(net, inner, [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc)
    branch_1 = conv2d(
        branch_1, inner, [1, 7], scope=f"{b}1/Conv2d_0b_1x7", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth(192), [7, 1], scope=f"{b}1/Conv2d_0c_7x1", sc=sc
    )
    branch_2 = conv2d(net, inner, [1, 1], scope=f"{b}2/Conv2d_0a_1x1", sc=sc)
    branch_2 = conv2d(
        branch_2, inner, [7, 1], scope=f"{b}2/Conv2d_0b_7x1", sc=sc
    )
    branch_2 = conv2d(
        branch_2, inner, [1, 7], scope=f"{b}2/Conv2d_0c_1x7", sc=sc
    )
    branch_2 = conv2d(
        branch_2, inner, [7, 1], scope=f"{b}2/Conv2d_0d_7x1", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth(192), [1, 7], scope=f"{b}2/Conv2d_0e_1x7", sc=sc
    )
    branch_3 = avg_pool2d(
        net, [3, 3], stride=1, padding="same", scope=f"{b}3/AvgPool_0a_3x3"
    )
    branch_3 = conv2d(
        branch_3, depth(192), [1, 1], scope=f"{b}3/Conv2d_0b_1x1", sc=sc
    )
    return concat(
        [branch_0, branch_1, branch_2, branch_3], scope=f"{scope}/concat"
    )


def _mixed_7a(net, *, depth, scope, sc):
    """`Mixed_7a`, the reduction to 8x8: 1x1 then a 3x3 of stride 2; 1x1,
    1x7, 7x1, then a 3x3 of stride 2; a 3x3 max pool of stride 2 (the
    strided ones `VALID`); concatenated."""
    b = f"{scope}/Branch_"
    branch_0 = conv2d(
        net, depth(192), [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc
    )
    branch_0 = conv2d(
        branch_0,
        depth(320),
        [3, 3],
        stride=2,
        padding="valid",
        scope=f"{b}0/Conv2d_1a_3x3",
        sc=sc,
    )
    branch_1 = conv2d(
        net, depth(192), [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth(192), [1, 7], scope=f"{b}1/Conv2d_0b_1x7", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth(192), [7, 1], scope=f"{b}1/Conv2d_0c_7x1", sc=sc
    )
    branch_1 = conv2d(
        branch_1,
        depth(192),
        [3, 3],
        stride=2,
        padding="valid",
        scope=f"{b}1/Conv2d_1a_3x3",
        sc=sc,
    )
    branch_2 = max_pool2d(net, [3, 3], stride=2, scope=f"{b}2/MaxPool_1a_3x3")
    return concat([branch_0, branch_1, branch_2], scope=f"{scope}/concat")


def _mixed_8x8(net, *, depth, scope, sc, branch_1_3x1="Conv2d_0b_3x1"):
    """`Mixed_7b`, `Mixed_7c`: 1x1; 1x1 then 1x3 and 3x1 side by side;
    1x1, 3x3, then 1x3 and 3x1 side by side; a 3x3 average pool then
    1x1; concatenated.

    Args:
        net: The input tensor.
        depth: The net's depth function.
        scope: The block's scope.
        sc: The `ArgScope`.
        branch_1_3x1: The scope of `Branch_1`'s 3x1 convolution
            (`Mixed_7c` names it `Conv2d_0c_3x1`).

    Returns:
        The concatenated branches.
    """
    b = f"{scope}/Branch_"
    branch_0 = conv2d(
        net, depth(320), [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        net, depth(384), [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = concat(
        [
            conv2d(
                branch_1, depth(384), [1, 3], scope=f"{b}1/Conv2d_0b_1x3", sc=sc
            ),
            conv2d(
                branch_1,
                depth(384),
                [3, 1],
                scope=f"{b}1/{branch_1_3x1}",
                sc=sc,
            ),
        ],
        scope=f"{b}1/concat",
    )
    branch_2 = conv2d(
        net, depth(448), [1, 1], scope=f"{b}2/Conv2d_0a_1x1", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth(384), [3, 3], scope=f"{b}2/Conv2d_0b_3x3", sc=sc
    )
    branch_2 = concat(
        [
            conv2d(
                branch_2, depth(384), [1, 3], scope=f"{b}2/Conv2d_0c_1x3", sc=sc
            ),
            conv2d(
                branch_2, depth(384), [3, 1], scope=f"{b}2/Conv2d_0d_3x1", sc=sc
            ),
        ],
        scope=f"{b}2/concat",
    )
    branch_3 = avg_pool2d(
        net, [3, 3], stride=1, padding="same", scope=f"{b}3/AvgPool_0a_3x3"
    )
    branch_3 = conv2d(
        branch_3, depth(192), [1, 1], scope=f"{b}3/Conv2d_0b_1x1", sc=sc
    )
    return concat(
        [branch_0, branch_1, branch_2, branch_3], scope=f"{scope}/concat"
    )


def _layers(depth, sc):
    """TF-Slim's end points of `inception_v3_base`, in order: the stem's
    convolutions and pools `VALID` unless said, the blocks' `SAME`, all
    of stride 1 unless said."""
    valid = dataclasses.replace(sc, padding="valid")
    same = dict(depth=depth, sc=dataclasses.replace(sc, padding="same"))
    return {
        "Conv2d_1a_3x3": layer(conv2d, depth(32), [3, 3], stride=2, sc=valid),
        "Conv2d_2a_3x3": layer(conv2d, depth(32), [3, 3], sc=valid),
        "Conv2d_2b_3x3": layer(
            conv2d, depth(64), [3, 3], padding="same", sc=valid
        ),
        "MaxPool_3a_3x3": layer(max_pool2d, [3, 3], stride=2),
        "Conv2d_3b_1x1": layer(conv2d, depth(80), [1, 1], sc=valid),
        "Conv2d_4a_3x3": layer(conv2d, depth(192), [3, 3], sc=valid),
        "MaxPool_5a_3x3": layer(max_pool2d, [3, 3], stride=2),
        "Mixed_5b": layer(_mixed_35x35, 32, **same),
        "Mixed_5c": layer(
            _mixed_35x35,
            64,
            branch_1_scopes=("Conv2d_0b_1x1", "Conv_1_0c_5x5"),
            **same,
        ),
        "Mixed_5d": layer(_mixed_35x35, 64, **same),
        "Mixed_6a": layer(_mixed_6a, **same),
        "Mixed_6b": layer(_mixed_17x17, 128, **same),
        "Mixed_6c": layer(_mixed_17x17, 160, **same),
        "Mixed_6d": layer(_mixed_17x17, 160, **same),
        "Mixed_6e": layer(_mixed_17x17, 192, **same),
        "Mixed_7a": layer(_mixed_7a, **same),
        "Mixed_7b": layer(_mixed_8x8, **same),
        "Mixed_7c": layer(_mixed_8x8, branch_1_3x1="Conv2d_0c_3x1", **same),
    }


def inception_v3_base(
    inputs,
    final_endpoint="Mixed_7c",
    min_depth=16,
    depth_multiplier=1.0,
    *,
    sc=None,
):
    """Inception V3 up to `final_endpoint` (TF-Slim's `inception_v3_base`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        final_endpoint: The last end point built: one of `Conv2d_1a_3x3`,
            `Conv2d_2a_3x3`, `Conv2d_2b_3x3`, `MaxPool_3a_3x3`,
            `Conv2d_3b_1x1`, `Conv2d_4a_3x3`, `MaxPool_5a_3x3`,
            `Mixed_5b`, `Mixed_5c`, `Mixed_5d`, `Mixed_6a`, `Mixed_6b`,
            `Mixed_6c`, `Mixed_6d`, `Mixed_6e`, `Mixed_7a`, `Mixed_7b`,
            `Mixed_7c`.
        min_depth: The fewest channels of a convolution (binding when
            `depth_multiplier < 1`).
        depth_multiplier: The factor of every convolution's channels,
            greater than zero.
        sc: The `ArgScope`; `inception_v3_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`: `final_endpoint`'s tensor and each end
        point's up to it.

    Raises:
        ValueError: for an unknown `final_endpoint`, or a
            `depth_multiplier` not greater than zero.
    """
    depth = inception_utils.depth_fn(min_depth, depth_multiplier)
    layers = _layers(depth, sc or inception_v3_arg_scope())
    return inception_utils.build(inputs, layers, final_endpoint)


def _aux_logits(net, num_classes, *, depth, spatial_squeeze, sc):
    """TF-Slim's `AuxLogits` head on `Mixed_6e`: a 5x5 average pool of
    stride 3, a 1x1 convolution, a `VALID` one of at most 5x5 (reduced
    for small inputs, and so named: `Conv2d_2a_5x5` at 299 pixels), and
    the 1x1 logits convolution (biases, no batch norm, no activation)."""
    sc = dataclasses.replace(sc, padding="same")
    net = avg_pool2d(net, [5, 5], stride=3, scope="AuxLogits/AvgPool_1a_5x5")
    net = conv2d(
        net, depth(128), [1, 1], scope="AuxLogits/Conv2d_1b_1x1", sc=sc
    )
    kernel_size = inception_utils.reduced_kernel_size_for_small_input(
        net, [5, 5]
    )
    net = conv2d(
        net,
        depth(768),
        kernel_size,
        padding="valid",
        scope="AuxLogits/Conv2d_2a_{}x{}".format(*kernel_size),
        sc=sc,
    )
    net = conv2d(
        net,
        num_classes,
        [1, 1],
        activation=None,
        normalize=False,
        scope="AuxLogits/Conv2d_2b_1x1",
        sc=sc,
    )
    if spatial_squeeze:
        net = _slim.squeeze(net, scope="AuxLogits/SpatialSqueeze")
    return net


def inception_v3(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.8,
    min_depth=16,
    depth_multiplier=1.0,
    prediction_fn=inception_utils.softmax,
    spatial_squeeze=True,
    create_aux_logits=True,
    global_pool=False,
    *,
    sc=None,
):
    """Inception V3 with its logits and auxiliary logits (TF-Slim's
    `inception_v3`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`,
            299 pixels by default; at least 107 with the auxiliary head
            (its 5x5 pool needs `Mixed_6e` 5x5), 75 without.
        num_classes: The logits; `None` or 0 for the pooled features
            (research/slim's), without the auxiliary head.
        dropout_keep_prob: The keep probability of the dropout before
            the logits.
        min_depth: As for `inception_v3_base`.
        depth_multiplier: As for `inception_v3_base`.
        prediction_fn: A function `(logits, scope)` of the
            `Predictions` end point.
        spatial_squeeze: Whether the logits (and auxiliary logits) are
            `[batch, num_classes]` rather than `[batch, 1, 1,
            num_classes]` (images of more than 346 pixels, 362 without
            `AuxLogits`, leave more than 1x1: set it `False`, or
            `global_pool`).
        create_aux_logits: Whether to add the `AuxLogits` head.
        global_pool: Whether `Mixed_7c` is averaged whole (research/slim's
            `global_pool`) rather than by TF-Slim's pool of at most 8x8
            and stride 2.
        sc: The `ArgScope`; `inception_v3_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (`end_points["Logits"]`, `["Predictions"]`, `["PreLogits"]`,
        `["AuxLogits"]`, and the pooled features as `["AvgPool_1a"]` or
        `["global_pool"]`).

    Raises:
        ValueError: if `depth_multiplier` is not greater than zero.
    """
    sc = sc or inception_v3_arg_scope()
    depth = inception_utils.depth_fn(min_depth, depth_multiplier)
    net, end_points = inception_v3_base(
        inputs, min_depth=min_depth, depth_multiplier=depth_multiplier, sc=sc
    )
    if create_aux_logits and num_classes:
        end_points["AuxLogits"] = _aux_logits(
            end_points["Mixed_6e"],
            num_classes,
            depth=depth,
            spatial_squeeze=spatial_squeeze,
            sc=sc,
        )
    if global_pool:
        net = _slim.global_pool(net, scope="Logits/GlobalPool")
        end_points["global_pool"] = net
    else:
        kernel_size = inception_utils.reduced_kernel_size_for_small_input(
            net, [8, 8]
        )
        net = avg_pool2d(
            net,
            kernel_size,
            scope="Logits/AvgPool_1a_{}x{}".format(*kernel_size),
        )
        end_points["AvgPool_1a"] = net
    if not num_classes:
        return net, end_points
    end_points["PreLogits"], logits = inception_utils.logits(
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
