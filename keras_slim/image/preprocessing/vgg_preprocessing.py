"""TF-Slim's `vgg_preprocessing`, in stateless TensorFlow ops."""

import typing

import tensorflow as tf

from keras_slim import checks
from keras_slim.image.preprocessing import _image_ops

_R_MEAN = 123.68
_G_MEAN = 116.78
_B_MEAN = 103.94

#: ImageNet's channel means (R, G, B) on a 0-255 scale, as TF-Slim's
#: vgg_preprocessing subtracts them.
VGG_MEANS = (_R_MEAN, _G_MEAN, _B_MEAN)

_RESIZE_SIDE_MIN = 256
_RESIZE_SIDE_MAX = 512


class TrainDraws(typing.NamedTuple):
    """The random values of `preprocess_for_train` (int32 / bool scalars).

    Attributes:
        resize_side: The smaller side after the resize, in
            [`resize_side_min`, `resize_side_max`].
        offset_height: The crop's top row in the resized image, in
            [0, resized height - output height].
        offset_width: The crop's left column, in [0, resized width -
            output width].
        flip: Flipped left-right.
    """

    resize_side: tf.Tensor
    offset_height: tf.Tensor
    offset_width: tf.Tensor
    flip: tf.Tensor


def _smallest_size_at_least(height, width, smallest_side):
    """TF-Slim's new size: the smaller side `smallest_side`, the other
    scaled in float32 and rounded half to even (`tf.math.rint`)."""
    height = tf.cast(height, tf.float32)
    width = tf.cast(width, tf.float32)
    side = tf.cast(smallest_side, tf.float32)
    scale = tf.where(height > width, side / width, side / height)
    new_height = tf.cast(tf.math.rint(height * scale), tf.int32)
    new_width = tf.cast(tf.math.rint(width * scale), tf.int32)
    return new_height, new_width


def _aspect_preserving_resize(image, smallest_side):
    """The image resized by TF1's `resize_bilinear`, aspect kept."""
    shape = tf.shape(image)
    new_height, new_width = _smallest_size_at_least(
        shape[0], shape[1], smallest_side
    )
    return _image_ops.resize(image, new_height, new_width)


def _crop(image, offset_height, offset_width, crop_height, crop_width):
    """`tf.slice` of the crop, checked to fit as TF-Slim's `_crop`."""
    shape = tf.shape(image)
    fits = tf.debugging.assert_greater_equal(
        shape[:2],
        tf.stack([crop_height, crop_width]),
        message="Crop size greater than the image size (vgg_preprocessing: "
        "the crop must fit in the resized image).",
    )
    with tf.control_dependencies([fits]):
        offsets = tf.stack([offset_height, offset_width, 0])
    return tf.slice(image, offsets, tf.stack([crop_height, crop_width, -1]))


def _mean_image_subtraction(image, means):
    """`image` minus `means[i]` in channel `i` (float32)."""
    return image - tf.constant(means, tf.float32)


def _check_rgb(image, use_grayscale):
    _image_ops.require_rgb(image, "vgg_preprocessing (3 channel means)")
    if use_grayscale:
        raise checks.invalid(
            "use_grayscale",
            use_grayscale,
            "False for vgg_preprocessing, which subtracts a mean from each "
            "of 3 channels (TF-Slim's raises 'len(means) must match the "
            "number of channels' for one gray channel)",
        )


def train_draws(
    seed,
    shape,
    output_height,
    output_width,
    resize_side_min=_RESIZE_SIDE_MIN,
    resize_side_max=_RESIZE_SIDE_MAX,
):
    """The random values of `preprocess_for_train`, from one seed.

    Args:
        seed: A `[2]` integer tensor, split in 4 (`stateless_split`): the
            side, the two offsets, the flip.
        shape: The image's shape, int32 `[3]`.
        output_height: The crop's height.
        output_width: The crop's width.
        resize_side_min: The smallest side drawn. Defaults to `256`.
        resize_side_max: The largest side drawn. Defaults to `512`.

    Returns:
        A `TrainDraws`. The offsets are drawn in the resized image's size
        (where the crop does not fit they are 0, and `apply_train` raises).

    Example:
    ```python
    draws = train_draws(tf.constant([0, 7]), tf.constant([300, 400, 3]),
                        224, 224)
    ```
    """
    side, top, left, flip = _image_ops.split_seed(seed, 4)
    resize_side = _image_ops.uniform_int(
        side, resize_side_min, resize_side_max + 1
    )
    new_height, new_width = _smallest_size_at_least(
        shape[0], shape[1], resize_side
    )
    return TrainDraws(
        resize_side=resize_side,
        offset_height=_image_ops.uniform_int(
            top, 0, tf.maximum(new_height - output_height + 1, 1)
        ),
        offset_width=_image_ops.uniform_int(
            left, 0, tf.maximum(new_width - output_width + 1, 1)
        ),
        flip=_image_ops.coin(flip),
    )


