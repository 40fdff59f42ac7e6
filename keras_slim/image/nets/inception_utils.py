"""What TF-Slim's inception nets share (research/slim's `inception_utils`)."""

from keras_slim import checks
from keras_slim.image.nets import _slim


def inception_arg_scope(
    weight_decay=0.00004,
    use_batch_norm=True,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    batch_norm_scale=False,
):
    """research/slim's `inception_arg_scope`: what the inception nets'
    arg scopes set.

    Args:
        weight_decay: The L2 factor of the convolutions' weights.
        use_batch_norm: Whether batch norm follows each convolution.
        batch_norm_decay: The moving averages' decay.
        batch_norm_epsilon: Added to the variance.
        batch_norm_scale: Whether batch norm has a `gamma`.

    Returns:
        An `ArgScope`: ReLU, `SAME` padding, the batch norm.
    """
    batch_norm = None
    if use_batch_norm:
        batch_norm = _slim.BatchNorm(
            decay=batch_norm_decay,
            epsilon=batch_norm_epsilon,
            scale=batch_norm_scale,
        )
    return _slim.ArgScope(weight_decay=weight_decay, batch_norm=batch_norm)


def depth_fn(min_depth, depth_multiplier):
    """TF-Slim's `depth = lambda d: max(int(d * depth_multiplier),
    min_depth)`.

    Args:
        min_depth: The fewest channels of a convolution.
        depth_multiplier: The factor of every convolution's channels.

    Returns:
        The function of a depth.

    Raises:
        ValueError: if `depth_multiplier` is not greater than zero.
    """
    if not depth_multiplier > 0:
        raise checks.invalid(
            "depth_multiplier", depth_multiplier, "a number greater than zero"
        )
    return lambda d: max(int(d * depth_multiplier), min_depth)


def reduced_kernel_size_for_small_input(net, kernel_size):
    """TF-Slim's `_reduced_kernel_size_for_small_input`.

    Args:
        net: A Keras tensor `[batch, height, width, channels]`.
        kernel_size: The pool's or convolution's `[height, width]`.

    Returns:
        `kernel_size`, each side at most the tensor's (as it is when
        the tensor's side is unknown).
    """
    height, width = net.shape[1:3]
    if height is None or width is None:
        return list(kernel_size)
    return [min(height, kernel_size[0]), min(width, kernel_size[1])]


def layer(function, *args, **kwargs):
    """An end point's layer: `function(net, *args, scope=end_point,
    **kwargs)`, as TF-Slim writes `slim.conv2d(net, 64, [7, 7],
    stride=2, scope=end_point)`."""
    return lambda net, scope: function(net, *args, scope=scope, **kwargs)


def build(inputs, layers, final_endpoint):
    """TF-Slim's `inception_v*_base` loop: each end point in order, until
    `final_endpoint`.

    Args:
        inputs: A Keras tensor.
        layers: `{end_point: layer(...)}` in the net's order.
        final_endpoint: The last end point built.

    Returns:
        `(net, end_points)`: `final_endpoint`'s tensor, and each end
        point's up to it.

    Raises:
        ValueError: if `final_endpoint` is not an end point of `layers`.
    """
    if final_endpoint not in layers:
        raise checks.invalid(
            "final_endpoint", final_endpoint, f"one of {tuple(layers)}"
        )
    end_points = {}
    net = inputs
    for end_point, function in layers.items():
        net = function(net, end_point)
        end_points[end_point] = net
        if end_point == final_endpoint:
            break
    return net, end_points


def logits(
    net,
    num_classes,
    dropout_keep_prob,
    *,
    dropout,
    conv,
    spatial_squeeze,
    sc,
):
    """The `Logits` head after the final pool: dropout, then the logits.

    Args:
        net: The pooled features `[batch, 1, 1, channels]`.
        num_classes: The logits.
        dropout_keep_prob: The dropout's keep probability.
        dropout: The dropout's scope in `Logits` (`Dropout_1b`).
        conv: The logits convolution's scope in `Logits`
            (`Conv2d_1c_1x1`): 1x1, biases, no batch norm, no activation.
        spatial_squeeze: Whether the logits are `[batch, num_classes]`
            (`Logits/SpatialSqueeze`).
        sc: The net's `ArgScope`.

    Returns:
        `(pre_logits, logits)`: the dropout's output and the logits.
    """
    pre_logits = _slim.dropout(
        net, dropout_keep_prob, scope=f"Logits/{dropout}"
    )
    net = _slim.conv2d(
        pre_logits,
        num_classes,
        [1, 1],
        activation=None,
        normalize=False,
        scope=f"Logits/{conv}",
        sc=sc,
    )
    if spatial_squeeze:
        net = _slim.squeeze(net, scope="Logits/SpatialSqueeze")
    return pre_logits, net


#: TF-Slim's `slim.softmax`, the nets' default `prediction_fn`.
softmax = _slim.softmax
