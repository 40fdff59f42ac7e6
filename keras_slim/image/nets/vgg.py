"""TF-Slim's VGG nets (nets/vgg.py): `vgg_a`, `vgg_16`, `vgg_19`."""

from keras_slim.image.nets import _slim
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d
from keras_slim.image.nets._slim import repeat


def vgg_arg_scope(weight_decay=0.0005):
    """TF-Slim's `vgg_arg_scope`: ReLU, `SAME` padding, no batch norm.

    Args:
        weight_decay: The L2 factor of the weights.

    Returns:
        An `ArgScope`.
    """
    return _slim.ArgScope(weight_decay=weight_decay)


def _vgg(inputs, blocks, num_classes, dropout_keep_prob, spatial_squeeze, sc):
    """The body of every VGG: `blocks[i]` convolutions in `conv<i+1>`,
    each block max-pooled, then `fc6`, `fc7` and the logits `fc8`."""
    end_points = {}
    net = inputs
    for i, count in enumerate(blocks, 1):
        filters = min(64 * 2 ** (i - 1), 512)
        net = repeat(
            net, count, conv2d, filters, [3, 3], scope=f"conv{i}", sc=sc
        )
        end_points[f"conv{i}"] = net
        net = max_pool2d(net, [2, 2], scope=f"pool{i}")
        end_points[f"pool{i}"] = net
    # Use conv2d instead of fully_connected layers.
    net = conv2d(net, 4096, [7, 7], padding="valid", scope="fc6", sc=sc)
    end_points["fc6"] = net
    net = _slim.dropout(net, dropout_keep_prob, scope="dropout6")
    net = conv2d(net, 4096, [1, 1], scope="fc7", sc=sc)
    end_points["fc7"] = net
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


def vgg_a(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.5,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """Oxford Net VGG 11-Layers version A (TF-Slim's `vgg_a`).

    Args:
        inputs: A Keras tensor `[batch, 224, 224, channels]`.
        num_classes: The logits; `None` or 0 for `fc7`'s features.
        dropout_keep_prob: The keep probability of the dropouts.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`.
        sc: The `ArgScope`; `vgg_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them.
    """
    return _vgg(
        inputs,
        (1, 1, 2, 2, 2),
        num_classes,
        dropout_keep_prob,
        spatial_squeeze,
        sc or vgg_arg_scope(),
    )


def vgg_16(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.5,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """Oxford Net VGG 16-Layers version D (TF-Slim's `vgg_16`).

    Args and Returns as `vgg_a`.
    """
    return _vgg(
        inputs,
        (2, 2, 3, 3, 3),
        num_classes,
        dropout_keep_prob,
        spatial_squeeze,
        sc or vgg_arg_scope(),
    )


def vgg_19(
    inputs,
    num_classes=1000,
    dropout_keep_prob=0.5,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """Oxford Net VGG 19-Layers version E (TF-Slim's `vgg_19`).

    Args and Returns as `vgg_a`.
    """
    return _vgg(
        inputs,
        (2, 2, 4, 4, 4),
        num_classes,
        dropout_keep_prob,
        spatial_squeeze,
        sc or vgg_arg_scope(),
    )
