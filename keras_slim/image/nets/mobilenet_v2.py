"""TF-Slim's MobileNet v2 (nets/mobilenet/mobilenet_v2.py):
`mobilenet_v2` and its depth multipliers (`mobilenet_v2_140`,
`mobilenet_v2_050`, `mobilenet_v2_035`).
"""

import dataclasses

from keras_slim.image.nets import _mobilenet
from keras_slim.image.nets import _slim
from keras_slim.image.nets._mobilenet import Conv
from keras_slim.image.nets._mobilenet import ExpandedConv

#: TF-Slim's `V2_DEF`: its ops in order (layer_1 ... layer_19).
V2_DEF = (
    Conv(32, (3, 3), stride=2),
    ExpandedConv(16, expansion=1, divisible_by=1),
    ExpandedConv(24, stride=2),
    ExpandedConv(24),
    ExpandedConv(32, stride=2),
    ExpandedConv(32),
    ExpandedConv(32),
    ExpandedConv(64, stride=2),
    ExpandedConv(64),
    ExpandedConv(64),
    ExpandedConv(64),
    ExpandedConv(96),
    ExpandedConv(96),
    ExpandedConv(96),
    ExpandedConv(160, stride=2),
    ExpandedConv(160),
    ExpandedConv(160),
    ExpandedConv(320),
    Conv(1280, (1, 1)),
)


def mobilenet_v2_arg_scope(
    weight_decay=0.00004, dropout_keep_prob=0.8, bn_decay=0.997
):
    """TF-Slim's `mobilenet_v2.training_scope` (`mobilenet.training_scope`).

    Args:
        weight_decay: The L2 factor of the weights (not of depthwise
            weights nor biases).
        dropout_keep_prob: The keep probability of the dropout before the
            logits.
        bn_decay: The decay of the batch-norm moving averages.

    Returns:
        A `TrainingScope` (an `ArgScope`).
    """
    return _mobilenet.training_scope(
        weight_decay=weight_decay,
        dropout_keep_prob=dropout_keep_prob,
        bn_decay=bn_decay,
    )


def _net_scope(sc, activation):
    """What V2_DEF's `defaults` fix whatever the arg scope: batch norm
    with `beta` and `gamma` after every convolution (slim.batch_norm's
    decay when the scope has none), the activation, `SAME` padding."""
    batch_norm = sc.batch_norm or _slim.BatchNorm(decay=0.999)
    return dataclasses.replace(
        sc,
        batch_norm=dataclasses.replace(batch_norm, center=True, scale=True),
        activation=activation or "relu6",
        padding="same",
    )


def _conv_defs(conv_defs, depth_multiplier, finegrain_classification_mode):
    conv_defs = V2_DEF if conv_defs is None else tuple(conv_defs)
    if finegrain_classification_mode and depth_multiplier < 1:
        # The last layer keeps its depth: undo the multiplier on it.
        last = conv_defs[-1]
        conv_defs = conv_defs[:-1] + (
            dataclasses.replace(
                last, num_outputs=last.num_outputs / depth_multiplier
            ),
        )
    return conv_defs


def mobilenet_v2_base(
    inputs,
    depth_multiplier=1.0,
    conv_defs=None,
    finegrain_classification_mode=False,
    min_depth=8,
    divisible_by=8,
    activation=None,
    final_endpoint=None,
    output_stride=None,
    use_explicit_padding=False,
    *,
    sc,
):
    """TF-Slim's `mobilenet_v2.mobilenet_base`: the net without pooling
    and logits, up to `layer_19` (the 1x1 convolution to 1280).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        depth_multiplier: The multiplier of every layer's depth.
        conv_defs: The ops (`_mobilenet.Conv`, `_mobilenet.ExpandedConv`);
            `V2_DEF` when `None`.
        finegrain_classification_mode: Whether the last layer keeps its
            depth for a multiplier below 1.
        min_depth: The least depth of a layer.
        divisible_by: Every depth is a multiple of it.
        activation: `"relu6"` when `None`, or `"relu"`.
        final_endpoint: The last end point built (`layer_<i>`); `None`
            for all.
        output_stride: `None`, 1 or an even number: the largest ratio of
            input to output size (dilated convolutions beyond it).
        use_explicit_padding: Whether convolutions are `VALID` on
            explicitly padded inputs rather than `SAME`.
        sc: The `ArgScope` (`mobilenet_v2_arg_scope()`).

    Returns:
        `(net, end_points)`: Keras tensors; end points `layer_1` to
        `layer_19`, and `layer_<i>/output`, `layer_<i>/depthwise_output`,
        `layer_<i>/expansion_output` of the blocks.

    Raises:
        ValueError: for a `depth_multiplier` not above 0 or an odd
            `output_stride`.
    """
    return _mobilenet.mobilenet_base(
        inputs,
        _conv_defs(conv_defs, depth_multiplier, finegrain_classification_mode),
        depth_multiplier,
        min_depth=min_depth,
        divisible_by=divisible_by,
        final_endpoint=final_endpoint,
        output_stride=output_stride,
        use_explicit_padding=use_explicit_padding,
        sc=_net_scope(sc, activation),
    )


