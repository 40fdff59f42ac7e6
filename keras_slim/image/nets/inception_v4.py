"""TF-Slim's Inception V4 (research/slim nets/inception_v4.py)."""

import dataclasses

import keras

from keras_slim.image.nets import _slim
from keras_slim.image.nets._fully_connected import flatten
from keras_slim.image.nets._fully_connected import fully_connected
from keras_slim.image.nets._slim import avg_pool2d
from keras_slim.image.nets._slim import concat
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d

#: The end points of `inception_v4_base`, in order.
ENDPOINTS = (
    "Conv2d_1a_3x3",
    "Conv2d_2a_3x3",
    "Conv2d_2b_3x3",
    "Mixed_3a",
    "Mixed_4a",
    "Mixed_5a",
    *(f"Mixed_5{c}" for c in "bcde"),
    "Mixed_6a",
    *(f"Mixed_6{c}" for c in "bcdefgh"),
    "Mixed_7a",
    *(f"Mixed_7{c}" for c in "bcd"),
)


def inception_v4_arg_scope(
    weight_decay=0.00004,
    use_batch_norm=True,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    activation_fn="relu",
    batch_norm_scale=False,
):
    """TF-Slim's `inception_v4_arg_scope` (`inception_utils`'
    `inception_arg_scope`): batch norm and ReLU after each convolution.

    Args:
        weight_decay: The L2 factor of the weights.
        use_batch_norm: Whether batch norm follows each convolution.
        batch_norm_decay: The moving averages' decay.
        batch_norm_epsilon: Added to the variance.
        activation_fn: `"relu"`, `"relu6"` or `None`.
        batch_norm_scale: Whether batch norm has a `gamma`.

    Returns:
        An `ArgScope`.
    """
    batch_norm = None
    if use_batch_norm:
        batch_norm = _slim.BatchNorm(
            decay=batch_norm_decay,
            epsilon=batch_norm_epsilon,
            scale=batch_norm_scale,
        )
    return _slim.ArgScope(
        weight_decay=weight_decay,
        batch_norm=batch_norm,
        activation=activation_fn,
    )


def _same(sc):
    # The blocks and the base are under TF-Slim's `arg_scope([conv2d,
    # max_pool2d, avg_pool2d], stride=1, padding='SAME')`.
    return dataclasses.replace(sc, padding="same")


def _pool_same(net, *, scope):
    """The 3x3 `SAME` average pool of a block's `Branch_3`."""
    return avg_pool2d(net, [3, 3], stride=1, padding="same", scope=scope)


def _convs(scope, sc):
    """`conv(net, depth, kernel, name, **kwargs)`: `conv2d` of the scope
    `scope/name` (`name` for no `scope`) under `sc`."""

    def conv(net, depth, kernel, name, **kwargs):
        name = f"{scope}/{name}" if scope else name
        return conv2d(net, depth, kernel, scope=name, sc=sc, **kwargs)

    return conv


def block_inception_a(inputs, *, scope, sc):
    """Inception-A (35x35): 4 branches of 96 channels.

    Args:
        inputs: The block's input.
        scope: Its scope (`Mixed_5b`).
        sc: The net's `ArgScope`.

    Returns:
        The concatenated branches.
    """
    sc = _same(sc)
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(inputs, 96, 1, "Branch_0/Conv2d_0a_1x1")
    branch_1 = conv(inputs, 64, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 96, 3, "Branch_1/Conv2d_0b_3x3")
    branch_2 = conv(inputs, 64, 1, "Branch_2/Conv2d_0a_1x1")
    branch_2 = conv(branch_2, 96, 3, "Branch_2/Conv2d_0b_3x3")
    branch_2 = conv(branch_2, 96, 3, "Branch_2/Conv2d_0c_3x3")
    branch_3 = _pool_same(inputs, scope=f"{s}/Branch_3/AvgPool_0a_3x3")
    branch_3 = conv(branch_3, 96, 1, "Branch_3/Conv2d_0b_1x1")
    return concat([branch_0, branch_1, branch_2, branch_3], scope=f"{s}/concat")


def block_reduction_a(inputs, *, scope, sc):
    """Reduction-A (35x35 to 17x17).

    Args and Returns as `block_inception_a`.
    """
    sc = _same(sc)
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(
        inputs, 384, 3, "Branch_0/Conv2d_1a_3x3", stride=2, padding="valid"
    )
    branch_1 = conv(inputs, 192, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 224, 3, "Branch_1/Conv2d_0b_3x3")
    branch_1 = conv(
        branch_1, 256, 3, "Branch_1/Conv2d_1a_3x3", stride=2, padding="valid"
    )
    branch_2 = max_pool2d(inputs, 3, scope=f"{s}/Branch_2/MaxPool_1a_3x3")
    return concat([branch_0, branch_1, branch_2], scope=f"{s}/concat")


