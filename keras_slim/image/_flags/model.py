"""The model flags: the net, its image size, how its weights are read."""

from keras_slim.image import nets
from keras_slim.image import preprocessing
from keras_slim.image._flag_types import fraction
from keras_slim.image._flag_types import positive_int

__all__ = [
    "QUANTIZATION",
    "add_inference_average_flag",
    "add_model_flags",
    "add_quantization_flag",
]


def add_model_flags(add, *, image_size_flag):
    """Adds `--model_name`, the image size flag and `--preprocessing_name`.

    Args:
        add: The command's `FlagParser.add`.
        image_size_flag: `--train_image_size` or `--eval_image_size`.
    """
    add(
        "model_name",
        "digits_cnn",
        "The name of the architecture to train (keras_slim.image.nets: "
        "TF-Slim's nets, or a small CNN for the digits).",
        choices=nets.NETWORKS,
    )
    add(
        image_size_flag.lstrip("-"),
        None,
        "The image size (height and width) the network takes "
        "(default: the network's, e.g. 224 for mobilenet_v2).",
        parse=positive_int,
    )
    add(
        "preprocessing_name",
        None,
        "The name of the preprocessing to use (default: the "
        "network's, as TF-Slim's preprocessing_factory picks it).",
        choices=preprocessing.PREPROCESSING,
    )


def add_inference_average_flag(add):
    """Adds `--moving_average_decay` as keras-slim-eval and
    keras-slim-export read it: whether a TF-Slim checkpoint's moving
    averages are restored (a keras_slim checkpoint's always are).

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "moving_average_decay",
        None,
        "The decay to use for the moving average. If left as None, "
        "then moving averages are not used (a TF-Slim checkpoint's; a "
        "keras_slim checkpoint's are used whenever it holds them).",
        parse=fraction,
    )


#: Why `--quantize_delay` / `--quantize` are refused, and what to use.
QUANTIZATION = (
    "quantization-aware training (tf.contrib.quantize in TF-Slim) is not "
    "built in keras_slim; use the TensorFlow Model Optimization Toolkit "
    "(tfmot.quantization.keras.quantize_model) on the network, and "
    "TFLite's converter for a quantized model"
)


def add_quantization_flag(add, *, training):
    """Adds `--quantize_delay` (train) or `--quantize` (eval), refused when
    set: TF-Slim built them on tf.contrib.quantize, which has no Keras 3
    counterpart here.

    Args:
        add: The command's `FlagParser.add`.
        training: `True` for `--quantize_delay`.
    """
    if training:
        add(
            "quantize_delay",
            -1,
            "Number of steps to start quantized training. Set to -1 would "
            "disable quantized training (the only value taken: for "
            "quantization-aware training use the TensorFlow Model "
            "Optimization Toolkit's quantize_model on the net).",
            parse=int,
        )
    else:
        add(
            "quantize",
            False,
            "Whether to quantize the model (only false is taken: use the "
            "TensorFlow Model Optimization Toolkit's quantize_model, then "
            "TFLite's converter).",
        )
