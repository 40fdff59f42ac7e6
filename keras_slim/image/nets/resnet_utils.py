"""TF-Slim's ResNet building blocks (nets/resnet_utils.py)."""

import collections

import keras

from keras_slim.image.nets import _slim


class Block(collections.namedtuple("Block", ["scope", "unit_fn", "args"])):
    """A named tuple describing a ResNet block (TF-Slim's `Block`).

    Attributes:
        scope: The scope of the block (`block1`).
        unit_fn: The unit function, `unit_fn(net, rate=..., scope=...,
            sc=..., end_points=..., **args[i])` (a `bottleneck`).
        args: One dict per unit of the block: its `depth`,
            `depth_bottleneck` and `stride`.
    """


def collect(end_points, alias, net):
    """TF-Slim's `collect_named_outputs` into a dict.

    Args:
        end_points: A dict, or `None` to collect nothing.
        alias: The key, a scope below the net's.
        net: The tensor.

    Returns:
        `net`.
    """
    if end_points is not None:
        end_points[alias] = net
    return net


def subsample(inputs, factor, scope):
    """Subsamples the input along the spatial dimensions.

    Args:
        inputs: A tensor `[batch, height_in, width_in, channels]`.
        factor: The subsampling factor.
        scope: The scope of the max pool.

    Returns:
        `inputs` when `factor` is 1, else a `[1, 1]` max pool of stride
        `factor` (`[batch, ceil(height_in / factor), ...]`).
    """
    if factor == 1:
        return inputs
    return _slim.max_pool2d(
        inputs, [1, 1], stride=factor, padding="same", scope=scope
    )


def conv2d_same(
    inputs, num_outputs, kernel_size, stride, rate=1, *, scope, sc, **kwargs
):
    """Strided 2-D convolution with 'SAME' padding, as TF-Slim pads it.

    With `stride > 1` the input is zero-padded explicitly (`Pad`, the
    padding of the dilated kernel split as `SAME` splits it for an odd
    input), then convolved with `VALID` padding; this is not
    `padding="same"` with the stride, which pads an even input at the end
    only.

    Args:
        inputs: A tensor `[batch, height_in, width_in, channels]`.
        num_outputs: The number of output filters.
        kernel_size: An int, the side of the filters.
        stride: An int, the output stride.
        rate: An int, the rate of atrous convolution.
        scope: The scope of the convolution.
        sc: The net's `ArgScope`.
        **kwargs: More arguments of `_slim.conv2d` (`activation`,
            `normalize`).

    Returns:
        The convolution's output `[batch, height_out, width_out,
        num_outputs]`.
    """
    if stride == 1:
        return _slim.conv2d(
            inputs,
            num_outputs,
            kernel_size,
            stride=1,
            rate=rate,
            padding="same",
            scope=scope,
            sc=sc,
            **kwargs,
        )
    kernel_size_effective = kernel_size + (kernel_size - 1) * (rate - 1)
    pad_total = kernel_size_effective - 1
    pad_beg = pad_total // 2
    pad_end = pad_total - pad_beg
    inputs = keras.layers.ZeroPadding2D(
        ((pad_beg, pad_end), (pad_beg, pad_end)),
        name=_slim.name_of(f"{scope}/Pad"),
    )(inputs)
    return _slim.conv2d(
        inputs,
        num_outputs,
        kernel_size,
        stride=stride,
        rate=rate,
        padding="valid",
        scope=scope,
        sc=sc,
        **kwargs,
    )


