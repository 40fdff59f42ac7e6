"""TF-Slim's `vgg_preprocessing`.

The smaller side resized to `256 / 224 * image_size` (aspect ratio kept),
then a random crop and a random left-right flip (training) or the central
crop (eval), minus the ImageNet channel means (123.68, 116.78, 103.94) on
a 0-255 scale.
"""

import tensorflow as tf

from keras_slim.image.preprocessing import _image_ops

# ImageNet's channel means (R, G, B) on a 0-255 scale, as TF-Slim's
# vgg_preprocessing subtracts them.
VGG_MEANS = (123.68, 116.78, 103.94)

_RESIZE_RATIO = 256.0 / 224.0


def _smaller_side_to(image, side):
    """Resizes `image` so that its smaller side is `side`, aspect kept."""
    shape = tf.shape(image)
    height = tf.cast(shape[0], tf.float32)
    width = tf.cast(shape[1], tf.float32)
    scale = tf.cast(side, tf.float32) / tf.minimum(height, width)
    new_height = tf.maximum(tf.cast(tf.round(height * scale), tf.int32), side)
    new_width = tf.maximum(tf.cast(tf.round(width * scale), tf.int32), side)
    return _image_ops.resize(image, new_height, new_width)


def preprocess_image(image, seed, is_training, size):
    """TF-Slim's vgg preprocessing of one image (see the module)."""
    channels = image.shape[-1]
    scale = 255.0 * _image_ops.unit_scale(image.dtype)
    image = _smaller_side_to(image, round(size * _RESIZE_RATIO)) * scale
    depth = channels if channels is not None else tf.shape(image)[-1]
    if is_training:
        crop_seed, flip_seed = tf.unstack(
            tf.random.experimental.stateless_split(seed, 2)
        )
        image = tf.image.stateless_random_crop(
            image, tf.stack([size, size, depth]), crop_seed
        )
        image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    else:
        shape = tf.shape(image)
        top = (shape[0] - size) // 2
        left = (shape[1] - size) // 2
        image = tf.slice(image, tf.stack([top, left, 0]), [size, size, -1])
    return image - tf.constant(VGG_MEANS, tf.float32)
