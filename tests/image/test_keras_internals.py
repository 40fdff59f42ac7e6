"""Every private Keras internal the image app touches, pinned and checked.

`keras_slim/image/_keras.py` is the image app's one module reaching into
Keras (its augmentations' stateless seeds and RandAugment's chosen
operations), as `keras_slim/_keras.py` is the library's
(tests/test_keras_internals.py). When the `keras==3.15.*` pin moves,
these tests say which internal changed.
"""

import inspect

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image import _keras


def test_every_name_of_the_internals_module_is_pinned_here():
    """Each name in the module's `__all__` is used by a test below."""
    source = inspect.getsource(
        inspect.getmodule(
            test_every_name_of_the_internals_module_is_pinned_here
        )
    )
    unpinned = [
        name for name in _keras.__all__ if f"_keras.{name}(" not in source
    ]
    assert not unpinned, unpinned


def test_random_layers_draw_from_a_stateless_seed_tensor():
    """Keras's `draw_seed` refuses a tensor seed and calls `next()` on a
    `SeedGenerator`: `StatelessSeeds` (no state variable) is one, whose
    draws are functions of its seed tensor. `RandAugment` ignores the
    `seed` of `get_random_transformation` (it draws from its
    `generator`): `random_transformation` sets that too."""
    from keras.src.random.seed_generator import draw_seed

    with pytest.raises(ValueError, match="Argument `seed` must be either"):
        draw_seed(tf.constant([1, 2]))
    seeds = _keras.StatelessSeeds(tf.constant([1, 2], tf.int64))
    assert not hasattr(seeds, "state")
    first = [draw_seed(seeds).numpy() for _ in range(2)]
    again = _keras.StatelessSeeds(tf.constant([1, 2], tf.int64))
    np.testing.assert_array_equal(first, [draw_seed(again) for _ in range(2)])
    assert not np.array_equal(*first)

    layer = keras.layers.RandAugment(value_range=(0, 1), num_ops=3)
    images = tf.random.stateless_uniform([1, 8, 8, 3], [0, 1])

    def ops(seed, through_keras_argument=False):
        seeds = _keras.StatelessSeeds(tf.constant(seed, tf.int64))
        if through_keras_argument:
            change = layer.get_random_transformation(images, seed=seeds)
        else:
            change = _keras.random_transformation(layer, images, seeds)
        return change["layer_idxes"].numpy().tolist()

    drawn = {tuple(ops([0, k])) for k in range(8)}
    assert [ops([0, k]) for k in range(8)] == [ops([0, k]) for k in range(8)]
    assert len(drawn) > 1
    # Keras's own argument leaves the draws to the layer's generator.
    assert {tuple(ops([0, 0], True)) for _ in range(8)} != {tuple(ops([0, 0]))}
    assert layer.generator is not None and hasattr(layer.generator, "state")
    assert len(_keras.rand_augment_ops()) == 11


def test_running_only_the_chosen_ops_is_keras_rand_augment():
    """Keras's `transform_images` runs every operation and keeps the
    chosen; running only the chosen gives its images."""
    layer = keras.layers.RandAugment(value_range=(0, 255), factor=0.9)
    images = np.random.default_rng(2).integers(0, 256, (1, 20, 20, 3))
    images = tf.constant(images, tf.float32)
    chosen = set()
    for k in range(16):
        seeds = _keras.StatelessSeeds(tf.constant([0, k], tf.int64))
        change = _keras.random_transformation(layer, images, seeds)
        chosen.update(change["layer_idxes"].numpy().tolist())
        np.testing.assert_array_equal(
            _keras.rand_augment_chosen(layer, images, change),
            layer.transform_images(images, change),
        )
    assert len(chosen) >= 8  # most of the 11 operations
