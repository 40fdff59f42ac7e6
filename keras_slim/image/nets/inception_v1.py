"""TF-Slim's Inception V1 (nets/inception_v1.py): GoogLeNet with batch norm."""

import dataclasses

from keras_slim.image.nets import _slim
from keras_slim.image.nets import inception_utils
from keras_slim.image.nets._slim import concat
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d
from keras_slim.image.nets.inception_utils import layer


def inception_v1_arg_scope(weight_decay=0.00004, use_batch_norm=True):
    """TF-Slim's `inception_v1_arg_scope`.

    Args:
        weight_decay: The L2 factor of the convolutions' weights.
        use_batch_norm: Whether batch norm follows each convolution (the
            paper had none; TF-Slim's checkpoints have it).

    Returns:
        An `ArgScope`: ReLU, batch norm without `gamma` (decay 0.9997,
        epsilon 0.001).
    """
    return inception_utils.inception_arg_scope(
        weight_decay=weight_decay, use_batch_norm=use_batch_norm
    )


def _mixed(net, depths, *, scope, sc, branch_2_3x3="Conv2d_0b_3x3"):
    """An inception module: a 1x1 convolution; 1x1 then 3x3; 1x1 then
    3x3; a 3x3 max pool then 1x1; concatenated.

    Args:
        net: The input tensor.
        depths: `(Branch_0, (Branch_1's 1x1, 3x3), (Branch_2's 1x1, 3x3),
            Branch_3)`, as TF-Slim's numbers.
        scope: The block's scope (`Mixed_3b`).
        sc: The `ArgScope`.
        branch_2_3x3: The scope of `Branch_2`'s 3x3 convolution
            (`Mixed_5b` names it `Conv2d_0a_3x3`).

    Returns:
        The concatenated branches.
    """
    depth_0, depth_1, depth_2, depth_3 = depths
    b = f"{scope}/Branch_"
    branch_0 = conv2d(net, depth_0, [1, 1], scope=f"{b}0/Conv2d_0a_1x1", sc=sc)
    branch_1 = conv2d(
        net, depth_1[0], [1, 1], scope=f"{b}1/Conv2d_0a_1x1", sc=sc
    )
    branch_1 = conv2d(
        branch_1, depth_1[1], [3, 3], scope=f"{b}1/Conv2d_0b_3x3", sc=sc
    )
    branch_2 = conv2d(
        net, depth_2[0], [1, 1], scope=f"{b}2/Conv2d_0a_1x1", sc=sc
    )
    branch_2 = conv2d(
        branch_2, depth_2[1], [3, 3], scope=f"{b}2/{branch_2_3x3}", sc=sc
    )
    branch_3 = max_pool2d(
        net, [3, 3], stride=1, padding="same", scope=f"{b}3/MaxPool_0a_3x3"
    )
    branch_3 = conv2d(
        branch_3, depth_3, [1, 1], scope=f"{b}3/Conv2d_0b_1x1", sc=sc
    )
    return concat(
        [branch_0, branch_1, branch_2, branch_3], scope=f"{scope}/concat"
    )