def block_inception_b(inputs, *, scope, sc):
    """Inception-B (17x17): factorized 7x7 convolutions.

    Args and Returns as `block_inception_a`.
    """
    sc = _same(sc)
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(inputs, 384, 1, "Branch_0/Conv2d_0a_1x1")
    branch_1 = conv(inputs, 192, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 224, [1, 7], "Branch_1/Conv2d_0b_1x7")
    branch_1 = conv(branch_1, 256, [7, 1], "Branch_1/Conv2d_0c_7x1")
    branch_2 = conv(inputs, 192, 1, "Branch_2/Conv2d_0a_1x1")
    branch_2 = conv(branch_2, 192, [7, 1], "Branch_2/Conv2d_0b_7x1")
    branch_2 = conv(branch_2, 224, [1, 7], "Branch_2/Conv2d_0c_1x7")
    branch_2 = conv(branch_2, 224, [7, 1], "Branch_2/Conv2d_0d_7x1")
    branch_2 = conv(branch_2, 256, [1, 7], "Branch_2/Conv2d_0e_1x7")
    branch_3 = _pool_same(inputs, scope=f"{s}/Branch_3/AvgPool_0a_3x3")
    branch_3 = conv(branch_3, 128, 1, "Branch_3/Conv2d_0b_1x1")
    return concat([branch_0, branch_1, branch_2, branch_3], scope=f"{s}/concat")


def block_reduction_b(inputs, *, scope, sc):
    """Reduction-B (17x17 to 8x8).

    Args and Returns as `block_inception_a`.
    """
    sc = _same(sc)
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(inputs, 192, 1, "Branch_0/Conv2d_0a_1x1")
    branch_0 = conv(
        branch_0, 192, 3, "Branch_0/Conv2d_1a_3x3", stride=2, padding="valid"
    )
    branch_1 = conv(inputs, 256, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 256, [1, 7], "Branch_1/Conv2d_0b_1x7")
    branch_1 = conv(branch_1, 320, [7, 1], "Branch_1/Conv2d_0c_7x1")
    branch_1 = conv(
        branch_1, 320, 3, "Branch_1/Conv2d_1a_3x3", stride=2, padding="valid"
    )
    branch_2 = max_pool2d(inputs, 3, scope=f"{s}/Branch_2/MaxPool_1a_3x3")
    return concat([branch_0, branch_1, branch_2], scope=f"{s}/concat")


