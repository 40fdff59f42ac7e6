"""TF-Slim's preprocessing_factory, in TensorFlow ops for tf.data.

`get_preprocessing(name, is_training=..., image_size=...)` returns a
function of one image, as TF-Slim's `preprocessing_factory` did, to map
over a `tf.data.Dataset`:

- `"inception"`: TF-Slim's `inception_preprocessing`, without its color
  distortion. Training: a random crop covering 5% to 100% of the image
  with an aspect ratio in [3/4, 4/3] (`tf.image`'s distorted bounding
  box, with TF-Slim's `min_object_covered=0.1`), resized, randomly
  flipped left-right. Eval: the central 87.5%, resized. Both end in
  [-1, 1].
- `"vgg"`: TF-Slim's `vgg_preprocessing`: the smaller side resized to
  `256 / 224 * image_size` (aspect ratio kept), then a random crop and a
  random left-right flip (training) or the central crop (eval), minus
  the ImageNet channel means (123.68, 116.78, 103.94) on a 0-255 scale.
- `"digits"`: resized, in [0, 1], no augmentation.

Randomness is stateless (`tf.random.stateless_*`, `tf.image.stateless_*`):
the same `seed` gives the same crop and flip, so a pipeline that passes a
seed per element (`keras_slim.image_data` passes `[seed, element
index]`) is reproducible. Without a seed, one is drawn from TensorFlow's
global generator (`tf.random.uniform`), so two calls differ.

Integer images (uint8 from `tf.io.decode_image`) are scaled by their
dtype's maximum, as `tf.image.convert_image_dtype` would; float images
are taken to be in [0, 1] already.
"""

import tensorflow as tf

from keras_slim import _validation

PREPROCESSING = ("inception", "vgg", "digits")

# ImageNet's channel means (R, G, B) on a 0-255 scale, as TF-Slim's
# vgg_preprocessing subtracts them.
VGG_MEANS = (123.68, 116.78, 103.94)

_INCEPTION_CENTRAL_FRACTION = 0.875
_INCEPTION_AREA_RANGE = (0.05, 1.0)
_INCEPTION_ASPECT_RANGE = (3.0 / 4.0, 4.0 / 3.0)
_INCEPTION_MIN_OBJECT_COVERED = 0.1
_VGG_RESIZE_RATIO = 256.0 / 224.0


def get_preprocessing(name, *, is_training, image_size):
    """Returns TF-Slim's preprocessing function named `name`.

    Args:
        name: One of `PREPROCESSING`: `"inception"`, `"vgg"` or
            `"digits"`.
        is_training: Boolean. Training preprocessing augments (random
            crops and flips, except `"digits"`); eval preprocessing is
            deterministic.
        image_size: Positive integer: the side of the square images
            returned.

    Returns:
        A function `preprocess(image, seed=None)`: `image` is a uint8 (or
        float in [0, 1]) `[height, width, channels]` tensor, `seed` an
        optional `[2]` integer tensor for the stateless random ops (drawn
        from the global generator when `None`); it returns a float32
        `[image_size, image_size, channels]` tensor.

    Raises:
        ValueError: if `name` is not one of `PREPROCESSING`, `is_training`
            is not a bool or `image_size` not a positive integer.

    Example:
    ```python
    preprocess = get_preprocessing(
        "inception", is_training=True, image_size=224
    )
    dataset = dataset.map(lambda image, label: (preprocess(image), label))
    ```
    """
    if name not in PREPROCESSING:
        raise _validation.invalid(
            "name", name, f"one of {', '.join(map(repr, PREPROCESSING))}"
        )
    _validation.boolean("is_training", is_training)
    size = _validation.positive_int("image_size", image_size)
    body = {"inception": _inception, "vgg": _vgg, "digits": _digits}[name]

    def preprocess(image, seed=None):
        image = tf.convert_to_tensor(image)
        channels = image.shape[-1]
        if is_training and name != "digits":
            seed = _seed(seed)
        image = body(image, seed, is_training, size)
        image.set_shape([size, size, channels])
        return image

    preprocess.__name__ = f"{name}_{'train' if is_training else 'eval'}"
    return preprocess


def _seed(seed):
    """A `[2]` int32 seed for the stateless ops: `seed`, or a random one."""
    if seed is None:
        return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int32)
    return tf.cast(tf.convert_to_tensor(seed), tf.int32)


def _resize(image, height, width):
    """Bilinear resize to float32 on the image's own scale."""
    resized = tf.image.resize(image, tf.stack([height, width]), "bilinear")
    return tf.cast(resized, tf.float32)


def _unit_scale(dtype):
    """The factor that brings images of `dtype` to [0, 1]."""
    return 1.0 / dtype.max if dtype.is_integer else 1.0


def _inception(image, seed, is_training, size):
    # Crop and resize on the decoded values, then scale: fewer ops on
    # the full image than TF-Slim's convert first, the same result.
    scale = _unit_scale(image.dtype)
    if is_training:
        box_seed, flip_seed = tf.unstack(
            tf.random.experimental.stateless_split(seed, 2)
        )
        begin, crop, _ = tf.image.stateless_sample_distorted_bounding_box(
            tf.shape(image),
            bounding_boxes=tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
            seed=box_seed,
            min_object_covered=_INCEPTION_MIN_OBJECT_COVERED,
            aspect_ratio_range=_INCEPTION_ASPECT_RANGE,
            area_range=_INCEPTION_AREA_RANGE,
            max_attempts=100,
            use_image_if_no_bounding_boxes=True,
        )
        image = _resize(tf.slice(image, begin, crop), size, size)
        image = tf.image.stateless_random_flip_left_right(image, flip_seed)
    else:
        image = tf.image.central_crop(image, _INCEPTION_CENTRAL_FRACTION)
        image = _resize(image, size, size)
    return image * (2.0 * scale) - 1.0


def _smaller_side_to(image, side):
    """Resizes `image` so that its smaller side is `side`, aspect kept."""
    shape = tf.shape(image)
    height = tf.cast(shape[0], tf.float32)
    width = tf.cast(shape[1], tf.float32)
    scale = tf.cast(side, tf.float32) / tf.minimum(height, width)
    new_height = tf.maximum(tf.cast(tf.round(height * scale), tf.int32), side)
    new_width = tf.maximum(tf.cast(tf.round(width * scale), tf.int32), side)
    return _resize(image, new_height, new_width)


def _vgg(image, seed, is_training, size):
    channels = image.shape[-1]
    scale = 255.0 * _unit_scale(image.dtype)
    image = _smaller_side_to(image, round(size * _VGG_RESIZE_RATIO)) * scale
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


def _digits(image, seed, is_training, size):
    del seed, is_training  # No augmentation.
    return _resize(image, size, size) * _unit_scale(image.dtype)
