"""TF-Slim's `inception_preprocessing`, in stateless TensorFlow ops."""

import typing

import tensorflow as tf

from keras_slim.image.preprocessing import _image_ops
from keras_slim.image.preprocessing._inception_color import ORDERINGS
from keras_slim.image.preprocessing._inception_color import ColorDraws
from keras_slim.image.preprocessing._inception_color import apply_color
from keras_slim.image.preprocessing._inception_color import color_draws
from keras_slim.image.preprocessing._inception_color import distort_color

__all__ = [
    "apply_with_random_selector",
    "ColorDraws",
    "TrainDraws",
    "color_draws",
    "apply_color",
    "distort_color",
    "box_draws",
    "distorted_bounding_box_crop",
    "train_draws",
    "apply_train",
    "preprocess_for_train",
    "preprocess_for_eval",
    "preprocess_image",
]

_CENTRAL_FRACTION = 0.875
_MIN_OBJECT_COVERED = 0.1
_ASPECT_RATIO_RANGE = (0.75, 1.33)
_AREA_RANGE = (0.05, 1.0)
_MAX_ATTEMPTS = 100


def apply_with_random_selector(x, func, num_cases, seed=None):
    """TF-Slim's `apply_with_random_selector`: `func(x, case)` for a case
    drawn uniformly from `[0, num_cases)`; only that case runs.

    Args:
        x: A tensor.
        func: `(x, case) -> tensor`, `case` a Python int.
        num_cases: Positive int: the cases drawn from.
        seed: A `[2]` integer seed for the stateless draw; `None` draws
            one from the global generator. Defaults to `None`.

    Returns:
        `func(x, case)` for the drawn case.

    Raises:
        ValueError: for a bad `seed`.

    Example:
    ```python
    image = apply_with_random_selector(
        image, lambda x, ordering: distort_color(x, ordering, False), 4,
        seed=[0, 7],
    )
    ```
    """
    case = _image_ops.uniform_int(_image_ops.seed_of(seed), 0, num_cases)
    return _image_ops.select(
        case, [lambda c=c: func(x, c) for c in range(num_cases)]
    )


class TrainDraws(typing.NamedTuple):
    """The random values of `preprocess_for_train`.

    Attributes:
        begin: int32 `[3]`: the crop's first pixel `(y, x, 0)`; `None`
            without a random crop.
        size: int32 `[3]`: the crop's size `(height, width, -1)`; `None`
            without a random crop.
        distort_bbox: float32 `[1, 1, 4]`: the crop as a box in [0, 1];
            `None` without a random crop.
        method: The resize method (TF1's `ResizeMethod`): `0`, bilinear,
            in `fast_mode`; else an int32 scalar in [0, 4).
        flip: bool scalar: flipped left-right.
        ordering: The color ordering: `0` in `fast_mode`, else an int32
            scalar in [0, 4).
        color: The `ColorDraws`.
    """

    begin: tf.Tensor | None
    size: tf.Tensor | None
    distort_bbox: tf.Tensor | None
    method: tf.Tensor | int
    flip: tf.Tensor
    ordering: tf.Tensor | int
    color: ColorDraws


def _whole_image_box():
    return tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, shape=[1, 1, 4])


