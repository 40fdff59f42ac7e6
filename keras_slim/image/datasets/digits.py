"""The command line's default dataset: scikit-learn's 8x8 digits."""

import numpy as np
import tensorflow as tf

from keras_slim.image.datasets import _augment

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


def dataset_fn(x, y, batch_size, num_classes, seed=0, augmentation=None):
    """A dataset function: shuffled, repeated, one-hot labels, batched.

    Each input pipeline (a worker under parameter servers) shuffles with
    its own seed. An `_augment.Augmentation` adds RandAugment on each
    image (range (0, 1)) and MixUp / CutMix on each batch, seeded by
    their position in the stream as in `datasets.load`.
    """

    def make(input_context=None):
        pipeline = input_context.input_pipeline_id if input_context else 0
        data = tf.data.Dataset.from_tensor_slices(
            (x, tf.one_hot(y, num_classes))
        )
        data = data.shuffle(len(x), seed=seed + pipeline)
        data = _augment.augment_images(
            data.repeat(), augmentation, seed + pipeline, (0, 1)
        )
        data = data.batch(batch_size, drop_remainder=True)
        return _augment.mix_batches(data, augmentation, seed + pipeline)

    return make
