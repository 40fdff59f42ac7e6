"""TF-Slim's Inception-ResNet-v2 (research/slim nets/inception_resnet_v2.py)."""

import dataclasses

import keras

from keras_slim.image.nets import _slim
from keras_slim.image.nets._fully_connected import flatten
from keras_slim.image.nets._fully_connected import fully_connected
from keras_slim.image.nets._slim import avg_pool2d
from keras_slim.image.nets._slim import concat
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d
from keras_slim.image.nets._slim import name_of

#: The end points of `inception_resnet_v2_base`, in order.
ENDPOINTS = (
    "Conv2d_1a_3x3",
    "Conv2d_2a_3x3",
    "Conv2d_2b_3x3",
    "MaxPool_3a_3x3",
    "Conv2d_3b_1x1",
    "Conv2d_4a_3x3",
    "MaxPool_5a_3x3",
    "Mixed_5b",
    "Mixed_6a",
    "PreAuxLogits",
    "Mixed_7a",
    "Conv2d_7b_1x1",
)
_UP_TO_PRE_AUX_LOGITS = ENDPOINTS[: ENDPOINTS.index("PreAuxLogits") + 1]


def inception_resnet_v2_arg_scope(
    weight_decay=0.00004,
    batch_norm_decay=0.9997,
    batch_norm_epsilon=0.001,
    activation_fn="relu",
    batch_norm_scale=False,
):
    """TF-Slim's `inception_resnet_v2_arg_scope`: batch norm and the
    activation after each convolution; weight decay on weights and, in
    this net, biases.

    Args:
        weight_decay: The L2 factor of the weights and biases.
        batch_norm_decay: The moving averages' decay.
        batch_norm_epsilon: Added to the variance.
        activation_fn: `"relu"`, `"relu6"` or `None`.
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
        activation=activation_fn,
    )


@keras.saving.register_keras_serializable(package="keras_slim")
class ScaledResidual(keras.layers.Layer):
    """`net + scale * up`, a residual block's sum; with `clip`, `scale *
    up` is clipped to `[-clip, clip]` first (TF-Slim's for `relu6`).

    Args:
        scale: The factor of the residual.
        clip: A bound, or `None`.
        **kwargs: The layer's (`name`).
    """

    def __init__(self, scale, clip=None, **kwargs):
        super().__init__(**kwargs)
        self.scale = float(scale)
        self.clip = None if clip is None else float(clip)

    def call(self, inputs):
        net, up = inputs
        up = up * self.scale
        if self.clip is not None:
            up = keras.ops.clip(up, -self.clip, self.clip)
        return net + up

    def compute_output_shape(self, input_shape):
        return input_shape[0]

    def get_config(self):
        return {**super().get_config(), "scale": self.scale, "clip": self.clip}


def _convs(scope, sc):
    """`conv(net, depth, kernel, name, **kwargs)`: `conv2d` of the scope
    `scope/name` (`name` for no `scope`) under `sc`."""

    def conv(net, depth, kernel, name, **kwargs):
        name = f"{scope}/{name}" if scope else name
        return conv2d(net, depth, kernel, scope=name, sc=sc, **kwargs)

    return conv


def _activation(net, activation_fn, *, scope):
    if activation_fn is None:
        return net
    if activation_fn == "relu":
        return keras.layers.ReLU(name=name_of(f"{scope}/Relu"))(net)
    if activation_fn == "relu6":
        return keras.layers.ReLU(6.0, name=name_of(f"{scope}/Relu6"))(net)
    raise ValueError(f"Unknown activation {activation_fn!r}.")


def _residual(net, mixed, scale, activation_fn, *, scope, sc, rate=1):
    """The end of a residual block: `Conv2d_1x1` back to the input's
    depth (biases, no batch norm, no activation), scaled, added, then the
    activation."""
    regularizer = sc.regularizer()
    up = keras.layers.Conv2D(
        net.shape[-1],
        (1, 1),
        padding="same",
        dilation_rate=(rate, rate),
        kernel_regularizer=regularizer,
        bias_regularizer=regularizer,
        name=name_of(f"{scope}/Conv2d_1x1"),
    )(mixed)
    net = ScaledResidual(
        scale,
        clip=6.0 if activation_fn == "relu6" else None,
        name=name_of(f"{scope}/add"),
    )([net, up])
    return _activation(net, activation_fn, scope=scope)


def block35(net, scale=1.0, activation_fn="relu", *, scope, sc):
    """The 35x35 residual block (Inception-ResNet-A).

    Args:
        net: The block's input (320 channels).
        scale: The factor of the residual.
        activation_fn: After the sum: `"relu"`, `"relu6"` or `None`.
        scope: Its scope (`Repeat/block35_1`).
        sc: The net's `ArgScope`.

    Returns:
        The block's output, `net`'s shape.
    """
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(net, 32, 1, "Branch_0/Conv2d_1x1")
    branch_1 = conv(net, 32, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 32, 3, "Branch_1/Conv2d_0b_3x3")
    branch_2 = conv(net, 32, 1, "Branch_2/Conv2d_0a_1x1")
    branch_2 = conv(branch_2, 48, 3, "Branch_2/Conv2d_0b_3x3")
    branch_2 = conv(branch_2, 64, 3, "Branch_2/Conv2d_0c_3x3")
    mixed = concat([branch_0, branch_1, branch_2], scope=f"{s}/concat")
    return _residual(net, mixed, scale, activation_fn, scope=s, sc=sc)


def block17(net, scale=1.0, activation_fn="relu", *, scope, sc, rate=1):
    """The 17x17 residual block (Inception-ResNet-B).

    Args:
        net: The block's input (1088 channels).
        scale: The factor of the residual.
        activation_fn: After the sum: `"relu"`, `"relu6"` or `None`.
        scope: Its scope (`Repeat_1/block17_1`).
        sc: The net's `ArgScope`.
        rate: The dilation of its convolutions (2 for `output_stride=8`).

    Returns:
        The block's output, `net`'s shape.
    """
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(net, 192, 1, "Branch_0/Conv2d_1x1", rate=rate)
    branch_1 = conv(net, 128, 1, "Branch_1/Conv2d_0a_1x1", rate=rate)
    branch_1 = conv(branch_1, 160, [1, 7], "Branch_1/Conv2d_0b_1x7", rate=rate)
    branch_1 = conv(branch_1, 192, [7, 1], "Branch_1/Conv2d_0c_7x1", rate=rate)
    mixed = concat([branch_0, branch_1], scope=f"{s}/concat")
    return _residual(
        net, mixed, scale, activation_fn, scope=s, sc=sc, rate=rate
    )


def block8(net, scale=1.0, activation_fn="relu", *, scope, sc):
    """The 8x8 residual block (Inception-ResNet-C).

    Args:
        net: The block's input (2080 channels).
        scale: The factor of the residual.
        activation_fn: After the sum: `"relu"`, `"relu6"` or `None`.
        scope: Its scope (`Repeat_2/block8_1`, `Block8`).
        sc: The net's `ArgScope`.

    Returns:
        The block's output, `net`'s shape.
    """
    s = scope
    conv = _convs(s, sc)
    branch_0 = conv(net, 192, 1, "Branch_0/Conv2d_1x1")
    branch_1 = conv(net, 192, 1, "Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 224, [1, 3], "Branch_1/Conv2d_0b_1x3")
    branch_1 = conv(branch_1, 256, [3, 1], "Branch_1/Conv2d_0c_3x1")
    mixed = concat([branch_0, branch_1], scope=f"{s}/concat")
    return _residual(net, mixed, scale, activation_fn, scope=s, sc=sc)


def inception_resnet_v2_base(
    inputs,
    final_endpoint="Conv2d_7b_1x1",
    output_stride=16,
    align_feature_maps=False,
    activation_fn="relu",
    *,
    sc=None,
):
    """Inception-ResNet-v2 up to `final_endpoint` (TF-Slim's
    `inception_resnet_v2_base`).

    Args:
        inputs: A Keras tensor `[batch, height, width, channels]`.
        final_endpoint: One of `ENDPOINTS`: the last one built.
        output_stride: 16, or 8 (`Mixed_6a` without stride, the 17x17
            blocks dilated; only up to `PreAuxLogits`).
        align_feature_maps: Whether the `VALID` convolutions and pools
            are `SAME` (feature maps aligned with the input).
        activation_fn: The activation after each residual sum.
        sc: The `ArgScope`; `inception_resnet_v2_arg_scope()` when `None`.

    Returns:
        `(net, end_points)`: the output of `final_endpoint` and the end
        points up to it.

    Raises:
        ValueError: for a `final_endpoint` not in `ENDPOINTS`, an
            `output_stride` not 8 or 16, or an `output_stride` of 8 with
            a `final_endpoint` past `PreAuxLogits`.
    """
    if output_stride not in (8, 16):
        raise ValueError("output_stride must be 8 or 16.")
    if final_endpoint not in ENDPOINTS:
        raise ValueError(f"final_endpoint ({final_endpoint}) not recognized")
    if output_stride == 8 and final_endpoint not in _UP_TO_PRE_AUX_LOGITS:
        raise ValueError(
            "output_stride==8 is only supported up to the PreAuxlogits "
            "end_point for now."
        )
    # The base is under TF-Slim's `arg_scope([conv2d, max_pool2d,
    # avg_pool2d], stride=1, padding='SAME')`.
    sc = dataclasses.replace(
        sc or inception_resnet_v2_arg_scope(), padding="same"
    )
    padding = "same" if align_feature_maps else "valid"
    end_points = {}
    net = inputs
    for name, stage in _stages(sc, padding, output_stride, activation_fn):
        net = stage(net)
        if name is None:
            continue  # the repeated blocks have no end point of their own
        end_points[name] = net
        if name == final_endpoint:
            break
    return net, end_points


def _stages(sc, padding, output_stride, activation_fn):
    """`(end point, function of net)` in TF-Slim's order (`None`: no end
    point)."""
    conv = _convs(None, sc)
    atrous = output_stride == 8

    def repeat(count, block, scale, scope, **kwargs):
        def blocks(net):
            for i in range(1, count + 1):
                net = block(
                    net,
                    scale,
                    activation_fn,
                    scope=f"{scope}_{i}",
                    sc=sc,
                    **kwargs,
                )
            return net

        return blocks

    def last(net):
        net = block8(net, activation_fn=None, scope="Block8", sc=sc)
        # 8 x 8 x 1536
        return conv(net, 1536, 1, "Conv2d_7b_1x1")

    return [
        *_stem(conv, padding),
        ("Mixed_5b", lambda net: _mixed_5b(net, conv)),
        (None, repeat(10, block35, 0.17, "Repeat/block35")),
        ("Mixed_6a", lambda net: _mixed_6a(net, conv, padding, atrous)),
        (
            "PreAuxLogits",
            repeat(
                20, block17, 0.10, "Repeat_1/block17", rate=2 if atrous else 1
            ),
        ),
        ("Mixed_7a", lambda net: _mixed_7a(net, conv, padding)),
        (None, repeat(9, block8, 0.20, "Repeat_2/block8")),
        ("Conv2d_7b_1x1", last),
    ]


def _stem(conv, padding):
    """The stem's stages, 299 x 299 -> 35 x 35 x 192."""
    return [
        # 149 x 149 x 32
        (
            "Conv2d_1a_3x3",
            lambda net: conv(
                net, 32, 3, "Conv2d_1a_3x3", stride=2, padding=padding
            ),
        ),
        # 147 x 147 x 32
        (
            "Conv2d_2a_3x3",
            lambda net: conv(net, 32, 3, "Conv2d_2a_3x3", padding=padding),
        ),
        # 147 x 147 x 64
        ("Conv2d_2b_3x3", lambda net: conv(net, 64, 3, "Conv2d_2b_3x3")),
        # 73 x 73 x 64
        (
            "MaxPool_3a_3x3",
            lambda net: max_pool2d(
                net, 3, padding=padding, scope="MaxPool_3a_3x3"
            ),
        ),
        # 73 x 73 x 80
        (
            "Conv2d_3b_1x1",
            lambda net: conv(net, 80, 1, "Conv2d_3b_1x1", padding=padding),
        ),
        # 71 x 71 x 192
        (
            "Conv2d_4a_3x3",
            lambda net: conv(net, 192, 3, "Conv2d_4a_3x3", padding=padding),
        ),
        # 35 x 35 x 192
        (
            "MaxPool_5a_3x3",
            lambda net: max_pool2d(
                net, 3, padding=padding, scope="MaxPool_5a_3x3"
            ),
        ),
    ]


def _mixed_5b(net, conv):
    """35 x 35 x 320."""
    s = "Mixed_5b"
    branch_0 = conv(net, 96, 1, f"{s}/Branch_0/Conv2d_1x1")
    branch_1 = conv(net, 48, 1, f"{s}/Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 64, 5, f"{s}/Branch_1/Conv2d_0b_5x5")
    branch_2 = conv(net, 64, 1, f"{s}/Branch_2/Conv2d_0a_1x1")
    branch_2 = conv(branch_2, 96, 3, f"{s}/Branch_2/Conv2d_0b_3x3")
    branch_2 = conv(branch_2, 96, 3, f"{s}/Branch_2/Conv2d_0c_3x3")
    branch_3 = avg_pool2d(
        net, 3, stride=1, padding="same", scope=f"{s}/Branch_3/AvgPool_0a_3x3"
    )
    branch_3 = conv(branch_3, 64, 1, f"{s}/Branch_3/Conv2d_0b_1x1")
    return concat([branch_0, branch_1, branch_2, branch_3], scope=f"{s}/concat")


def _mixed_6a(net, conv, padding, atrous):
    """33 x 33 x 1088 with output_stride 8, 17 x 17 x 1088 with 16."""
    s = "Mixed_6a"
    stride = 1 if atrous else 2
    branch_0 = conv(
        net,
        384,
        3,
        f"{s}/Branch_0/Conv2d_1a_3x3",
        stride=stride,
        padding=padding,
    )
    branch_1 = conv(net, 256, 1, f"{s}/Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(branch_1, 256, 3, f"{s}/Branch_1/Conv2d_0b_3x3")
    branch_1 = conv(
        branch_1,
        384,
        3,
        f"{s}/Branch_1/Conv2d_1a_3x3",
        stride=stride,
        padding=padding,
    )
    branch_2 = max_pool2d(
        net,
        3,
        stride=stride,
        padding=padding,
        scope=f"{s}/Branch_2/MaxPool_1a_3x3",
    )
    return concat([branch_0, branch_1, branch_2], scope=f"{s}/concat")


def _mixed_7a(net, conv, padding):
    """8 x 8 x 2080."""
    s = "Mixed_7a"
    branch_0 = conv(net, 256, 1, f"{s}/Branch_0/Conv2d_0a_1x1")
    branch_0 = conv(
        branch_0,
        384,
        3,
        f"{s}/Branch_0/Conv2d_1a_3x3",
        stride=2,
        padding=padding,
    )
    branch_1 = conv(net, 256, 1, f"{s}/Branch_1/Conv2d_0a_1x1")
    branch_1 = conv(
        branch_1,
        288,
        3,
        f"{s}/Branch_1/Conv2d_1a_3x3",
        stride=2,
        padding=padding,
    )
    branch_2 = conv(net, 256, 1, f"{s}/Branch_2/Conv2d_0a_1x1")
    branch_2 = conv(branch_2, 288, 3, f"{s}/Branch_2/Conv2d_0b_3x3")
    branch_2 = conv(
        branch_2,
        320,
        3,
        f"{s}/Branch_2/Conv2d_1a_3x3",
        stride=2,
        padding=padding,
    )
    branch_3 = max_pool2d(
        net, 3, padding=padding, scope=f"{s}/Branch_3/MaxPool_1a_3x3"
    )
    return concat([branch_0, branch_1, branch_2, branch_3], scope=f"{s}/concat")


def inception_resnet_v2(
    inputs,
    num_classes=1001,
    dropout_keep_prob=0.8,
    create_aux_logits=True,
    activation_fn="relu",
    *,
    sc=None,
):
    """Inception-ResNet-v2 (TF-Slim's `inception_resnet_v2`).

    Args:
        inputs: A Keras tensor `[batch, 299, 299, channels]` (at least
            107 pixels with the auxiliary head, 75 without).
        num_classes: The logits; `None` or 0 for the pooled features
            `[batch, 1, 1, 1536]` (`global_pool`, before dropout), and no
            auxiliary head.
        dropout_keep_prob: The keep probability before the logits.
        create_aux_logits: Whether to add the auxiliary head on
            `PreAuxLogits` (`end_points["AuxLogits"]`).
        activation_fn: The activation after each residual sum.
        sc: The `ArgScope`; `inception_resnet_v2_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (end points of the base, `AuxLogits`, `global_pool`,
        `PreLogitsFlatten`, `Logits`, `Predictions`).
    """
    sc = dataclasses.replace(
        sc or inception_resnet_v2_arg_scope(), padding="same"
    )
    conv = _convs(None, sc)
    net, end_points = inception_resnet_v2_base(
        inputs, activation_fn=activation_fn, sc=sc
    )
    if create_aux_logits and num_classes:
        aux = avg_pool2d(
            end_points["PreAuxLogits"],
            5,
            stride=3,
            scope="AuxLogits/Conv2d_1a_3x3",
        )
        aux = conv(aux, 128, 1, "AuxLogits/Conv2d_1b_1x1")
        aux = conv(
            aux, 768, aux.shape[1:3], "AuxLogits/Conv2d_2a_5x5", padding="valid"
        )
        aux = flatten(aux, scope="AuxLogits/Flatten")
        end_points["AuxLogits"] = fully_connected(
            aux,
            num_classes,
            scope="AuxLogits/Logits",
            sc=sc,
            regularize_biases=True,
        )
    # TF-Slim's `AvgPool_1a_8x8` over the whole map.
    net = _slim.global_pool(net, scope="Logits/AvgPool_1a_8x8")
    end_points["global_pool"] = net
    if not num_classes:
        return net, end_points
    net = flatten(net, scope="Logits/Flatten")
    net = _slim.dropout(net, dropout_keep_prob, scope="Logits/Dropout")
    end_points["PreLogitsFlatten"] = net
    logits = fully_connected(
        net, num_classes, scope="Logits/Logits", sc=sc, regularize_biases=True
    )
    end_points["Logits"] = logits
    end_points["Predictions"] = keras.layers.Softmax(
        name=name_of("Logits/Predictions")
    )(logits)
    return logits, end_points
