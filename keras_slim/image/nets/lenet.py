"""TF-Slim's LeNet (research/slim nets/lenet.py): `lenet`."""

from keras_slim.image.nets import _slim
from keras_slim.image.nets._fully_connected import flatten
from keras_slim.image.nets._fully_connected import fully_connected
from keras_slim.image.nets._slim import conv2d
from keras_slim.image.nets._slim import max_pool2d


def lenet_arg_scope(weight_decay=0.0):
    """TF-Slim's `lenet_arg_scope`: for convolutions and fully connected
    layers alike, weight decay, truncated normal weights (stddev 0.1),
    ReLU.

    Args:
        weight_decay: The L2 factor of the weights.

    Returns:
        An `ArgScope`.

    Example:
    ```python
    logits, end_points = lenet(images, 10, sc=lenet_arg_scope(0.0005))
    ```
    """
    return _slim.ArgScope(
        weight_decay=weight_decay,
        weights_initializer=_slim.truncated_normal(0.1),
    )


def lenet(
    images,
    num_classes=10,
    dropout_keep_prob=0.5,
    prediction_fn=_slim.softmax,
    *,
    sc=None,
):
    """TF-Slim's `lenet`.

    Args:
        images: A Keras tensor `[batch, 28, 28, channels]` (other sides
            of at least 4 build too, with another `fc3`).
        num_classes: The logits; `None` or 0 for `fc3`'s features
            (before dropout).
        dropout_keep_prob: The keep probability of `dropout3`.
        prediction_fn: A function `(logits, scope)` of the `Predictions`
            end point.
        sc: The `ArgScope`; `lenet_arg_scope()` when `None`.

    Returns:
        `(logits, end_points)`: Keras tensors, as TF-Slim returns them
        (`conv1`, `pool1`, `conv2`, `pool2`, `Flatten`, `fc3`,
        `dropout3`, `Logits`, `Predictions`).

    Example:
    ```python
    images = keras.Input((28, 28, 1))
    logits, end_points = lenet(images, 10)
    ```
    """
    sc = sc or lenet_arg_scope()
    end_points = {}

    def add(name, net):
        end_points[name] = net
        return net

    net = add("conv1", conv2d(images, 32, [5, 5], scope="conv1", sc=sc))
    net = add("pool1", max_pool2d(net, [2, 2], stride=2, scope="pool1"))
    net = add("conv2", conv2d(net, 64, [5, 5], scope="conv2", sc=sc))
    net = add("pool2", max_pool2d(net, [2, 2], stride=2, scope="pool2"))
    net = add("Flatten", flatten(net, scope="Flatten"))
    net = add(
        "fc3",
        fully_connected(
            net, 1024, scope="fc3", sc=sc, activation=sc.activation
        ),
    )
    if not num_classes:
        return net, end_points
    net = add(
        "dropout3", _slim.dropout(net, dropout_keep_prob, scope="dropout3")
    )
    logits = add(
        "Logits", fully_connected(net, num_classes, scope="fc4", sc=sc)
    )
    end_points["Predictions"] = prediction_fn(logits, scope="Predictions")
    return logits, end_points
