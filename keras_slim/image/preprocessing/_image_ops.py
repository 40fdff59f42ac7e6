"""What TF-Slim's preprocessing families share: TF1's resizes, stateless
draws, seeds and argument checks.
"""

import tensorflow as tf

from keras_slim import checks

#: TF1's `tf.image.ResizeMethod` values, the `method` of `resize_images`.
BILINEAR = 0
NEAREST_NEIGHBOR = 1
BICUBIC = 2
AREA = 3
RESIZE_METHODS = (BILINEAR, NEAREST_NEIGHBOR, BICUBIC, AREA)


def seed_of(seed):
    """A `[2]` integer seed tensor: `seed`, or one drawn when `None`.

    Args:
        seed: `None`, or two integers (a list, a numpy array or an int32 /
            int64 tensor of shape `[2]`).

    Returns:
        An int64 tensor of shape `[2]` (an int32 seed gives the draws of
        the same int64 one); `None` draws it from TensorFlow's global
        generator (`tf.random.uniform`), so two calls differ.

    Raises:
        ValueError: if `seed` is not two integers.
    """
    if seed is None:
        return tf.random.uniform([2], maxval=2**31 - 1, dtype=tf.int64)
    try:
        tensor = tf.convert_to_tensor(seed)
    except (TypeError, ValueError):
        tensor = None
    if (
        tensor is None
        or tensor.dtype not in (tf.int32, tf.int64)
        or tensor.shape != (2,)
    ):
        raise checks.invalid(
            "seed", seed, "two integers (a [2] int32 or int64 seed) or None"
        )
    return tf.cast(tensor, tf.int64)


def split_seed(seed, count):
    """`count` independent `[2]` seeds from `seed` (`stateless_split` of
    the int64 seed)."""
    seed = tf.cast(seed, tf.int64)
    return tf.unstack(tf.random.experimental.stateless_split(seed, count))


def uniform(seed, minval, maxval):
    """A float32 scalar uniform in `[minval, maxval)`, as TF1's
    `random_uniform([], minval, maxval)` draws it."""
    return tf.random.stateless_uniform(
        [], seed, minval=minval, maxval=maxval, dtype=tf.float32
    )


def uniform_int(seed, minval, maxval):
    """An int32 scalar uniform in `[minval, maxval)`."""
    return tf.random.stateless_uniform(
        [], seed, minval=minval, maxval=maxval, dtype=tf.int32
    )


def coin(seed):
    """A bool scalar, `True` with probability 1/2: TF1's `random_flip_*`
    flips when its `random_uniform([], 0, 1)` is below 0.5."""
    return tf.random.stateless_uniform([], seed) < 0.5


def select(index, branches):
    """`branches[index]()`: called directly for a Python int, by
    `tf.switch_case` (only the chosen branch runs) for a tensor."""
    if checks.is_int(index):
        return branches[index]()
    return tf.switch_case(index, branches)


def flip_left_right(image, flipped):
    """`image` reversed along its width when `flipped`, as TF1's
    `random_flip_left_right` does after its draw."""
    if isinstance(flipped, bool):
        return tf.reverse(image, [1]) if flipped else image
    return tf.cond(flipped, lambda: tf.reverse(image, [1]), lambda: image)


def resize(image, height, width, method=BILINEAR):
    """TF1's `tf.image.resize_images(image, [height, width], method)`.

    The kernel TF1 called, with `align_corners=False` and no half-pixel
    centers; float32 out (TF1's bilinear, bicubic and area kernels give
    float32 for any input; TF-Slim resizes float32 images with nearest).

    Args:
        image: A `[height, width, channels]` image.
        height: The output height, an int or an int32 scalar tensor.
        width: The output width.
        method: One of `RESIZE_METHODS` (TF1's `ResizeMethod` values).
            Defaults to `BILINEAR`.

    Returns:
        The `[height, width, channels]` resized image.
    """
    images = tf.expand_dims(image, 0)
    size = tf.cast(tf.stack([height, width]), tf.int32)
    if method == BILINEAR:
        resized = tf.raw_ops.ResizeBilinear(
            images=images,
            size=size,
            align_corners=False,
            half_pixel_centers=False,
        )
    elif method == NEAREST_NEIGHBOR:
        resized = tf.raw_ops.ResizeNearestNeighbor(
            images=images,
            size=size,
            align_corners=False,
            half_pixel_centers=False,
        )
    elif method == BICUBIC:
        resized = tf.raw_ops.ResizeBicubic(
            images=images,
            size=size,
            align_corners=False,
            half_pixel_centers=False,
        )
    else:
        resized = tf.raw_ops.ResizeArea(
            images=images, size=size, align_corners=False
        )
    return tf.squeeze(resized, [0])


def to_float(image):
    """TF1's `convert_image_dtype(image, tf.float32)` unless float32: an
    integer image divided by its dtype's maximum (cast, then times
    `1 / max`), another float cast."""
    if image.dtype == tf.float32:
        return image
    return tf.image.convert_image_dtype(image, tf.float32)


def channels(image):
    """The static channel count of a `[height, width, channels]` image."""
    if image.shape.rank != 3:
        raise ValueError(
            "Invalid image. Received: an image of shape "
            f"{image.shape}. Expected a 3-D [height, width, channels] "
            "image."
        )
    return image.shape[-1]


def require_rgb(image, what):
    """Raises unless `image` has 3 channels, which `what` needs."""
    depth = channels(image)
    if depth != 3:
        raise ValueError(
            f"Invalid image for {what}. Received: an image of shape "
            f"{image.shape}, {depth} channels. Expected 3 (RGB) channels."
        )


def finish(image, height, width, depth):
    """`image` with its static shape set where the sizes are ints."""
    static = [
        size if isinstance(size, int) else None for size in (height, width)
    ]
    image.set_shape([*static, depth])
    return image
