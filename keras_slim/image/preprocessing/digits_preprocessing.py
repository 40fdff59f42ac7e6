"""The bundled digits' preprocessing: resized, in [0, 1], no augmentation
(TF-Slim's `lenet_preprocessing` for MNIST, without its mean shift)."""

from keras_slim.image.preprocessing import _image_ops


def preprocess_image(image, seed, is_training, size):
    """The digits' preprocessing of one image: resized, in [0, 1]."""
    del seed, is_training  # No augmentation.
    return _image_ops.resize(image, size, size) * _image_ops.unit_scale(
        image.dtype
    )
