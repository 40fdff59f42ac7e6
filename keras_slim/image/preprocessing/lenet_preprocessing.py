"""TF-Slim's `lenet_preprocessing`: no augmentation, no resize."""

import tensorflow as tf

from keras_slim.image.preprocessing import _image_ops


def preprocess_image(
    image,
    output_height,
    output_width,
    is_training,
    use_grayscale=False,
    seed=None,
):
    """TF-Slim's `lenet_preprocessing.preprocess_image`.

    As TF-Slim's, it calls `resize_image_with_crop_or_pad(image,
    output_width, output_height)`: the target height is `output_width`
    (the same for the square sizes TF-Slim's commands use).

    Args:
        image: A `[height, width, channels]` image on a 0-255 scale (uint8
            as decoded).
        output_height: The output width (see above).
        output_width: The output height (see above).
        is_training: Unused (the same preprocessing either way).
        use_grayscale: Boolean: one gray channel (TF1's
            `rgb_to_grayscale`, of an RGB image). Defaults to `False`.
        seed: Unused (no randomness). Defaults to `None`.

    Returns:
        A float32 `[output_width, output_height, channels]` (1 with
        `use_grayscale`) image, `(x - 128) / 128`.

    Example:
    ```python
    image = preprocess_image(image, 28, 28, is_training=True)
    ```
    """
    del is_training, seed  # No augmentation.
    image = tf.convert_to_tensor(image)
    depth = _image_ops.channels(image)
    # Cropped or padded before the conversion: the same pixels.
    image = tf.image.resize_with_crop_or_pad(image, output_width, output_height)
    image = tf.cast(image, tf.float32)
    if use_grayscale:
        image = tf.image.rgb_to_grayscale(image)
        depth = 1
    image = tf.divide(tf.subtract(image, 128.0), 128.0)
    return _image_ops.finish(image, output_width, output_height, depth)
