"""TF-Slim's CifarNet (research/slim nets/cifarnet.py): `cifarnet`."""

import dataclasses

from keras_slim.image.nets import _slim
from keras_slim.image.nets._fully_connected import flatten
from keras_slim.image.nets._fully_connected import fully_connected
from keras_slim.image.nets._local_response_norm import (
    LocalResponseNormalization,
)
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d


def cifarnet_arg_scope(weight_decay=0.004):
    """TF-Slim's `cifarnet_arg_scope`, one `ArgScope` per layer type as
    TF-Slim's nested `arg_scope`s set them: convolutions with truncated
    normal weights (stddev 0.05) and no weight decay; fully connected
    layers with truncated normal weights (stddev 0.04), biases of 0.1
    and the weight decay; ReLU for both.

    Args:
        weight_decay: The L2 factor of the fully connected weights.

    Returns:
        `{"conv2d": ArgScope, "fully_connected": ArgScope}`.

    Example:
    ```python
    logits, end_points = cifarnet(images, 10, sc=cifarnet_arg_scope(0.0))
    ```
    """
    return {
        "conv2d": _slim.ArgScope(
            weights_initializer=_slim.truncated_normal(5e-2),
        ),
        "fully_connected": _slim.ArgScope(
            weight_decay=weight_decay,
            weights_initializer=_slim.truncated_normal(0.04),
            biases_initializer={
                "class_name": "Constant",
                "config": {"value": 0.1},
            },
        ),
    }


def _lrn(net, name):
    """`tf.nn.lrn(net, 4, bias=1.0, alpha=0.001/9.0, beta=0.75)`."""
    return LocalResponseNormalization(
        4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name
    )(net)


def cifarnet(
    images,
    num_classes=10,
    dropout_keep_prob=0.5,
    prediction_fn=_slim.softmax,
    *,
    sc=None,
):
    """TF-Slim's `cifarnet`.

    Args:
        images: A Keras tensor `[batch, 32, 32, channels]` (other sides
            of at least 4 build too, with another `fc3`).
        num_classes: The logits; `None` or 0 for `fc4`'s features.
        dropout_keep_prob: The keep probability of `dropout3`.
        prediction_fn: A function `(logits, scope)` of the `Predictions`
            end point.
        sc: The arg scopes of `cifarnet_arg_scope`, the default.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (`conv1`, `pool1`, `conv2`, `pool2`, `Flatten`, `fc3`, `fc4`,
        `Logits`, `Predictions`).

    Example:
    ```python
    images = keras.Input((32, 32, 3))
    logits, end_points = cifarnet(images, 10)
    ```
    """
    sc = sc or cifarnet_arg_scope()
    conv, fc = sc["conv2d"], sc["fully_connected"]
    end_points = {}

    def add(name, net):
        end_points[name] = net
        return net

    net = add("conv1", conv2d(images, 64, [5, 5], scope="conv1", sc=conv))
    net = add("pool1", max_pool2d(net, [2, 2], stride=2, scope="pool1"))
    net = _lrn(net, "norm1")
    net = add("conv2", conv2d(net, 64, [5, 5], scope="conv2", sc=conv))
    net = _lrn(net, "norm2")
    net = add("pool2", max_pool2d(net, [2, 2], stride=2, scope="pool2"))
    net = add("Flatten", flatten(net, scope="Flatten"))
    net = add(
        "fc3",
        fully_connected(net, 384, scope="fc3", sc=fc, activation=fc.activation),
    )
    net = _slim.dropout(net, dropout_keep_prob, scope="dropout3")
    net = add(
        "fc4",
        fully_connected(net, 192, scope="fc4", sc=fc, activation=fc.activation),
    )
    if not num_classes:
        return net, end_points
    logits_sc = dataclasses.replace(
        fc,
        weight_decay=0.0,
        weights_initializer=_slim.truncated_normal(1 / 192.0),
        biases_initializer="zeros",
    )
    logits = add(
        "Logits",
        fully_connected(net, num_classes, scope="logits", sc=logits_sc),
    )
    end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points
