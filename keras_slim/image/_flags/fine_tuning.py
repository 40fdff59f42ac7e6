"""The fine-tuning and gradient policy flags: what is restored, what trained."""

from keras_slim.image._flag_types import lr_multipliers
from keras_slim.image._flag_types import multipliers
from keras_slim.image._flag_types import positive_float
from keras_slim.image._flag_types import scopes

__all__ = [
    "add_fine_tuning_flags",
    "add_policy_flags",
]


def add_fine_tuning_flags(add):
    """Adds the fine-tuning flags: what is restored from a checkpoint, what is
    trained.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "checkpoint_path",
        None,
        "The path to a checkpoint from which to fine-tune: a "
        "keras_slim or TF2 checkpoint, a Keras .weights.h5 file, or a "
        "TF-Slim checkpoint (read in TF-Slim's names through the net's "
        "slim_name_map).",
    )
    add(
        "checkpoint_exclude_scopes",
        [],
        "Comma-separated list of scopes of variables to exclude when "
        "restoring from a checkpoint (prefixes of the model's variable "
        "paths, e.g. logits).",
        parse=scopes,
    )
    add(
        "trainable_scopes",
        None,
        "Comma-separated list of scopes to filter the set of "
        "variables to train. By default, None would train all the "
        "variables.",
        parse=scopes,
    )
    add(
        "ignore_missing_vars",
        False,
        "When restoring a checkpoint would ignore missing variables.",
    )


def add_policy_flags(add):
    """Adds keras_slim's gradient policy flags: multipliers (of gradients
    and of the learning rate), freezing, clipping.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "gradient_multipliers",
        {},
        "pattern=value,...: multiply the gradients of the variables "
        "whose paths match (object_detection's multiply_gradients_"
        "matching_regex).",
        parse=multipliers,
    )
    add(
        "learning_rate_multipliers",
        {},
        "pattern=value,...: train the variables whose paths match at the "
        "learning rate times the value (with Adam or RMSProp a gradient "
        "multiplier is nearly divided out; this is not).",
        parse=lr_multipliers,
    )
    add(
        "freeze",
        [],
        "Comma-separated scopes whose variables are not trained "
        "(freeze_gradients_matching_regex).",
        parse=scopes,
    )
    add(
        "clip_gradient_norm",
        None,
        "Clip each gradient to this norm (create_train_op's "
        "clip_gradient_norm).",
        parse=positive_float,
    )
