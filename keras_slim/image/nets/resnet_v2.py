"""TF-Slim's pre-activation ResNets (nets/resnet_v2.py): `resnet_v2_50`,
`resnet_v2_101`, `resnet_v2_152`, `resnet_v2_200`.
"""

import keras

from keras_slim.image.nets import _slim
from keras_slim.image.nets import resnet_utils
from keras_slim.image.nets._slim import conv2d

resnet_arg_scope = resnet_utils.resnet_arg_scope


def bottleneck(
    inputs,
    depth,
    depth_bottleneck,
    stride,
    rate=1,
    end_points=None,
    *,
    scope,
    sc,
):
    """Bottleneck residual unit with batch norm before the convolutions.

    The full pre-activation unit of [2], Fig. 1(b); its stride is in the
    3x3 convolution `conv2` and in the shortcut.

    Args:
        inputs: A tensor `[batch, height, width, channels]`.
        depth: The depth of the unit's output.
        depth_bottleneck: The depth of the bottleneck layers.
        stride: The unit's stride.
        rate: An int, the rate of atrous convolution.
        end_points: A dict collecting the convolutions' and the unit's
            outputs, or `None`.
        scope: The unit's scope (`block1/unit_1`); its layers are under
            `<scope>/bottleneck_v2`.
        sc: The net's `ArgScope`.

    Returns:
        The unit's output.
    """
    scope = f"{scope}/bottleneck_v2"
    collect = resnet_utils.collect
    preact = _slim.batch_norm(
        inputs, activation="relu", scope=f"{scope}/preact", sc=sc
    )
    if depth == inputs.shape[-1]:
        shortcut = resnet_utils.subsample(inputs, stride, f"{scope}/shortcut")
    else:
        shortcut = conv2d(
            preact,
            depth,
            [1, 1],
            stride=stride,
            activation=None,
            normalize=False,
            scope=f"{scope}/shortcut",
            sc=sc,
        )
        collect(end_points, f"{scope}/shortcut", shortcut)
    residual = conv2d(
        preact,
        depth_bottleneck,
        [1, 1],
        stride=1,
        scope=f"{scope}/conv1",
        sc=sc,
    )
    collect(end_points, f"{scope}/conv1", residual)
    residual = resnet_utils.conv2d_same(
        residual,
        depth_bottleneck,
        3,
        stride,
        rate=rate,
        scope=f"{scope}/conv2",
        sc=sc,
    )
    collect(end_points, f"{scope}/conv2", residual)
    residual = conv2d(
        residual,
        depth,
        [1, 1],
        stride=1,
        activation=None,
        normalize=False,
        scope=f"{scope}/conv3",
        sc=sc,
    )
    collect(end_points, f"{scope}/conv3", residual)
    output = keras.layers.Add(name=_slim.name_of(f"{scope}/add"))(
        [shortcut, residual]
    )
    return collect(end_points, scope, output)


