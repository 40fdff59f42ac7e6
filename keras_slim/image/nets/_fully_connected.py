"""TF-Slim's `slim.flatten` and `slim.fully_connected` in Keras layers,
for the logits of inception_v4 and inception_resnet_v2 and the layers of
lenet and cifarnet (the other nets' logits are 1x1 convolutions,
`_slim.conv2d`).
"""

import keras

from keras_slim.image.nets._slim import activate
from keras_slim.image.nets._slim import name_of


def flatten(net, *, scope):
    """`slim.flatten`: `[N, ...]` -> `[N, k]`."""
    return keras.layers.Flatten(name=name_of(scope))(net)


def fully_connected(
    net, num_outputs, *, scope, sc, activation=None, regularize_biases=False
):
    """`slim.fully_connected(net, num_outputs, activation_fn=activation)`.

    Args:
        net: A `[N, k]` tensor.
        num_outputs: The outputs.
        scope: Its TF-Slim scope, below the net's.
        sc: The net's `ArgScope` (its weight decay and initializers).
        activation: `"relu"`, `"relu6"` or `None` (the logits').
            Defaults to `None`.
        regularize_biases: Whether the biases get the weight decay too
            (inception_resnet_v2's arg scope sets `biases_regularizer`).

    Returns:
        The `[N, num_outputs]` tensor.
    """
    net = keras.layers.Dense(
        num_outputs,
        kernel_initializer=sc.weights_initializer,
        bias_initializer=sc.biases_initializer,
        kernel_regularizer=sc.regularizer(),
        bias_regularizer=sc.regularizer() if regularize_biases else None,
        name=name_of(scope),
    )(net)
    return activate(net, activation, scope)