def box_draws(
    seed,
    shape,
    bbox,
    min_object_covered=_MIN_OBJECT_COVERED,
    aspect_ratio_range=_ASPECT_RATIO_RANGE,
    area_range=_AREA_RANGE,
    max_attempts=_MAX_ATTEMPTS,
):
    """TF-Slim's random box: `tf.image.stateless_sample_distorted_bounding_box`.

    Args:
        seed: A `[2]` integer tensor.
        shape: The image's shape, int32 `[3]`.
        bbox: float32 `[1, num_boxes, 4]` boxes `[ymin, xmin, ymax, xmax]`
            in [0, 1]; with no box, the whole image is the box.
        min_object_covered: The part of a box the crop covers at least.
            Defaults to `0.1`.
        aspect_ratio_range: The crop's width / height range. Defaults to
            `(0.75, 1.33)`.
        area_range: The crop's area range, as a part of the image.
            Defaults to `(0.05, 1.0)`.
        max_attempts: Attempts before the whole image is the crop.
            Defaults to `100`.

    Returns:
        `(begin, size, distort_bbox)`, as the op returns them.

    Example:
    ```python
    begin, size, _ = box_draws(
        tf.constant([0, 7]), tf.constant([30, 40, 3]),
        tf.constant([[[0.0, 0.0, 1.0, 1.0]]]),
    )
    ```
    """
    return tf.image.stateless_sample_distorted_bounding_box(
        shape,
        bounding_boxes=tf.cast(bbox, tf.float32),
        seed=seed,
        min_object_covered=min_object_covered,
        aspect_ratio_range=aspect_ratio_range,
        area_range=area_range,
        max_attempts=max_attempts,
        use_image_if_no_bounding_boxes=True,
    )


def distorted_bounding_box_crop(
    image,
    bbox,
    min_object_covered=_MIN_OBJECT_COVERED,
    aspect_ratio_range=_ASPECT_RATIO_RANGE,
    area_range=_AREA_RANGE,
    max_attempts=_MAX_ATTEMPTS,
    scope=None,
    seed=None,
):
    """TF-Slim's `distorted_bounding_box_crop`: a random box of the image.

    Args:
        image: A `[height, width, channels]` image.
        bbox: float32 `[1, num_boxes, 4]` boxes `[ymin, xmin, ymax, xmax]`
            in [0, 1]; with no box, the whole image is the box.
        min_object_covered: See `box_draws`. Defaults to `0.1`.
        aspect_ratio_range: See `box_draws`. Defaults to `(0.75, 1.33)`.
        area_range: See `box_draws`. Defaults to `(0.05, 1.0)`.
        max_attempts: See `box_draws`. Defaults to `100`.
        scope: The name scope. Defaults to
            `"distorted_bounding_box_crop"`.
        seed: A `[2]` integer seed (the box's, as `box_draws` takes it);
            `None` draws one from the global generator. Defaults to `None`.

    Returns:
        `(cropped_image, distort_bbox)`.

    Raises:
        ValueError: for a bad `seed`.

    Example:
    ```python
    crop, box = distorted_bounding_box_crop(
        image, tf.constant([[[0.0, 0.0, 1.0, 1.0]]]), seed=[0, 7]
    )
    ```
    """
    with tf.name_scope(scope or "distorted_bounding_box_crop"):
        image = tf.convert_to_tensor(image)
        begin, size, distort_bbox = box_draws(
            _image_ops.seed_of(seed),
            tf.shape(image),
            bbox,
            min_object_covered,
            aspect_ratio_range,
            area_range,
            max_attempts,
        )
        return tf.slice(image, begin, size), distort_bbox


def train_draws(seed, shape, bbox=None, fast_mode=True, random_crop=True):
    """The random values of `preprocess_for_train`, from one seed.

    Args:
        seed: A `[2]` integer tensor, split in 5 (`stateless_split`): the
            box (`box_draws` with TF-Slim's arguments), the resize
            method, the flip, the color ordering, the colors
            (`color_draws`).
        shape: The image's shape, int32 `[3]`.
        bbox: float32 `[1, num_boxes, 4]` boxes; `None` for the whole
            image. Defaults to `None`.
        fast_mode: Boolean: bilinear resize and color ordering 0, not
            drawn. Defaults to `True`.
        random_crop: Boolean: draw a box (else the whole image). Defaults
            to `True`.

    Returns:
        A `TrainDraws`.

    Example:
    ```python
    draws = train_draws(tf.constant([0, 7]), tf.constant([30, 40, 3]))
    ```
    """
    box, method, flip, ordering, color = _image_ops.split_seed(seed, 5)
    begin = size = distort_bbox = None
    if random_crop:
        bbox = _whole_image_box() if bbox is None else bbox
        begin, size, distort_bbox = box_draws(box, shape, bbox)
    cases = len(_image_ops.RESIZE_METHODS)
    return TrainDraws(
        begin=begin,
        size=size,
        distort_bbox=distort_bbox,
        method=0 if fast_mode else _image_ops.uniform_int(method, 0, cases),
        flip=_image_ops.coin(flip),
        ordering=0
        if fast_mode
        else _image_ops.uniform_int(ordering, 0, ORDERINGS),
        color=color_draws(color),
    )