def stack_blocks_dense(net, blocks, output_stride=None, *, sc, end_points=None):
    """Stacks ResNet `Block`s and controls the output feature density.

    The units get the scopes `<block>/unit_1`, `<block>/unit_2`, ...
    Once the activations reach `output_stride`, the remaining units run
    with stride 1 and atrous convolution, the rate multiplied by each
    skipped stride.

    Args:
        net: A tensor `[batch, height, width, channels]`.
        blocks: A list of `Block`s.
        output_stride: `None` for the nominal stride; else the ratio of
            the input's resolution to the output's, a product of the
            units' strides from the first up to some unit.
        sc: The net's `ArgScope`.
        end_points: A dict collecting the units' and blocks' outputs,
            or `None`.

    Returns:
        The output tensor, at stride `output_stride`.

    Raises:
        ValueError: If the target `output_stride` cannot be reached.
    """
    # The stride of the activations so far, and the atrous rate.
    current_stride = 1
    rate = 1
    for block in blocks:
        for i, unit in enumerate(block.args):
            if output_stride is not None and current_stride > output_stride:
                raise ValueError("The target output_stride cannot be reached.")
            unit_scope = f"{block.scope}/unit_{i + 1}"
            if output_stride is not None and current_stride == output_stride:
                net = block.unit_fn(
                    net,
                    rate=rate,
                    scope=unit_scope,
                    sc=sc,
                    end_points=end_points,
                    **dict(unit, stride=1),
                )
                rate *= unit.get("stride", 1)
            else:
                net = block.unit_fn(
                    net,
                    rate=1,
                    scope=unit_scope,
                    sc=sc,
                    end_points=end_points,
                    **unit,
                )
                current_stride *= unit.get("stride", 1)
        collect(end_points, block.scope, net)
    if output_stride is not None and current_stride != output_stride:
        raise ValueError("The target output_stride cannot be reached.")
    return net


def resnet_arg_scope(
    weight_decay=0.0001,
    batch_norm_decay=0.997,
    batch_norm_epsilon=1e-5,
    batch_norm_scale=True,
):
    """TF-Slim's `resnet_arg_scope`: batch norm and ReLU after each
    convolution, `SAME` padding.

    TF-Slim's scope also sets `SAME` padding for max pools; the nets pass
    it to `pool1` and `subsample`.

    Args:
        weight_decay: The L2 factor of the weights.
        batch_norm_decay: The moving averages' decay.
        batch_norm_epsilon: Added to the variance in batch norm.
        batch_norm_scale: Whether batch norm has a `gamma`.

    Returns:
        An `ArgScope`.
    """
    return _slim.ArgScope(
        weight_decay=weight_decay,
        batch_norm=_slim.BatchNorm(
            decay=batch_norm_decay,
            epsilon=batch_norm_epsilon,
            scale=batch_norm_scale,
        ),
        activation="relu",
        padding="same",
    )


def root_output_stride(output_stride):
    """The `output_stride` left for the blocks after the root block (its
    `conv1` and `pool1` have stride 4).

    Raises:
        ValueError: If `output_stride` is not a multiple of 4.
    """
    if output_stride is None:
        return None
    if output_stride % 4 != 0:
        raise ValueError("The output_stride needs to be a multiple of 4.")
    return output_stride // 4


def pool_and_logits(
    net, num_classes, global_pool, spatial_squeeze, *, sc, end_points
):
    """The end of both ResNets: global average pooling (`pool5`), the
    `logits` 1x1 convolution with biases, and the spatial squeeze.

    Args:
        net: The last block's output (`postnorm`'s in resnet_v2).
        num_classes: The number of logits; `None` or 0 for none.
        global_pool: Whether to average over the spatial dimensions.
        spatial_squeeze: Whether the logits are squeezed to
            `[batch, num_classes]` (TensorFlow's error when they are not
            1x1).
        sc: The net's `ArgScope`.
        end_points: The dict of end points: `global_pool` (TF-Slim's
            tensor `<scope>/pool5`), `logits` (`[batch, 1, 1, classes]`),
            `spatial_squeeze` and `predictions` (their softmax) are added.

    Returns:
        The logits, or the (pooled) features without `num_classes`.
    """
    if global_pool:
        net = _slim.global_pool(net, scope="pool5")
        end_points["global_pool"] = net
    if not num_classes:
        return net
    net = _slim.conv2d(
        net,
        num_classes,
        [1, 1],
        activation=None,
        normalize=False,
        scope="logits",
        sc=sc,
    )
    end_points["logits"] = net
    if spatial_squeeze:
        net = _slim.squeeze(net, scope="SpatialSqueeze")
        end_points["spatial_squeeze"] = net
    end_points["predictions"] = keras.layers.Softmax(name="predictions")(net)
    return net
