"""Every private Keras internal the image app's augmentations touch."""

import keras
import tensorflow as tf
from keras.src.random.seed_generator import SeedGenerator

__all__ = [
    "StatelessSeeds",
    "rand_augment_chosen",
    "rand_augment_ops",
    "random_transformation",
]


class StatelessSeeds(SeedGenerator):
    """A `keras.random.SeedGenerator` without a state variable: each
    `next()` is `tf.random.experimental.stateless_fold_in(seed, n)` for
    the `n`-th draw, so a layer's random ops in a `tf.data` map are
    stateless functions of a seed tensor (`[seed, position]`): the
    iterator's state can be saved and a resumed run draws what the
    uninterrupted one drew. Keras's `draw_seed` refuses a tensor seed and
    calls `next()` on a `SeedGenerator` (pinned); a real one's state is a
    variable, a stateful op iterator checkpointing refuses.

    Args:
        seed: An int64 `[2]` tensor.
    """

    def __init__(self, seed):
        # No `super().__init__()`: it makes the state variable.
        self._seed = tf.cast(seed, tf.int64)
        self._draws = 0

    def next(self, ordered=True):
        del ordered
        self._draws += 1
        return tf.random.experimental.stateless_fold_in(self._seed, self._draws)


def random_transformation(layer, data, seeds):
    """`layer.get_random_transformation(data, training=True, seed=seeds)`,
    drawn from `seeds` also for layers that ignore that `seed` and draw
    from their `generator` (`RandAugment`, for its choice of ops and its
    sub-layers' draws: `_get_seed_generator` returns it; pinned).

    Args:
        layer: A Keras image preprocessing layer.
        data: The images, batched.
        seeds: A `StatelessSeeds`.

    Returns:
        The layer's transformation.
    """
    before = layer.generator
    layer.generator = seeds
    try:
        return layer.get_random_transformation(data, training=True, seed=seeds)
    finally:
        layer.generator = before


def rand_augment_chosen(layer, images, change):
    """`RandAugment.transform_images(images, change)`, running only the
    chosen operations: Keras's runs all 11 for each of the `num_ops` and
    keeps one (tf.where). Reads the transformation's `layer_idxes` and
    `transforms` (sub-layer attribute name -> its transformation).

    Args:
        layer: A `keras.layers.RandAugment`.
        images: The images, batched.
        change: The layer's transformation (`random_transformation`'s).

    Returns:
        The transformed images, in the layer's compute dtype.
    """
    names = list(change["transforms"])

    def branch(name):
        sub = getattr(layer, name)
        return lambda x: sub.transform_images(x, change["transforms"][name])

    branches = [branch(name) for name in names]
    for i in range(layer.num_ops):
        index = change["layer_idxes"][i]
        images = tf.switch_case(
            index, [lambda f=f, x=images: f(x) for f in branches]
        )
        images = tf.cast(images, layer.compute_dtype)
    return images


def rand_augment_ops():
    """The names of the operations `keras.layers.RandAugment` chooses from
    (`RandAugment._AUGMENT_LAYERS`).

    Returns:
        A tuple of the operations' names (11 in Keras 3.15).
    """
    return tuple(keras.layers.RandAugment._AUGMENT_LAYERS)
