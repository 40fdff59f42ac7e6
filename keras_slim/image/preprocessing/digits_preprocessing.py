"""The bundled digits' preprocessing (keras_slim's, not TF-Slim's): the
image resized (TF1's `resize_bilinear`), scaled to [0, 1], no
augmentation."""

import tensorflow as tf

from keras_slim.image.preprocessing import _image_ops


def preprocess_image(
    image,
    output_height,
    output_width,
    is_training=False,
    use_grayscale=False,
    seed=None,
):
    """The digits' preprocessing of one image: resized, in [0, 1].

    Args:
        image: A `[height, width, channels]` image: integer (divided by
            its dtype's maximum after the resize), or float in [0, 1].
        output_height: The output height.
        output_width: The output width.
        is_training: Unused (no augmentation). Defaults to `False`.
        use_grayscale: Boolean: one gray channel (TF1's
            `rgb_to_grayscale`, of an RGB image) after the resize.
            Defaults to `False`.
        seed: Unused (no randomness). Defaults to `None`.

    Returns:
        A float32 `[output_height, output_width, channels]` (1 with
        `use_grayscale`) image in [0, 1].

    Example:
    ```python
    image = preprocess_image(image, 8, 8)
    ```
    """
    del is_training, seed  # No augmentation.
    image = tf.convert_to_tensor(image)
    depth = _image_ops.channels(image)
    scale = 1.0 / image.dtype.max if image.dtype.is_integer else 1.0
    image = _image_ops.resize(image, output_height, output_width) * scale
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
        depth = 1
    return _image_ops.finish(image, output_height, output_width, depth)