def _resize_images(image, height, width, method):
    """TF1's `resize_images` by a method that may be a tensor."""
    return _image_ops.select(
        method,
        [
            lambda m=m: _image_ops.resize(image, height, width, m)
            for m in _image_ops.RESIZE_METHODS
        ],
    )


def apply_train(
    image, draws, height, width, fast_mode=True, use_grayscale=False
):
    """`preprocess_for_train`'s pixel ops, given its random values.

    Args:
        image: A `[height, width, 3]` image: integer, or float32 in
            [0, 1].
        draws: A `TrainDraws`.
        height: The output height.
        width: The output width.
        fast_mode: Boolean: as `draws` were drawn. Defaults to `True`.
        use_grayscale: Boolean: one gray channel (TF1's
            `rgb_to_grayscale`) after the color distortion. Defaults to
            `False`.

    Returns:
        A float32 `[height, width, 3]` (1 with `use_grayscale`) image in
        [-1, 1].

    Example:
    ```python
    draws = train_draws(tf.constant([0, 7]), tf.shape(image))
    image = apply_train(image, draws, 224, 224)
    ```
    """
    image = tf.convert_to_tensor(image)
    depth = _image_ops.channels(image)
    if draws.begin is not None:
        # Cropped before the conversion: the same pixels, fewer converted.
        image = tf.slice(image, draws.begin, draws.size)
    image = _image_ops.to_float(image)
    image = _resize_images(image, height, width, draws.method)
    image = _image_ops.flip_left_right(image, draws.flip)
    image = apply_color(image, draws.ordering, draws.color, fast_mode)
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
        depth = 1
    image = tf.multiply(tf.subtract(image, 0.5), 2.0)
    return _image_ops.finish(image, height, width, depth)


