"""TF-Slim's `distort_color`, in stateless TensorFlow ops."""

import typing

import tensorflow as tf

from keras_slim import checks
from keras_slim.image.preprocessing import _image_ops

__all__ = [
    "ORDERINGS",
    "ColorDraws",
    "apply_color",
    "color_draws",
    "distort_color",
]

_BRIGHTNESS_MAX_DELTA = 32.0 / 255.0
_SATURATION_RANGE = (0.5, 1.5)
_HUE_MAX_DELTA = 0.2
_CONTRAST_RANGE = (0.5, 1.5)

#: TF-Slim's color orderings: `color_ordering` is in `range(ORDERINGS)`.
ORDERINGS = 4


class ColorDraws(typing.NamedTuple):
    """The random values of `distort_color` (float32 scalars).

    Attributes:
        brightness: The delta `adjust_brightness` adds, in
            [-32/255, 32/255).
        saturation: The factor of `adjust_saturation`, in [0.5, 1.5).
        hue: The delta of `adjust_hue`, in [-0.2, 0.2).
        contrast: The factor of `adjust_contrast`, in [0.5, 1.5).
    """

    brightness: tf.Tensor
    saturation: tf.Tensor
    hue: tf.Tensor
    contrast: tf.Tensor


def color_draws(seed):
    """The random values of `distort_color`, from one seed.

    Args:
        seed: A `[2]` integer tensor, split in 4 (`stateless_split`):
            brightness, saturation, hue, contrast.

    Returns:
        A `ColorDraws`.

    Example:
    ```python
    draws = color_draws(tf.constant([0, 7]))
    ```
    """
    brightness, saturation, hue, contrast = _image_ops.split_seed(seed, 4)
    return ColorDraws(
        brightness=_image_ops.uniform(
            brightness, -_BRIGHTNESS_MAX_DELTA, _BRIGHTNESS_MAX_DELTA
        ),
        saturation=_image_ops.uniform(saturation, *_SATURATION_RANGE),
        hue=_image_ops.uniform(hue, -_HUE_MAX_DELTA, _HUE_MAX_DELTA),
        contrast=_image_ops.uniform(contrast, *_CONTRAST_RANGE),
    )


def _color_steps(draws):
    return {
        "brightness": lambda x: tf.image.adjust_brightness(x, draws.brightness),
        "saturation": lambda x: tf.image.adjust_saturation(x, draws.saturation),
        "hue": lambda x: tf.image.adjust_hue(x, draws.hue),
        "contrast": lambda x: tf.image.adjust_contrast(x, draws.contrast),
    }


def _orders(fast_mode):
    """TF-Slim's color orderings: index -> the adjustments in order."""
    if fast_mode:
        return [["brightness", "saturation"]] + [
            ["saturation", "brightness"]
        ] * (ORDERINGS - 1)
    return [
        ["brightness", "saturation", "hue", "contrast"],
        ["saturation", "brightness", "contrast", "hue"],
        ["contrast", "hue", "brightness", "saturation"],
        ["hue", "saturation", "contrast", "brightness"],
    ]


def _python_ordering(color_ordering, fast_mode):
    """An int ordering as TF-Slim reads it: in `fast_mode` 0 or any
    other; else 0 to 3."""
    if fast_mode:
        return 0 if color_ordering == 0 else 1
    if not 0 <= color_ordering < ORDERINGS:
        raise checks.invalid("color_ordering", color_ordering, "0, 1, 2 or 3")
    return color_ordering


def apply_color(image, color_ordering, draws, fast_mode=True):
    """`distort_color`'s pixel ops, given its random values.

    Args:
        image: A float32 `[height, width, 3]` image in [0, 1].
        color_ordering: An int in [0, 4), or an int32 scalar tensor (only
            the chosen ordering runs): brightness, saturation (0) or
            saturation, brightness (1-3) in `fast_mode`; else TF-Slim's
            four orders of brightness, saturation, hue and contrast.
        draws: A `ColorDraws`.
        fast_mode: Boolean: without hue and contrast. Defaults to `True`.

    Returns:
        The image, clipped to [0, 1].

    Raises:
        ValueError: for an int `color_ordering` outside [0, 4) with
            `fast_mode=False` (TF-Slim's check).

    Example:
    ```python
    image = apply_color(image, 0, color_draws(tf.constant([0, 7])))
    ```
    """
    steps = _color_steps(draws)
    orders = _orders(fast_mode)
    if checks.is_int(color_ordering):
        color_ordering = _python_ordering(color_ordering, fast_mode)

    def distort(order):
        def run():
            distorted = image
            for name in order:
                distorted = steps[name](distorted)
            return distorted

        return run

    image = _image_ops.select(color_ordering, [distort(o) for o in orders])
    # The adjustments do not clip.
    return tf.clip_by_value(image, 0.0, 1.0)


def distort_color(
    image, color_ordering=0, fast_mode=True, scope=None, seed=None
):
    """TF-Slim's `distort_color`: random brightness and saturation (and,
    without `fast_mode`, hue and contrast) in one of TF-Slim's orders.

    TF1's `random_brightness(max_delta=32/255)`, `random_saturation(0.5,
    1.5)`, `random_hue(0.2)` and `random_contrast(0.5, 1.5)`: each draws
    its value (`color_draws`) and calls TF1's `adjust_*` (`apply_color`).

    Args:
        image: A float32 `[height, width, 3]` image in [0, 1].
        color_ordering: Int: the order of the adjustments (0-3).
            Defaults to `0`.
        fast_mode: Boolean: brightness and saturation only. Defaults to
            `True`.
        scope: The name scope. Defaults to `"distort_color"`.
        seed: A `[2]` integer seed for the stateless draws; `None` draws
            one from the global generator. Defaults to `None`.

    Returns:
        The color-distorted image, clipped to [0, 1].

    Raises:
        ValueError: if `color_ordering` is not in [0, 3] without
            `fast_mode`, or for a bad `seed`.

    Example:
    ```python
    image = distort_color(image, 2, fast_mode=False, seed=[0, 7])
    ```
    """
    with tf.name_scope(scope or "distort_color"):
        draws = color_draws(_image_ops.seed_of(seed))
        return apply_color(image, color_ordering, draws, fast_mode)