def mobilenet_v2(
    inputs,
    num_classes=1001,
    depth_multiplier=1.0,
    conv_defs=None,
    finegrain_classification_mode=False,
    min_depth=8,
    divisible_by=8,
    activation=None,
    output_stride=None,
    use_explicit_padding=False,
    *,
    sc=None,
):
    """MobileNet v2 for classification (TF-Slim's `mobilenet_v2.mobilenet`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        num_classes: The logits; `None` or 0 for the pooled features
            (`global_pool`).
        depth_multiplier: The multiplier of every layer's depth.
        conv_defs: The ops; `V2_DEF` when `None`.
        finegrain_classification_mode: Whether the last layer keeps its
            1280 channels for a multiplier below 1 (TF-Slim's
            `mobilenet_v2_035` and `mobilenet_v2_050` do).
        min_depth: The least depth of a layer.
        divisible_by: Every depth is a multiple of it.
        activation: `"relu6"` when `None`, or `"relu"`.
        output_stride: `None`, 1 or an even number: the largest ratio of
            input to output size.
        use_explicit_padding: Whether convolutions are `VALID` on
            explicitly padded inputs rather than `SAME`.
        sc: The `ArgScope`; `mobilenet_v2_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, logits
        `[batch, num_classes]`; end points as TF-Slim's (`layer_1` ...
        `layer_19`, `global_pool`, `Logits`, `Predictions`).

    Raises:
        ValueError: for inputs not of rank 4, a `depth_multiplier` not
            above 0 or an odd `output_stride`.
    """
    if len(inputs.shape) != 4:
        raise ValueError(f"Expected rank 4 input, was: {len(inputs.shape)}")
    sc = sc or mobilenet_v2_arg_scope()
    net, end_points = mobilenet_v2_base(
        inputs,
        depth_multiplier,
        conv_defs,
        finegrain_classification_mode,
        min_depth,
        divisible_by,
        activation,
        output_stride=output_stride,
        use_explicit_padding=use_explicit_padding,
        sc=sc,
    )
    return _mobilenet.mobilenet_head(
        net, end_points, num_classes, sc=_net_scope(sc, activation)
    )


def mobilenet_v2_140(inputs, num_classes=1001, **kwargs):
    """TF-Slim's `mobilenet_v2_140`: `mobilenet_v2` with depth multiplier
    1.4 (`mobilenet_v2_1.4_224.ckpt`). Args and Returns as `mobilenet_v2`.
    """
    return mobilenet_v2(inputs, num_classes, depth_multiplier=1.4, **kwargs)


def mobilenet_v2_050(inputs, num_classes=1001, **kwargs):
    """TF-Slim's `mobilenet_v2_050`: depth multiplier 0.5, the last layer
    kept at 1280 (`finegrain_classification_mode`). Args and Returns as
    `mobilenet_v2`.
    """
    return mobilenet_v2(
        inputs,
        num_classes,
        depth_multiplier=0.5,
        finegrain_classification_mode=True,
        **kwargs,
    )


def mobilenet_v2_035(inputs, num_classes=1001, **kwargs):
    """TF-Slim's `mobilenet_v2_035`: depth multiplier 0.35, the last layer
    kept at 1280 (`finegrain_classification_mode`). Args and Returns as
    `mobilenet_v2`.
    """
    return mobilenet_v2(
        inputs,
        num_classes,
        depth_multiplier=0.35,
        finegrain_classification_mode=True,
        **kwargs,
    )
