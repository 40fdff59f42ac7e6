"""TF-Slim's AlexNet (nets/alexnet.py): `alexnet_v2`."""

from keras_slim.image.nets import _slim
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d


def alexnet_v2_arg_scope(weight_decay=0.0005):
    """TF-Slim's `alexnet_v2_arg_scope`: ReLU, `SAME` convolutions,
    `VALID` pools, no batch norm.

    Args:
        weight_decay: The L2 factor of the weights.

    Returns:
        An `ArgScope`.
    """
    return _slim.ArgScope(weight_decay=weight_decay)


def alexnet_v2(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.5,
    spatial_squeeze=True,
    global_pool=False,
    *,
    sc=None,
):
    """AlexNet version 2 (TF-Slim's `alexnet_v2`).

    Args:
        inputs: A Keras tensor `[batch, 224, 224, channels]`.
        num_classes: The logits; `None` or 0 for `fc7`'s features (before
            dropout).
        dropout_keep_prob: The keep probability of the dropouts.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`.
        global_pool: Whether `fc7`'s features are averaged to 1x1 first
            (for inputs larger than 224; not in the original AlexNet).
        sc: The `ArgScope`; `alexnet_v2_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (end points named without the net's scope: `conv1`, ..., `fc7`,
        `fc8`).
    """
    sc = sc or alexnet_v2_arg_scope()
    end_points = {}

    def add(name, net):
        end_points[name] = net
        return net

    net = add(
        "conv1",
        conv2d(
            inputs,
            64,
            [11, 11],
            stride=4,
            padding="valid",
            scope="conv1",
            sc=sc,
        ),
    )
    net = add("pool1", max_pool2d(net, [3, 3], stride=2, scope="pool1"))
    net = add("conv2", conv2d(net, 192, [5, 5], scope="conv2", sc=sc))
    net = add("pool2", max_pool2d(net, [3, 3], stride=2, scope="pool2"))
    net = add("conv3", conv2d(net, 384, [3, 3], scope="conv3", sc=sc))
    net = add("conv4", conv2d(net, 384, [3, 3], scope="conv4", sc=sc))
    net = add("conv5", conv2d(net, 256, [3, 3], scope="conv5", sc=sc))
    net = add("pool5", max_pool2d(net, [3, 3], stride=2, scope="pool5"))
    # Use conv2d instead of fully_connected layers.
    net = add(
        "fc6", conv2d(net, 4096, [5, 5], padding="valid", scope="fc6", sc=sc)
    )
    net = _slim.dropout(net, dropout_keep_prob, scope="dropout6")
    net = add("fc7", conv2d(net, 4096, [1, 1], scope="fc7", sc=sc))
    if global_pool:
        net = add("global_pool", _slim.global_pool(net, scope="global_pool"))
    if not num_classes:
        return net, end_points
    net = _slim.dropout(net, dropout_keep_prob, scope="dropout7")
    net = conv2d(
        net,
        num_classes,
        [1, 1],
        activation=None,
        normalize=False,
        scope="fc8",
        sc=sc,
    )
    if spatial_squeeze:
        net = _slim.squeeze(net, scope="fc8/squeezed")
    end_points["fc8"] = net
    return net, end_points
