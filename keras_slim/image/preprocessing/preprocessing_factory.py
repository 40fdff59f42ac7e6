"""TF-Slim's `preprocessing_factory`, in TensorFlow ops for tf.data."""

from keras_slim import checks
from keras_slim.image.preprocessing import cifarnet_preprocessing
from keras_slim.image.preprocessing import digits_preprocessing
from keras_slim.image.preprocessing import inception_preprocessing
from keras_slim.image.preprocessing import lenet_preprocessing
from keras_slim.image.preprocessing import vgg_preprocessing

_PREPROCESSING_FN_MAP = {
    "cifarnet": cifarnet_preprocessing,
    "inception": inception_preprocessing,
    "inception_v1": inception_preprocessing,
    "inception_v2": inception_preprocessing,
    "inception_v3": inception_preprocessing,
    "inception_v4": inception_preprocessing,
    "inception_resnet_v2": inception_preprocessing,
    "lenet": lenet_preprocessing,
    "mobilenet_v1": inception_preprocessing,
    "mobilenet_v2": inception_preprocessing,
    "mobilenet_v2_035": inception_preprocessing,
    "mobilenet_v3_small": inception_preprocessing,
    "mobilenet_v3_large": inception_preprocessing,
    "mobilenet_v3_small_minimalistic": inception_preprocessing,
    "mobilenet_v3_large_minimalistic": inception_preprocessing,
    "mobilenet_edgetpu": inception_preprocessing,
    "mobilenet_edgetpu_075": inception_preprocessing,
    "mobilenet_v2_140": inception_preprocessing,
    "nasnet_mobile": inception_preprocessing,
    "nasnet_large": inception_preprocessing,
    "pnasnet_mobile": inception_preprocessing,
    "pnasnet_large": inception_preprocessing,
    "resnet_v1_50": vgg_preprocessing,
    "resnet_v1_101": vgg_preprocessing,
    "resnet_v1_152": vgg_preprocessing,
    "resnet_v1_200": vgg_preprocessing,
    "resnet_v2_50": vgg_preprocessing,
    "resnet_v2_101": vgg_preprocessing,
    "resnet_v2_152": vgg_preprocessing,
    "resnet_v2_200": vgg_preprocessing,
    "vgg": vgg_preprocessing,
    "vgg_a": vgg_preprocessing,
    "vgg_16": vgg_preprocessing,
    "vgg_19": vgg_preprocessing,
    "digits": digits_preprocessing,
}

#: The names `get_preprocessing` takes: TF-Slim's, then `"digits"`.
PREPROCESSING = tuple(_PREPROCESSING_FN_MAP)


def get_preprocessing(name, is_training=False, use_grayscale=False):
    """Returns TF-Slim's `preprocessing_fn(image, height, width, **kwargs)`.

    Args:
        name: One of `PREPROCESSING`: a family (`"inception"`, `"vgg"`,
            `"cifarnet"`, `"lenet"`, `"digits"`) or a net TF-Slim maps to
            one (`"mobilenet_v1"` -> inception, `"resnet_v1_50"` -> vgg).
        is_training: Boolean: the family's training preprocessing (random
            crops, flips, colors), else its evaluation one. Defaults to
            `False`.
        use_grayscale: Boolean: one gray channel, converted where
            TF-Slim's family converts it (`vgg` has 3 channel means and
            raises, as TF-Slim's). Defaults to `False`.

    Returns:
        `preprocessing_fn(image, output_height, output_width, **kwargs)`:
        `image` a `[height, width, channels]` tensor (uint8 as decoded),
        `output_height` and `output_width` positive ints; `kwargs` go to
        the family's `preprocess_image` (`fast_mode=False`, `bbox=...`
        for inception, `resize_side_min` for vgg, ...), with `seed`: a
        `[2]` integer seed for the stateless random ops, drawn from the
        global generator when `None`. It returns a float32 `[output_height,
        output_width, channels]` tensor.

    Raises:
        ValueError: if `name` is not one of `PREPROCESSING`, or
            `is_training` or `use_grayscale` is not a bool; the function
            raises for output sizes that are not positive ints.

    Example:
    ```python
    preprocessing_fn = get_preprocessing("inception", is_training=True)
    dataset = dataset.enumerate().map(
        lambda i, example: (
            preprocessing_fn(example[0], 224, 224, seed=[0, i]),
            example[1],
        )
    )
    ```
    """
    if name not in PREPROCESSING:
        raise checks.invalid(
            "name", name, f"one of {', '.join(map(repr, PREPROCESSING))}"
        )
    checks.boolean("is_training", is_training)
    checks.boolean("use_grayscale", use_grayscale)
    family = _PREPROCESSING_FN_MAP[name]

    def preprocessing_fn(image, output_height, output_width, **kwargs):
        return family.preprocess_image(
            image,
            checks.positive_int("output_height", output_height),
            checks.positive_int("output_width", output_width),
            is_training=is_training,
            use_grayscale=use_grayscale,
            **kwargs,
        )

    preprocessing_fn.__name__ = f"{name}_{'train' if is_training else 'eval'}"
    return preprocessing_fn
