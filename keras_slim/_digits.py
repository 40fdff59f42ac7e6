"""The command line's default dataset and network: 8x8 digits, a small CNN.

scikit-learn's digits ship inside the package (1797 images, 10 classes),
so nothing is downloaded. A fixed, stratified split holds out 20% for the
accuracy the command prints. The network is TF-Slim's kind of small CNN:
conv-BN-relu twice, max-pool, then a dense `logits` layer; the layer names
(`conv1`, `conv2`, `logits`) are the scopes of `--trainable_scopes`,
`--checkpoint_exclude_scopes` and `--freeze`.
"""

import keras
import numpy as np
import tensorflow as tf

NUM_CLASSES = 10


def load(labels=None, seed=0):
    """Returns ((x_train, y_train), (x_test, y_test)) of the digits.

    Args:
        labels: Digits to keep (a list of ints), `None` for all ten; kept
            labels are renumbered 0..k-1 in the given order.
        seed: Seed of the held-out split.

    Returns:
        Images as float32 (n, 8, 8, 1) in [0, 1], labels as int32.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype("float32")[..., None]
    y = digits.target.astype("int32")
    if labels is not None:
        keep = np.isin(y, labels)
        x, y = x[keep], y[keep]
        renumber = {label: i for i, label in enumerate(labels)}
        y = np.array([renumber[int(label)] for label in y], dtype="int32")
    rng = np.random.default_rng(seed)
    test = np.zeros(len(y), dtype=bool)
    for label in np.unique(y):
        where = np.flatnonzero(y == label)
        test[rng.choice(where, size=len(where) // 5, replace=False)] = True
    return (x[~test], y[~test]), (x[test], y[test])


def dataset_fn(x, y, batch_size, num_classes, seed=0):
    """A dataset function: shuffled, repeated, one-hot labels, batched.

    Each input pipeline (a worker under parameter servers) shuffles with
    its own seed.
    """

    def make(input_context=None):
        pipeline = input_context.input_pipeline_id if input_context else 0
        data = tf.data.Dataset.from_tensor_slices(
            (x, tf.one_hot(y, num_classes))
        )
        data = data.shuffle(len(x), seed=seed + pipeline)
        return data.repeat().batch(batch_size, drop_remainder=True)

    return make


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
