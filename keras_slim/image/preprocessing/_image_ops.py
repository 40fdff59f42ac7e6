"""Image ops TF-Slim's preprocessing functions share: resize, scale, seeds."""

import tensorflow as tf


def seed_of(seed):
    """A `[2]` int32 seed for the stateless ops: `seed`, or a random one."""
    if seed is None:
        return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)
    return tf.cast(tf.convert_to_tensor(seed), tf.int32)


def resize(image, height, width):
    """Bilinear resize to float32 on the image's own scale."""
    resized = tf.image.resize(image, tf.stack([height, width]), "bilinear")
    return tf.cast(resized, tf.float32)


def unit_scale(dtype):
    """The factor that brings images of `dtype` to [0, 1]."""
    return 1.0 / dtype.max if dtype.is_integer else 1.0
