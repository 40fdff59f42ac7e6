"""TF-Slim's `inception_preprocessing`, without its color distortion.

Training: a random crop covering 5% to 100% of the image with an aspect
ratio in [3/4, 4/3] (`tf.image`'s distorted bounding box, with TF-Slim's
`min_object_covered=0.1`), resized, randomly flipped left-right. Eval:
the central 87.5%, resized. Both end in [-1, 1].
"""

import tensorflow as tf

from keras_slim.image.preprocessing import _image_ops

_CENTRAL_FRACTION = 0.875
_AREA_RANGE = (0.05, 1.0)
_ASPECT_RANGE = (3.0 / 4.0, 4.0 / 3.0)
_MIN_OBJECT_COVERED = 0.1


def preprocess_image(image, seed, is_training, size):
    """TF-Slim's inception preprocessing of one image (see the module)."""
    # Crop and resize on the decoded values, then scale: fewer ops on
    # the full image than TF-Slim's convert first, the same result.
    scale = _image_ops.unit_scale(image.dtype)
    if is_training:
        box_seed, flip_seed = tf.unstack(
            tf.random.experimental.stateless_split(seed, 2)
        )
        begin, crop, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image),
            bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
            seed=box_seed,
            min_object_covered=_MIN_OBJECT_COVERED,
            aspect_ratio_range=_ASPECT_RANGE,
            area_range=_AREA_RANGE,
            max_attempts=100,
            use_image_if_no_bounding_boxes=True,
        )
        image = _image_ops.resize(tf.slice(image, begin, crop), size, size)
        image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    else:
        image = tf.image.central_crop(image, _CENTRAL_FRACTION)
        image = _image_ops.resize(image, size, size)
    return image * (2.0 * scale) - 1.0