def _layers(sc):
    """TF-Slim's end points of `inception_v1_base`, in order: convolutions
    and max pools of stride 1 and `SAME` padding unless said."""
    sc = dataclasses.replace(sc, padding="same")
    return {
        "Conv2d_1a_7x7": layer(conv2d, 64, [7, 7], stride=2, sc=sc),
        "MaxPool_2a_3x3": layer(max_pool2d, [3, 3], stride=2, padding="same"),
        "Conv2d_2b_1x1": layer(conv2d, 64, [1, 1], sc=sc),
        "Conv2d_2c_3x3": layer(conv2d, 192, [3, 3], sc=sc),
        "MaxPool_3a_3x3": layer(max_pool2d, [3, 3], stride=2, padding="same"),
        "Mixed_3b": layer(_mixed, (64, (96, 128), (16, 32), 32), sc=sc),
        "Mixed_3c": layer(_mixed, (128, (128, 192), (32, 96), 64), sc=sc),
        "MaxPool_4a_3x3": layer(max_pool2d, [3, 3], stride=2, padding="same"),
        "Mixed_4b": layer(_mixed, (192, (96, 208), (16, 48), 64), sc=sc),
        "Mixed_4c": layer(_mixed, (160, (112, 224), (24, 64), 64), sc=sc),
        "Mixed_4d": layer(_mixed, (128, (128, 256), (24, 64), 64), sc=sc),
        "Mixed_4e": layer(_mixed, (112, (144, 288), (32, 64), 64), sc=sc),
        "Mixed_4f": layer(_mixed, (256, (160, 320), (32, 128), 128), sc=sc),
        "MaxPool_5a_2x2": layer(max_pool2d, [2, 2], stride=2, padding="same"),
        "Mixed_5b": layer(
            _mixed,
            (256, (160, 320), (32, 128), 128),
            sc=sc,
            branch_2_3x3="Conv2d_0a_3x3",
        ),
        "Mixed_5c": layer(_mixed, (384, (192, 384), (48, 128), 128), sc=sc),
    }


def inception_v1_base(inputs, final_endpoint="Mixed_5c", *, sc=None):
    """Inception V1 up to `final_endpoint` (TF-Slim's `inception_v1_base`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        final_endpoint: The last end point built: one of `Conv2d_1a_7x7`,
            `MaxPool_2a_3x3`, `Conv2d_2b_1x1`, `Conv2d_2c_3x3`,
            `MaxPool_3a_3x3`, `Mixed_3b`, `Mixed_3c`, `MaxPool_4a_3x3`,
            `Mixed_4b`, `Mixed_4c`, `Mixed_4d`, `Mixed_4e`, `Mixed_4f`,
            `MaxPool_5a_2x2`, `Mixed_5b`, `Mixed_5c`.
        sc: The `ArgScope`; `inception_v1_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`: `final_endpoint`'s tensor and each end
        point's up to it.

    Raises:
        ValueError: for an unknown `final_endpoint`.
    """
    layers = _layers(sc or inception_v1_arg_scope())
    return inception_utils.build(inputs, layers, final_endpoint)


def inception_v1(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.8,
    prediction_fn=inception_utils.softmax,
    spatial_squeeze=True,
    global_pool=False,
    *,
    sc=None,
):
    """Inception V1 with its logits (TF-Slim's `inception_v1`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`,
            224 pixels by default.
        num_classes: The logits; `None` or 0 for the pooled features
            (research/slim's).
        dropout_keep_prob: The keep probability of the dropout before
            the logits.
        prediction_fn: A function `(logits, scope)` of the
            `Predictions` end point.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`
            rather than `[batch, 1, 1, num_classes]`.
        global_pool: Whether `Mixed_5c` is averaged whole (research/slim's
            `global_pool`) rather than by TF-Slim's 7x7 pool of stride 1.
        sc: The `ArgScope`; `inception_v1_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (`end_points["Logits"]`, `["Predictions"]`, and the pooled
        features as `["AvgPool_0a_7x7"]` or `["global_pool"]`).
    """
    sc = sc or inception_v1_arg_scope()
    net, end_points = inception_v1_base(inputs, sc=sc)
    if global_pool:
        net = _slim.global_pool(net, scope="Logits/global_pool")
        end_points["global_pool"] = net
    else:
        # TF-Slim's scope of this average pool (research/slim's is
        # AvgPool_0a_7x7).
        net = _slim.avg_pool2d(
            net, [7, 7], stride=1, scope="Logits/MaxPool_0a_7x7"
        )
        end_points["AvgPool_0a_7x7"] = net
    if not num_classes:
        return net, end_points
    _, logits = inception_utils.logits(
        net,
        num_classes,
        dropout_keep_prob,
        dropout="Dropout_0b",
        conv="Conv2d_0c_1x1",
        spatial_squeeze=spatial_squeeze,
        sc=sc,
    )
    end_points["Logits"] = logits
    end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points