def apply_train(image, draws, output_height, output_width):
    """`preprocess_for_train`'s pixel ops, given its random values.

    Args:
        image: A `[height, width, 3]` image on a 0-255 scale.
        draws: A `TrainDraws`.
        output_height: The crop's height.
        output_width: The crop's width.

    Returns:
        A float32 `[output_height, output_width, 3]` image, minus the
        channel means.

    Raises:
        InvalidArgumentError: (when run) if the crop does not fit in the
            resized image.

    Example:
    ```python
    draws = train_draws(tf.constant([0, 7]), tf.shape(image), 224, 224)
    image = apply_train(image, draws, 224, 224)
    ```
    """
    image = _aspect_preserving_resize(image, draws.resize_side)
    image = _crop(
        image,
        draws.offset_height,
        draws.offset_width,
        output_height,
        output_width,
    )
    image = _image_ops.flip_left_right(tf.cast(image, tf.float32), draws.flip)
    image = _mean_image_subtraction(image, VGG_MEANS)
    return _image_ops.finish(image, output_height, output_width, 3)


def preprocess_for_train(
    image,
    output_height,
    output_width,
    resize_side_min=_RESIZE_SIDE_MIN,
    resize_side_max=_RESIZE_SIDE_MAX,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `preprocess_for_train`: random side, crop, flip, means.

    Args:
        image: A `[height, width, 3]` image on a 0-255 scale (uint8 as
            decoded).
        output_height: The crop's height.
        output_width: The crop's width.
        resize_side_min: The smallest side drawn. Defaults to `256`.
        resize_side_max: The largest side drawn. Defaults to `512`.
        use_grayscale: Must be `False` (see Raises). Defaults to `False`.
        seed: A `[2]` integer seed for the stateless draws; `None` draws
            one from the global generator. Defaults to `None`.

    Returns:
        A float32 `[output_height, output_width, 3]` image, minus the
        channel means.

    Raises:
        ValueError: if `image` does not have 3 channels or
            `use_grayscale` is `True` (3 channel means; TF-Slim raises
            too), for a bad `seed`.

    Example:
    ```python
    image = preprocess_for_train(image, 224, 224, seed=[0, 7])
    ```
    """
    image = tf.convert_to_tensor(image)
    _check_rgb(image, use_grayscale)
    draws = train_draws(
        _image_ops.seed_of(seed),
        tf.shape(image),
        output_height,
        output_width,
        resize_side_min,
        resize_side_max,
    )
    return apply_train(image, draws, output_height, output_width)


def preprocess_for_eval(
    image, output_height, output_width, resize_side, use_grayscale=False
):
    """TF-Slim's `preprocess_for_eval`: resize, central crop, means.

    Args:
        image: A `[height, width, 3]` image on a 0-255 scale.
        output_height: The crop's height.
        output_width: The crop's width.
        resize_side: The smaller side after the resize.
        use_grayscale: Must be `False` (see Raises). Defaults to `False`.

    Returns:
        A float32 `[output_height, output_width, 3]` image, minus the
        channel means.

    Raises:
        ValueError: if `image` does not have 3 channels or
            `use_grayscale` is `True`.
        InvalidArgumentError: (when run) if the crop is larger than the
            resized image.

    Example:
    ```python
    image = preprocess_for_eval(image, 224, 224, 256)
    ```
    """
    image = tf.convert_to_tensor(image)
    _check_rgb(image, use_grayscale)
    image = _aspect_preserving_resize(image, resize_side)
    shape = tf.shape(image)
    image = _crop(
        image,
        (shape[0] - output_height) // 2,
        (shape[1] - output_width) // 2,
        output_height,
        output_width,
    )
    image = _mean_image_subtraction(tf.cast(image, tf.float32), VGG_MEANS)
    return _image_ops.finish(image, output_height, output_width, 3)


def preprocess_image(
    image,
    output_height,
    output_width,
    is_training=False,
    resize_side_min=_RESIZE_SIDE_MIN,
    resize_side_max=_RESIZE_SIDE_MAX,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `vgg_preprocessing.preprocess_image`.

    Args:
        image: A `[height, width, 3]` image on a 0-255 scale.
        output_height: The output height.
        output_width: The output width.
        is_training: Boolean: `preprocess_for_train`, else
            `preprocess_for_eval`. Defaults to `False`.
        resize_side_min: Training: the smallest side drawn; eval: the
            side. Defaults to `256`.
        resize_side_max: Training: the largest side drawn. Defaults to
            `512`.
        use_grayscale: Must be `False` (3 channel means). Defaults to
            `False`.
        seed: A `[2]` integer seed for training's stateless draws; `None`
            draws one from the global generator. Defaults to `None`.

    Returns:
        A float32 `[output_height, output_width, 3]` image.

    Raises:
        ValueError: if `image` does not have 3 channels or
            `use_grayscale` is `True`, for a bad `seed`.

    Example:
    ```python
    image = preprocess_image(image, 224, 224, True, seed=[0, 7])
    ```
    """
    if is_training:
        return preprocess_for_train(
            image,
            output_height,
            output_width,
            resize_side_min,
            resize_side_max,
            use_grayscale,
            seed=seed,
        )
    return preprocess_for_eval(
        image, output_height, output_width, resize_side_min, use_grayscale
    )