def preprocess_for_train(
    image,
    height,
    width,
    bbox,
    fast_mode=True,
    scope=None,
    add_image_summaries=True,
    random_crop=True,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `preprocess_for_train`: crop, resize, flip, colors.

    See the module's docstring for the steps; `train_draws` then
    `apply_train`.

    Args:
        image: A `[height, width, 3]` image: integer (scaled by its
            dtype's maximum), or float32 in [0, 1].
        height: The output height.
        width: The output width.
        bbox: float32 `[1, num_boxes, 4]` boxes `[ymin, xmin, ymax,
            xmax]` in [0, 1] the crop covers at least 10% of; `None` for
            the whole image.
        fast_mode: Boolean: bilinear resize, brightness and saturation
            only (as TF-Slim's train_image_classifier). Defaults to
            `True`.
        scope: The name scope. Defaults to `"distort_image"`.
        add_image_summaries: Accepted for TF-Slim's signature; no effect:
            TF-Slim added image summaries to its graph, and a `tf.data`
            map has no summary writer. Defaults to `True`.
        random_crop: Boolean: the random box (else the whole image).
            Defaults to `True`.
        use_grayscale: Boolean: one gray channel. Defaults to `False`.
        seed: A `[2]` integer seed for the stateless draws; `None` draws
            one from the global generator. Defaults to `None`.

    Returns:
        A float32 `[height, width, 3]` (1 with `use_grayscale`) image in
        [-1, 1].

    Raises:
        ValueError: if `image` does not have 3 channels (the colors are
            distorted in RGB), for a bad `seed`.

    Example:
    ```python
    image = preprocess_for_train(image, 224, 224, None, seed=[0, 7])
    ```
    """
    del add_image_summaries  # No summary writer in a tf.data map.
    with tf.name_scope(scope or "distort_image"):
        image = tf.convert_to_tensor(image)
        _image_ops.require_rgb(image, "inception's distort_color")
        draws = train_draws(
            _image_ops.seed_of(seed),
            tf.shape(image),
            bbox,
            fast_mode=fast_mode,
            random_crop=random_crop,
        )
        return apply_train(
            image,
            draws,
            height,
            width,
            fast_mode=fast_mode,
            use_grayscale=use_grayscale,
        )


def preprocess_for_eval(
    image,
    height,
    width,
    central_fraction=_CENTRAL_FRACTION,
    scope=None,
    central_crop=True,
    use_grayscale=False,
):
    """TF-Slim's `preprocess_for_eval`: central crop, TF1 bilinear resize.

    Args:
        image: A `[height, width, channels]` image: integer (scaled by its
            dtype's maximum), or float32 in [0, 1].
        height: The output height; with `width`, `None` (or 0) keeps the
            crop's size.
        width: The output width.
        central_fraction: The part of each side kept (`tf.image.
            central_crop`); `None` or 0 keeps the whole image. Defaults to
            `0.875`.
        scope: The name scope. Defaults to `"eval_image"`.
        central_crop: Boolean: crop at all. Defaults to `True`.
        use_grayscale: Boolean: one gray channel. Defaults to `False`.

    Returns:
        A float32 `[height, width, channels]` (1 with `use_grayscale`)
        image in [-1, 1].

    Example:
    ```python
    image = preprocess_for_eval(image, 224, 224)
    ```
    """
    with tf.name_scope(scope or "eval_image"):
        image = tf.convert_to_tensor(image)
        depth = _image_ops.channels(image)
        if central_crop and central_fraction:
            # Cropped before the conversion: the same pixels, fewer
            # converted.
            image = tf.image.central_crop(image, central_fraction)
        image = _image_ops.to_float(image)
        if use_grayscale:
            image = tf.image.rgb_to_grayscale(image)
            depth = 1
        if height and width:
            image = _image_ops.resize(image, height, width)
        image = tf.multiply(tf.subtract(image, 0.5), 2.0)
        if not (height and width):
            return image
        return _image_ops.finish(image, height, width, depth)


def preprocess_image(
    image,
    height,
    width,
    is_training=False,
    bbox=None,
    fast_mode=True,
    add_image_summaries=True,
    crop_image=True,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `inception_preprocessing.preprocess_image`.

    Args:
        image: A `[height, width, 3]` image: integer (scaled by its
            dtype's maximum), or float32 in [0, 1].
        height: The output height.
        width: The output width.
        is_training: Boolean: `preprocess_for_train`, else
            `preprocess_for_eval`. Defaults to `False`.
        bbox: Boxes for training; `None` for the whole image. Defaults to
            `None`.
        fast_mode: Boolean, training: bilinear resize, brightness and
            saturation only. Defaults to `True`.
        add_image_summaries: No effect (see `preprocess_for_train`).
            Defaults to `True`.
        crop_image: Boolean: the random (training) or central (eval)
            crop. Defaults to `True`.
        use_grayscale: Boolean: one gray channel. Defaults to `False`.
        seed: A `[2]` integer seed for training's stateless draws; `None`
            draws one from the global generator. Defaults to `None`.

    Returns:
        A float32 `[height, width, 3]` (1 with `use_grayscale`) image in
        [-1, 1].

    Raises:
        ValueError: in training, if `image` does not have 3 channels; for
            a bad `seed`.

    Example:
    ```python
    image = preprocess_image(image, 224, 224, True, seed=[0, 7])
    ```
    """
    if is_training:
        return preprocess_for_train(
            image,
            height,
            width,
            bbox,
            fast_mode,
            add_image_summaries=add_image_summaries,
            random_crop=crop_image,
            use_grayscale=use_grayscale,
            seed=seed,
        )
    return preprocess_for_eval(
        image,
        height,
        width,
        central_crop=crop_image,
        use_grayscale=use_grayscale,
    )
