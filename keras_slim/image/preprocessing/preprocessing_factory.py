"""TF-Slim's `preprocessing_factory`, in TensorFlow ops for tf.data.

`get_preprocessing(name, is_training=..., image_size=...)` returns a
function of one image, as TF-Slim's `preprocessing_factory` did, to map
over a `tf.data.Dataset`:

- `"inception"`: TF-Slim's `inception_preprocessing` (one module per
  family, as TF-Slim's: `inception_preprocessing.py`);
- `"vgg"`: TF-Slim's `vgg_preprocessing`;
- `"digits"`: the bundled digits', resized, in [0, 1].

Randomness is stateless (`tf.random.stateless_*`, `tf.image.stateless_*`):
the same `seed` gives the same crop and flip, so a pipeline that passes a
seed per element (`keras_slim.image.datasets` passes `[seed, element
index]`) is reproducible. Without a seed, one is drawn from TensorFlow's
global generator (`tf.random.uniform`), so two calls differ.

Integer images (uint8 from `tf.io.decode_image`) are scaled by their
dtype's maximum, as `tf.image.convert_image_dtype` would; float images
are taken to be in [0, 1] already.
"""

import tensorflow as tf

from keras_slim import _validation
from keras_slim.image.preprocessing import _image_ops
from keras_slim.image.preprocessing import digits_preprocessing
from keras_slim.image.preprocessing import inception_preprocessing
from keras_slim.image.preprocessing import vgg_preprocessing

_PREPROCESSING_FN_MAP = {
    "inception": inception_preprocessing,
    "vgg": vgg_preprocessing,
    "digits": digits_preprocessing,
}

PREPROCESSING = tuple(_PREPROCESSING_FN_MAP)


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
    body = _PREPROCESSING_FN_MAP[name].preprocess_image

    def preprocess(image, seed=None):
        image = tf.convert_to_tensor(image)
        channels = image.shape[-1]
        if is_training and name != "digits":
            seed = _image_ops.seed_of(seed)
        image = body(image, seed, is_training, size)
        image.set_shape([size, size, channels])
        return image

    preprocess.__name__ = f"{name}_{'train' if is_training else 'eval'}"
    return preprocess
