"""The command line's small CNN for 8x8 digits (`digits_cnn`, the default)."""

import keras


def network(num_classes, weight_decay=0.0, *, synchronized=True):
    """The layers of the small CNN, as a function of the input tensor.

    Its batch norm is synchronized across replicas (Keras's
    `BatchNormalization(synchronized=True)`: the batch statistics are
    all-reduced), so N clones compute the statistics of the global batch
    and train like one device on it; per-replica statistics (TF-Slim's
    clones, `synchronized=False`) make them differ.

    Args:
        num_classes: Positive integer: the logits.
        weight_decay: Non-negative float: the L2 factor (TF-Slim's, halved
            as `tf.nn.l2_loss` was).
            Defaults to `0.0`.
        synchronized: Whether batch norm is synchronized across replicas.
            Defaults to `True`.

    Returns:
        A function of the input tensor returning the logits.
    """
    regularizer = (
        keras.regularizers.L2(weight_decay / 2) if weight_decay else None
    )

    def conv(x, filters, name):
        x = keras.layers.Conv2D(
            filters,
            3,
            padding="same",
            use_bias=False,
            kernel_regularizer=regularizer,
            name=name,
        )(x)
        x = keras.layers.BatchNormalization(
            synchronized=synchronized, name=f"{name}_bn"
        )(x)
        return keras.layers.ReLU()(x)

    def layers(inputs):
        x = conv(inputs, 16, "conv1")
        x = conv(x, 32, "conv2")
        x = keras.layers.MaxPooling2D()(x)
        x = keras.layers.Flatten()(x)
        return keras.layers.Dense(
            num_classes, kernel_regularizer=regularizer, name="logits"
        )(x)

    return layers