def resnet_v2(
    inputs,
    blocks,
    num_classes=None,
    global_pool=True,
    output_stride=None,
    include_root_block=True,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """Generator for v2 (pre-activation) ResNets (TF-Slim's `resnet_v2`).

    Args:
        inputs: A Keras tensor `[batch, height_in, width_in, channels]`.
        blocks: A list of `resnet_utils.Block`s.
        num_classes: The number of logits; `None` or 0 for the features
            before them.
        global_pool: Whether to average `postnorm`'s output over its
            spatial dimensions (`pool5`) before the logits; `False` for
            dense prediction.
        output_stride: `None` for the nominal stride (32); else the ratio
            of the input's resolution to the output's, a multiple of 4
            reached by atrous convolution.
        include_root_block: Whether to start with `conv1` (7x7, stride 2,
            no batch norm nor activation) and `pool1` (3x3 max pool,
            stride 2); without it, `inputs` should be the output of a
            convolution without activation.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`
            rather than `[batch, 1, 1, num_classes]` (tf_slim 1.1.0's
            resnet has no such argument and does not squeeze;
            research/slim's squeezes by default).
        sc: The `ArgScope`; `resnet_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`: the logits, or without `num_classes`
        `postnorm`'s output (pooled with `global_pool`); and the end
        points, keyed by scope below the net's: `conv1`, each unit's
        convolutions and output (`block1/unit_1/bottleneck_v2/conv1`,
        `block1/unit_1/bottleneck_v2`), each block (`block1` ...
        `block4`, before `postnorm`), `global_pool` (TF-Slim's tensor
        `<scope>/pool5`), `logits` (`[batch, 1, 1, num_classes]`),
        `spatial_squeeze` and `predictions`.

    Raises:
        ValueError: If `output_stride` cannot be reached.
    """
    sc = sc or resnet_arg_scope()
    end_points = {}
    net = inputs
    if include_root_block:
        output_stride = resnet_utils.root_output_stride(output_stride)
        # No batch norm nor activation: the first unit's preact does them.
        net = resnet_utils.conv2d_same(
            net,
            64,
            7,
            2,
            activation=None,
            normalize=False,
            scope="conv1",
            sc=sc,
        )
        resnet_utils.collect(end_points, "conv1", net)
        net = _slim.max_pool2d(
            net, [3, 3], stride=2, padding="same", scope="pool1"
        )
    net = resnet_utils.stack_blocks_dense(
        net, blocks, output_stride, sc=sc, end_points=end_points
    )
    # The units' outputs have no batch norm nor activation; see [2].
    net = _slim.batch_norm(net, activation="relu", scope="postnorm", sc=sc)
    net = resnet_utils.pool_and_logits(
        net,
        num_classes,
        global_pool,
        spatial_squeeze,
        sc=sc,
        end_points=end_points,
    )
    return net, end_points


def resnet_v2_block(scope, base_depth, num_units, stride):
    """A resnet_v2 block of bottleneck units.

    Args:
        scope: The scope of the block.
        base_depth: The depth of the bottleneck layers of its units.
        num_units: The number of units in the block.
        stride: The block's stride, in its last unit (the others have
            stride 1).

    Returns:
        A `resnet_utils.Block`.
    """
    unit = {"depth": base_depth * 4, "depth_bottleneck": base_depth}
    return resnet_utils.Block(
        scope,
        bottleneck,
        [dict(unit, stride=1)] * (num_units - 1) + [dict(unit, stride=stride)],
    )


def resnet_v2_50(
    inputs,
    num_classes=None,
    global_pool=True,
    output_stride=None,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """ResNet-50 of [2] (TF-Slim's `resnet_v2_50`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`
            (224 pixels in TF-Slim's training).
        num_classes: The number of logits; `None` or 0 for the features.
        global_pool: Whether to average-pool the last block's output.
        output_stride: `None` (32), or a multiple of 4 reached by atrous
            convolution.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`.
        sc: The `ArgScope`; `resnet_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`, as `resnet_v2` returns them.

    Raises:
        ValueError: If `output_stride` cannot be reached.
    """
    blocks = [
        resnet_v2_block("block1", base_depth=64, num_units=3, stride=2),
        resnet_v2_block("block2", base_depth=128, num_units=4, stride=2),
        resnet_v2_block("block3", base_depth=256, num_units=6, stride=2),
        resnet_v2_block("block4", base_depth=512, num_units=3, stride=1),
    ]
    return resnet_v2(
        inputs,
        blocks,
        num_classes,
        global_pool,
        output_stride,
        include_root_block=True,
        spatial_squeeze=spatial_squeeze,
        sc=sc,
    )


def resnet_v2_101(
    inputs,
    num_classes=None,
    global_pool=True,
    output_stride=None,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """ResNet-101 of [2] (TF-Slim's `resnet_v2_101`).

    Args, Returns and Raises as `resnet_v2_50`.
    """
    blocks = [
        resnet_v2_block("block1", base_depth=64, num_units=3, stride=2),
        resnet_v2_block("block2", base_depth=128, num_units=4, stride=2),
        resnet_v2_block("block3", base_depth=256, num_units=23, stride=2),
        resnet_v2_block("block4", base_depth=512, num_units=3, stride=1),
    ]
    return resnet_v2(
        inputs,
        blocks,
        num_classes,
        global_pool,
        output_stride,
        include_root_block=True,
        spatial_squeeze=spatial_squeeze,
        sc=sc,
    )


def resnet_v2_152(
    inputs,
    num_classes=None,
    global_pool=True,
    output_stride=None,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """ResNet-152 of [2] (TF-Slim's `resnet_v2_152`).

    Args, Returns and Raises as `resnet_v2_50`.
    """
    blocks = [
        resnet_v2_block("block1", base_depth=64, num_units=3, stride=2),
        resnet_v2_block("block2", base_depth=128, num_units=8, stride=2),
        resnet_v2_block("block3", base_depth=256, num_units=36, stride=2),
        resnet_v2_block("block4", base_depth=512, num_units=3, stride=1),
    ]
    return resnet_v2(
        inputs,
        blocks,
        num_classes,
        global_pool,
        output_stride,
        include_root_block=True,
        spatial_squeeze=spatial_squeeze,
        sc=sc,
    )


def resnet_v2_200(
    inputs,
    num_classes=None,
    global_pool=True,
    output_stride=None,
    spatial_squeeze=True,
    *,
    sc=None,
):
    """ResNet-200 of [2] (TF-Slim's `resnet_v2_200`).

    Args, Returns and Raises as `resnet_v2_50`.
    """
    blocks = [
        resnet_v2_block("block1", base_depth=64, num_units=3, stride=2),
        resnet_v2_block("block2", base_depth=128, num_units=24, stride=2),
        resnet_v2_block("block3", base_depth=256, num_units=36, stride=2),
        resnet_v2_block("block4", base_depth=512, num_units=3, stride=1),
    ]
    return resnet_v2(
        inputs,
        blocks,
        num_classes,
        global_pool,
        output_stride,
        include_root_block=True,
        spatial_squeeze=spatial_squeeze,
        sc=sc,
    )
