"""The optimization flags: the optimizer, its learning rate, the precision."""

from keras_slim.image import learning_rate
from keras_slim.image import optimizer as optimizer_lib
from keras_slim.image._flag_types import finite_float
from keras_slim.image._flag_types import fraction
from keras_slim.image._flag_types import non_negative_float
from keras_slim.image._flag_types import positive_float
from keras_slim.image._flag_types import positive_int

__all__ = [
    "MIXED_PRECISION",
    "add_optimization_flags",
    "add_precision_flag",
]


# What each optimizer flag takes, as its optimizer checks it; the others
# (decays, momenta, betas) lie in [0, 1).
_OPTIMIZER_FLAG_TYPES = {
    "opt_epsilon": positive_float,
    "adagrad_initial_accumulator_value": positive_float,
    "ftrl_learning_rate_power": finite_float,
    "ftrl_initial_accumulator_value": non_negative_float,
    "ftrl_l1": non_negative_float,
    "ftrl_l2": non_negative_float,
    "gradient_accumulation_steps": positive_int,
}


def add_optimization_flags(add):
    """Adds the optimizer, its learning rate and decay, and the regularization.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "optimizer",
        "rmsprop",
        "The name of the optimizer.",
        choices=optimizer_lib.OPTIMIZERS,
    )
    add(
        "learning_rate",
        0.01,
        "Initial learning rate.",
        parse=positive_float,
    )
    add(
        "learning_rate_decay_type",
        "exponential",
        "Specifies how the learning rate is decayed. cosine (not "
        "TF-Slim's): from --learning_rate to --end_learning_rate over the "
        "steps after the warmup up to --max_number_of_steps (unset: over "
        "--num_epochs_per_decay epochs), then at --end_learning_rate.",
        choices=learning_rate.DECAY_TYPES,
    )
    add(
        "num_epochs_per_decay",
        2.0,
        "Number of epochs after which learning rate decays.",
        parse=positive_float,
    )
    add(
        "learning_rate_decay_factor",
        0.94,
        "Learning rate decay factor.",
        parse=positive_float,
    )
    add(
        "end_learning_rate",
        0.0001,
        "The minimal end learning rate used by a polynomial decay "
        "learning rate (and the floor of a cosine decay).",
        parse=non_negative_float,
    )
    add(
        "warmup_epochs",
        0.0,
        "Epochs of linear warmup from 0 to --learning_rate before the "
        "decay (any --learning_rate_decay_type), which then starts; 0: no "
        "warmup. Counted in global steps of the global batch, as the "
        "decay steps.",
        parse=non_negative_float,
    )
    for name, (default, text) in optimizer_lib.OPTIMIZER_FLAGS.items():
        add(
            name, default, text, parse=_OPTIMIZER_FLAG_TYPES.get(name, fraction)
        )
    add(
        "label_smoothing",
        0.0,
        "The amount of label smoothing.",
        parse=fraction,
    )
    add(
        "moving_average_decay",
        None,
        "The decay to use for the moving average. If left as None, "
        "then moving averages are not used.",
        parse=fraction,
    )
    add(
        "weight_decay",
        0.00004,
        "The weight decay on the model weights.",
        parse=non_negative_float,
    )


#: The values of `--mixed_precision`: Keras's mixed dtype policies.
MIXED_PRECISION = ("mixed_float16", "mixed_bfloat16")


def add_precision_flag(add):
    """Adds `--mixed_precision`: Keras's mixed dtype policy for the net.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "mixed_precision",
        None,
        "Train under this Keras mixed precision policy: the layers compute "
        "in float16 (with a dynamic loss scale) or bfloat16, the variables "
        "stay float32. Unset: float32.",
        choices=MIXED_PRECISION,
    )
