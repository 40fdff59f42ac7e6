"""TF-Slim's `cifarnet_preprocessing`, in stateless TensorFlow ops."""

import typing

import tensorflow as tf

from keras_slim.image.preprocessing import _image_ops

_PADDING = 4
_BRIGHTNESS_MAX_DELTA = 63.0
_CONTRAST_RANGE = (0.2, 1.8)


class TrainDraws(typing.NamedTuple):
    """The random values of `preprocess_for_train` (scalars).

    Attributes:
        offset_height: int32: the crop's top row in the padded image, in
            [0, padded height - output height].
        offset_width: int32: the crop's left column.
        flip: bool: flipped left-right.
        brightness: float32: the delta of `adjust_brightness`, in
            [-63, 63).
        contrast: float32: the factor of `adjust_contrast`, in
            [0.2, 1.8).
    """

    offset_height: tf.Tensor
    offset_width: tf.Tensor
    flip: tf.Tensor
    brightness: tf.Tensor
    contrast: tf.Tensor


def _pad(image, padding):
    if padding <= 0:
        return image
    return tf.pad(image, [[padding, padding], [padding, padding], [0, 0]])


def train_draws(seed, shape, output_height, output_width, padding=_PADDING):
    """The random values of `preprocess_for_train`, from one seed.

    Args:
        seed: A `[2]` integer tensor, split in 5 (`stateless_split`): the
            two offsets, the flip, the brightness, the contrast.
        shape: The image's shape, int32 `[3]`.
        output_height: The crop's height.
        output_width: The crop's width.
        padding: The zero pixels added on each side. Defaults to `4`.

    Returns:
        A `TrainDraws`. The offsets are uniform over the crops that fit
        in the padded image (TF1's `random_crop`; 0 where none fits, and
        `apply_train` raises).

    Example:
    ```python
    draws = train_draws(tf.constant([0, 7]), tf.constant([32, 32, 3]),
                        32, 32)
    ```
    """
    top, left, flip, brightness, contrast = _image_ops.split_seed(seed, 5)
    pad = 2 * max(padding, 0)
    return TrainDraws(
        offset_height=_image_ops.uniform_int(
            top, 0, tf.maximum(shape[0] + pad - output_height + 1, 1)
        ),
        offset_width=_image_ops.uniform_int(
            left, 0, tf.maximum(shape[1] + pad - output_width + 1, 1)
        ),
        flip=_image_ops.coin(flip),
        brightness=_image_ops.uniform(
            brightness, -_BRIGHTNESS_MAX_DELTA, _BRIGHTNESS_MAX_DELTA
        ),
        contrast=_image_ops.uniform(contrast, *_CONTRAST_RANGE),
    )


def _random_crop(image, offset_height, offset_width, height, width):
    """TF1's `random_crop` at the drawn offsets, checked to fit."""
    fits = tf.debugging.assert_greater_equal(
        tf.shape(image)[:2],
        tf.stack([height, width]),
        message="Need value.shape >= size (cifarnet_preprocessing: the "
        "crop must fit in the padded image).",
    )
    with tf.control_dependencies([fits]):
        begin = tf.stack([offset_height, offset_width, 0])
    return tf.slice(image, begin, tf.stack([height, width, -1]))


def apply_train(
    image,
    draws,
    output_height,
    output_width,
    padding=_PADDING,
    use_grayscale=False,
):
    """`preprocess_for_train`'s pixel ops, given its random values.

    Args:
        image: A `[height, width, channels]` image on a 0-255 scale.
        draws: A `TrainDraws`.
        output_height: The crop's height.
        output_width: The crop's width.
        padding: The zero pixels added on each side. Defaults to `4`.
        use_grayscale: Boolean: one gray channel (TF1's
            `rgb_to_grayscale`). Defaults to `False`.

    Returns:
        A float32 `[output_height, output_width, channels]` (1 with
        `use_grayscale`) standardized image.

    Raises:
        InvalidArgumentError: (when run) if the crop does not fit in the
            padded image.

    Example:
    ```python
    draws = train_draws(tf.constant([0, 7]), tf.shape(image), 32, 32)
    image = apply_train(image, draws, 32, 32)
    ```
    """
    image = tf.convert_to_tensor(image)
    depth = _image_ops.channels(image)
    image = _random_crop(
        _pad(image, padding),
        draws.offset_height,
        draws.offset_width,
        output_height,
        output_width,
    )
    image = tf.cast(image, tf.float32)
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
        depth = 1
    image = _image_ops.flip_left_right(image, draws.flip)
    image = tf.image.adjust_brightness(image, draws.brightness)
    image = tf.image.adjust_contrast(image, draws.contrast)
    image = tf.image.per_image_standardization(image)
    return _image_ops.finish(image, output_height, output_width, depth)