def block_inception_c(inputs, *, scope, sc):
    """Inception-C (8x8): 1x3 and 3x1 convolutions side by side.

    Args and Returns as `block_inception_a`.
    """
    sc = _same(sc)
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(inputs, 256, 1, "Branch_0/Conv2d_0a_1x1")
    branch_1 = conv(inputs, 384, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = concat(
        [
            conv(branch_1, 256, [1, 3], "Branch_1/Conv2d_0b_1x3"),
            conv(branch_1, 256, [3, 1], "Branch_1/Conv2d_0c_3x1"),
        ],
        scope=f"{s}/Branch_1/concat",
    )
    branch_2 = conv(inputs, 384, 1, "Branch_2/Conv2d_0a_1x1")
    branch_2 = conv(branch_2, 448, [3, 1], "Branch_2/Conv2d_0b_3x1")
    branch_2 = conv(branch_2, 512, [1, 3], "Branch_2/Conv2d_0c_1x3")
    branch_2 = concat(
        [
            conv(branch_2, 256, [1, 3], "Branch_2/Conv2d_0d_1x3"),
            conv(branch_2, 256, [3, 1], "Branch_2/Conv2d_0e_3x1"),
        ],
        scope=f"{s}/Branch_2/concat",
    )
    branch_3 = _pool_same(inputs, scope=f"{s}/Branch_3/AvgPool_0a_3x3")
    branch_3 = conv(branch_3, 256, 1, "Branch_3/Conv2d_0b_1x1")
    return concat([branch_0, branch_1, branch_2, branch_3], scope=f"{s}/concat")


#: The blocks after the stem, with their scopes.
_BLOCKS = (
    *((block_inception_a, f"Mixed_5{c}") for c in "bcde"),
    (block_reduction_a, "Mixed_6a"),
    *((block_inception_b, f"Mixed_6{c}") for c in "bcdefgh"),
    (block_reduction_b, "Mixed_7a"),
    *((block_inception_c, f"Mixed_7{c}") for c in "bcd"),
)


def inception_v4_base(inputs, final_endpoint="Mixed_7d", *, sc=None):
    """Inception V4 up to `final_endpoint` (TF-Slim's
    `inception_v4_base`).

    Args:
        inputs: A Keras tensor `[batch, height, width, 3]`.
        final_endpoint: One of `ENDPOINTS`: the last block built.
        sc: The `ArgScope`; `inception_v4_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`: the output of `final_endpoint` and the end
        points up to it.

    Raises:
        ValueError: for a `final_endpoint` not in `ENDPOINTS`.
    """
    if final_endpoint not in ENDPOINTS:
        raise ValueError(f"Unknown final endpoint {final_endpoint}")
    sc = _same(sc or inception_v4_arg_scope())
    conv = _convs(None, sc)
    end_points = {}

    def done(name, net):
        end_points[name] = net
        return name == final_endpoint

    # 299 x 299 x 3
    net = conv(inputs, 32, 3, "Conv2d_1a_3x3", stride=2, padding="valid")
    if done("Conv2d_1a_3x3", net):
        return net, end_points
    # 149 x 149 x 32
    net = conv(net, 32, 3, "Conv2d_2a_3x3", padding="valid")
    if done("Conv2d_2a_3x3", net):
        return net, end_points
    # 147 x 147 x 32
    net = conv(net, 64, 3, "Conv2d_2b_3x3")
    if done("Conv2d_2b_3x3", net):
        return net, end_points
    # 147 x 147 x 64
    branch_0 = max_pool2d(net, 3, scope="Mixed_3a/Branch_0/MaxPool_0a_3x3")
    branch_1 = conv(
        net, 96, 3, "Mixed_3a/Branch_1/Conv2d_0a_3x3", stride=2, padding="valid"
    )
    net = concat([branch_0, branch_1], scope="Mixed_3a/concat")
    if done("Mixed_3a", net):
        return net, end_points
    # 73 x 73 x 160
    branch_0 = conv(net, 64, 1, "Mixed_4a/Branch_0/Conv2d_0a_1x1")
    branch_0 = conv(
        branch_0, 96, 3, "Mixed_4a/Branch_0/Conv2d_1a_3x3", padding="valid"
    )
    branch_1 = conv(net, 64, 1, "Mixed_4a/Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 64, [1, 7], "Mixed_4a/Branch_1/Conv2d_0b_1x7")
    branch_1 = conv(branch_1, 64, [7, 1], "Mixed_4a/Branch_1/Conv2d_0c_7x1")
    branch_1 = conv(
        branch_1, 96, 3, "Mixed_4a/Branch_1/Conv2d_1a_3x3", padding="valid"
    )
    net = concat([branch_0, branch_1], scope="Mixed_4a/concat")
    if done("Mixed_4a", net):
        return net, end_points
    # 71 x 71 x 192
    branch_0 = conv(
        net,
        192,
        3,
        "Mixed_5a/Branch_0/Conv2d_1a_3x3",
        stride=2,
        padding="valid",
    )
    branch_1 = max_pool2d(net, 3, scope="Mixed_5a/Branch_1/MaxPool_1a_3x3")
    net = concat([branch_0, branch_1], scope="Mixed_5a/concat")
    if done("Mixed_5a", net):
        return net, end_points
    # 35 x 35 x 384: 4 Inception-A, Reduction-A; 17 x 17 x 1024:
    # 7 Inception-B, Reduction-B; 8 x 8 x 1536: 3 Inception-C.
    for block, scope in _BLOCKS:
        net = block(net, scope=scope, sc=sc)
        if done(scope, net):
            break
    return net, end_points


def inception_v4(
    inputs,
    num_classes=1001,
    dropout_keep_prob=0.8,
    create_aux_logits=True,
    *,
    sc=None,
):
    """Inception V4 (TF-Slim's `inception_v4`).

    Args:
        inputs: A Keras tensor `[batch, 299, 299, 3]` (at least 107
            pixels with the auxiliary head, 75 without).
        num_classes: The logits; `None` or 0 for the pooled features
            `[batch, 1, 1, 1536]` (`global_pool`, before dropout), and no
            auxiliary head.
        dropout_keep_prob: The keep probability before the logits.
        create_aux_logits: Whether to add the auxiliary head on
            `Mixed_6h` (`end_points["AuxLogits"]`).
        sc: The `ArgScope`; `inception_v4_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (end points of the base, `AuxLogits`, `global_pool`,
        `PreLogitsFlatten`, `Logits`, `Predictions`).
    """
    sc = _same(sc or inception_v4_arg_scope())
    conv = _convs(None, sc)
    net, end_points = inception_v4_base(inputs, sc=sc)
    if create_aux_logits and num_classes:
        # 17 x 17 x 1024
        aux = avg_pool2d(
            end_points["Mixed_6h"],
            [5, 5],
            stride=3,
            scope="AuxLogits/AvgPool_1a_5x5",
        )
        aux = conv(aux, 128, 1, "AuxLogits/Conv2d_1b_1x1")
        aux = conv(
            aux, 768, aux.shape[1:3], "AuxLogits/Conv2d_2a", padding="valid"
        )
        aux = flatten(aux, scope="AuxLogits/Flatten")
        end_points["AuxLogits"] = fully_connected(
            aux, num_classes, scope="AuxLogits/Aux_logits", sc=sc
        )
    # 8 x 8 x 1536: TF-Slim's `AvgPool_1a` over the whole map.
    net = _slim.global_pool(net, scope="Logits/AvgPool_1a")
    end_points["global_pool"] = net
    if not num_classes:
        return net, end_points
    # 1 x 1 x 1536
    net = _slim.dropout(net, dropout_keep_prob, scope="Logits/Dropout_1b")
    net = flatten(net, scope="Logits/PreLogitsFlatten")
    end_points["PreLogitsFlatten"] = net
    logits = fully_connected(net, num_classes, scope="Logits/Logits", sc=sc)
    end_points["Logits"] = logits
    end_points["Predictions"] = keras.layers.Softmax(
        name=_slim.name_of("Logits/Predictions")
    )(logits)
    return logits, end_points