def preprocess_for_train(
    image,
    output_height,
    output_width,
    padding=_PADDING,
    add_image_summaries=True,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `preprocess_for_train`: pad, crop, flip, brightness,
    contrast, standardization.

    Args:
        image: A `[height, width, channels]` image on a 0-255 scale (uint8
            as decoded).
        output_height: The crop's height.
        output_width: The crop's width.
        padding: The zero pixels added on each side. Defaults to `4`.
        add_image_summaries: Accepted for TF-Slim's signature; no effect:
            TF-Slim added image summaries to its graph, and a `tf.data`
            map has no summary writer. Defaults to `True`.
        use_grayscale: Boolean: one gray channel. Defaults to `False`.
        seed: A `[2]` integer seed for the stateless draws; `None` draws
            one from the global generator. Defaults to `None`.

    Returns:
        A float32 `[output_height, output_width, channels]` (1 with
        `use_grayscale`) standardized image.

    Raises:
        ValueError: for a bad `seed`.

    Example:
    ```python
    image = preprocess_for_train(image, 32, 32, seed=[0, 7])
    ```
    """
    del add_image_summaries  # No summary writer in a tf.data map.
    image = tf.convert_to_tensor(image)
    draws = train_draws(
        _image_ops.seed_of(seed),
        tf.shape(image),
        output_height,
        output_width,
        padding,
    )
    return apply_train(
        image,
        draws,
        output_height,
        output_width,
        padding,
        use_grayscale=use_grayscale,
    )


def preprocess_for_eval(
    image,
    output_height,
    output_width,
    add_image_summaries=True,
    use_grayscale=False,
):
    """TF-Slim's `preprocess_for_eval`: central crop or pad, standardized.

    As TF-Slim's, it calls `resize_image_with_crop_or_pad(image,
    output_width, output_height)`: the target height is `output_width`
    (the same for the square sizes TF-Slim's commands use).

    Args:
        image: A `[height, width, channels]` image on a 0-255 scale.
        output_height: The output width (see above).
        output_width: The output height (see above).
        add_image_summaries: No effect (see `preprocess_for_train`).
            Defaults to `True`.
        use_grayscale: Boolean: one gray channel. Defaults to `False`.

    Returns:
        A float32 `[output_width, output_height, channels]` (1 with
        `use_grayscale`) standardized image.

    Example:
    ```python
    image = preprocess_for_eval(image, 32, 32)
    ```
    """
    del add_image_summaries  # No summary writer in a tf.data map.
    image = tf.convert_to_tensor(image)
    depth = _image_ops.channels(image)
    # Cropped or padded before the conversion: the same pixels.
    image = tf.image.resize_with_crop_or_pad(image, output_width, output_height)
    image = tf.cast(image, tf.float32)
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
        depth = 1
    image = tf.image.per_image_standardization(image)
    return _image_ops.finish(image, output_width, output_height, depth)


def preprocess_image(
    image,
    output_height,
    output_width,
    is_training=False,
    add_image_summaries=True,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `cifarnet_preprocessing.preprocess_image`.

    Args:
        image: A `[height, width, channels]` image on a 0-255 scale.
        output_height: The output height.
        output_width: The output width.
        is_training: Boolean: `preprocess_for_train`, else
            `preprocess_for_eval`. Defaults to `False`.
        add_image_summaries: No effect (see `preprocess_for_train`).
            Defaults to `True`.
        use_grayscale: Boolean: one gray channel. Defaults to `False`.
        seed: A `[2]` integer seed for training's stateless draws; `None`
            draws one from the global generator. Defaults to `None`.

    Returns:
        A float32 standardized image of the output size.

    Raises:
        ValueError: for a bad `seed`.

    Example:
    ```python
    image = preprocess_image(image, 32, 32, True, seed=[0, 7])
    ```
    """
    if is_training:
        return preprocess_for_train(
            image,
            output_height,
            output_width,
            add_image_summaries=add_image_summaries,
            use_grayscale=use_grayscale,
            seed=seed,
        )
    return preprocess_for_eval(
        image,
        output_height,
        output_width,
        add_image_summaries=add_image_summaries,
        use_grayscale=use_grayscale,
    )
