"""The flags of `keras-slim-train` and `keras-slim-eval`, in groups.

TF-Slim's train_image_classifier.py and eval_image_classifier.py define
their flags in sections (deployment, optimization, learning rate,
dataset, fine-tuning); here each section is a function adding its flags
to a parser, and the sections the two commands share (the model and the
data) are added by both. Every flag has TF-Slim's name, default and help.
"""

import argparse
import math
import re

from keras_slim.image import _optimization
from keras_slim.image import nets
from keras_slim.image import preprocessing

#: The `--dataset_name` of the bundled digits.
DIGITS = "digits"


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer: {text}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text}")
    return value


def positive_float(text):
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text}")
    return value


def fraction(text):
    value = finite_float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1): {text}")
    return value


def non_negative_float(text):
    value = finite_float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def scopes(text):
    """`a,b/c` -> ['a', 'b/c'] (slim's comma-separated scopes)."""
    scopes = [s.strip() for s in text.split(",") if s.strip()]
    for scope in scopes:
        try:
            re.compile(scope)
        except re.error as error:
            raise argparse.ArgumentTypeError(
                f"invalid pattern {scope!r}: {error}"
            ) from None
    return scopes


def multipliers(text):
    """`pattern=value,...` -> {pattern: value}."""
    result = {}
    for item in scopes(text):
        pattern, sep, value = item.rpartition("=")
        try:
            result[pattern] = float(value)
        except ValueError:
            sep = ""
        if not sep or not pattern:
            raise argparse.ArgumentTypeError(
                f"expected pattern=value, got {item!r}"
            )
        if not math.isfinite(result[pattern]):
            # As GradientPolicy: NaN and inf are errors, negatives follow
            # TF-Slim (allowed).
            raise argparse.ArgumentTypeError(
                f"the multiplier of {pattern!r} must be a finite number, "
                f"got {value!r}"
            )
    return result


def labels(text):
    """`0-4` or `5,6,7` -> a list of digits."""
    labels = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            labels += list(range(int(first), int(last or first) + 1))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected digits like 0-4 or 5,7: {text!r}"
            ) from None
    if not labels or any(not 0 <= d <= 9 for d in labels):
        raise argparse.ArgumentTypeError(f"digits must be 0-9: {text!r}")
    if len(set(labels)) != len(labels) or len(labels) < 2:
        raise argparse.ArgumentTypeError(
            f"need at least 2 distinct digits: {text!r}"
        )
    return labels


def add_deployment_flags(add):
    """Adds model_deploy's flags: clones, replicas, parameter servers, the task.

    Args:
        add: The parser's `add_argument`.
    """
    add(
        "--num_clones",
        type=positive_int,
        default=1,
        help="Number of model clones to deploy.",
    )
    add(
        "--clone_on_cpu",
        action="store_true",
        help="Use CPUs to deploy clones (logical CPU devices).",
    )
    add(
        "--worker_replicas",
        type=positive_int,
        default=1,
        help="Number of worker replicas.",
    )
    add(
        "--sync_replicas",
        action="store_true",
        help="Whether or not to synchronize the replicas during training. "
        "With --num_ps_tasks: each step averages the first "
        "--replicas_to_aggregate of --worker_replicas gradients and drops "
        "stale ones (SyncReplicasOptimizer); without parameter servers the "
        "replicas are always synchronous (MultiWorkerMirroredStrategy).",
    )
    add(
        "--replicas_to_aggregate",
        type=positive_int,
        default=None,
        help="The number of gradients to collect before updating params; "
        "the learning rate's decay steps are divided by it (default: "
        "--worker_replicas). Below --worker_replicas the others are backup "
        "workers (needs --num_ps_tasks and --sync_replicas).",
    )
    add(
        "--num_ps_tasks",
        type=non_negative_int,
        default=0,
        help="The number of parameter servers. If the value is 0, then the "
        "parameters are handled locally by the worker.",
    )
    add(
        "--task",
        type=non_negative_int,
        default=None,
        help="Task id of the replica running the training (default: the "
        "index in TF_CONFIG, else 0).",
    )


def add_services_flags(add):
    """Adds slim.learning.train's flags: steps, batch, logs, summaries,
    checkpoints, traces.

    Args:
        add: The parser's `add_argument`.
    """
    add(
        "--max_number_of_steps",
        type=positive_int,
        default=None,
        help="The maximum number of training steps.",
    )
    add(
        "--batch_size",
        type=positive_int,
        default=32,
        help="The number of samples in each batch (per clone).",
    )
    add(
        "--log_every_n_steps",
        type=positive_int,
        default=10,
        help="The frequency with which logs are printed.",
    )
    add(
        "--save_summaries_secs",
        type=positive_float,
        default=600,
        help="The frequency with which summaries are saved, in seconds.",
    )
    add(
        "--save_summaries_steps",
        type=positive_int,
        default=None,
        help="Also save summaries every this many steps.",
    )
    add(
        "--summarize_variables",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Histograms of the variables in the summaries.",
    )
    add(
        "--summarize_activations",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Histograms and sparsity of each layer's output (a "
        "conditional branch in the step; default: on, except for "
        "synchronous steps over parameter servers, whose batches stay on "
        "the workers).",
    )
    add(
        "--summarize_gradients",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="Histograms and norms of the gradients after the policy (a "
        "conditional branch in the step).",
    )
    add(
        "--save_interval_secs",
        type=positive_float,
        default=600,
        help="The frequency with which the model is saved, in seconds.",
    )
    add(
        "--trace_every_n_steps",
        type=positive_int,
        default=None,
        help="Trace the steps beginning at multiples of this (Chrome "
        "traces and TensorBoard profiles in --train_dir).",
    )
    add(
        "--keep_checkpoint_max",
        type=non_negative_int,
        default=5,
        help="Recent checkpoints to keep; 0 keeps every one.",
    )
    add(
        "--keep_checkpoint_every_n_hours",
        type=positive_float,
        default=None,
        help="Also keep one checkpoint every this many hours.",
    )


# Optimizer flags that must lie in [0, 1].
_FRACTIONS = (
    "adadelta_rho",
    "adam_beta1",
    "adam_beta2",
    "momentum",
    "rmsprop_momentum",
    "rmsprop_decay",
)


def add_optimization_flags(add):
    """Adds the optimizer, its learning rate and decay, and the regularization.

    Args:
        add: The parser's `add_argument`.
    """
    add(
        "--optimizer",
        choices=_optimization.OPTIMIZERS,
        default="rmsprop",
        help="The name of the optimizer.",
    )
    add(
        "--learning_rate",
        type=positive_float,
        default=0.01,
        help="Initial learning rate.",
    )
    add(
        "--learning_rate_decay_type",
        choices=_optimization.DECAY_TYPES,
        default="exponential",
        help="Specifies how the learning rate is decayed.",
    )
    add(
        "--num_epochs_per_decay",
        type=positive_float,
        default=2.0,
        help="Number of epochs after which learning rate decays.",
    )
    add(
        "--learning_rate_decay_factor",
        type=positive_float,
        default=0.94,
        help="Learning rate decay factor.",
    )
    add(
        "--end_learning_rate",
        type=non_negative_float,
        default=0.0001,
        help="The minimal end learning rate used by a polynomial decay "
        "learning rate.",
    )
    for name, (default, text) in _optimization.OPTIMIZER_FLAGS.items():
        kind = fraction if name in _FRACTIONS else finite_float
        if name in ("opt_epsilon",):
            kind = positive_float
        add(f"--{name}", type=kind, default=default, help=text)
    add(
        "--label_smoothing",
        type=fraction,
        default=0.0,
        help="The amount of label smoothing.",
    )
    add(
        "--moving_average_decay",
        type=fraction,
        default=None,
        help="The decay to use for the moving average. If left as None, "
        "then moving averages are not used.",
    )
    add(
        "--weight_decay",
        type=non_negative_float,
        default=0.00004,
        help="The weight decay on the model weights.",
    )


def add_fine_tuning_flags(add):
    """Adds the fine-tuning flags: what is restored from a checkpoint, what is
    trained.

    Args:
        add: The parser's `add_argument`.
    """
    add(
        "--checkpoint_path",
        default=None,
        help="The path to a checkpoint from which to fine-tune: a "
        "keras_slim or TF2 checkpoint, a Keras .weights.h5 file, or a "
        "TF-Slim checkpoint (read in TF-Slim's names through the net's "
        "slim_name_map).",
    )
    add(
        "--checkpoint_exclude_scopes",
        type=scopes,
        default=[],
        help="Comma-separated list of scopes of variables to exclude when "
        "restoring from a checkpoint (prefixes of the model's variable "
        "paths, e.g. logits).",
    )
    add(
        "--trainable_scopes",
        type=scopes,
        default=None,
        help="Comma-separated list of scopes to filter the set of "
        "variables to train. By default, None would train all the "
        "variables.",
    )
    add(
        "--ignore_missing_vars",
        action="store_true",
        help="When restoring a checkpoint would ignore missing variables.",
    )


def add_policy_flags(add):
    """Adds keras_slim's gradient policy flags: multipliers, freezing, clipping.

    Args:
        add: The parser's `add_argument`.
    """
    add(
        "--gradient_multipliers",
        type=multipliers,
        default={},
        help="pattern=value,...: multiply the gradients of the variables "
        "whose paths match (object_detection's multiply_gradients_"
        "matching_regex).",
    )
    add(
        "--freeze",
        type=scopes,
        default=[],
        help="Comma-separated scopes whose variables are not trained "
        "(freeze_gradients_matching_regex).",
    )
    add(
        "--clip_gradient_norm",
        type=positive_float,
        default=None,
        help="Clip each gradient to this norm (create_train_op's "
        "clip_gradient_norm).",
    )


def add_logging_flags(add):
    """Adds `--verbosity` (absl's flag, as TF-Slim's scripts had it).

    Args:
        add: The parser's `add_argument`.
    """
    add(
        "-v",
        "--verbosity",
        type=int,
        default=0,
        help="Logging verbosity: 0 prints the command's lines and "
        "TensorFlow's warnings and errors; 1 adds TensorFlow's info lines "
        "and deprecation notices.",
    )


def add_model_flags(add, *, image_size_flag):
    """Adds `--model_name`, the image size flag and `--preprocessing_name`.

    Args:
        add: The parser's `add_argument`.
        image_size_flag: `--train_image_size` or `--eval_image_size`.
    """
    add(
        "--model_name",
        choices=nets.NETWORKS,
        default="digits_cnn",
        help="The name of the architecture to train (keras_slim.image.nets: "
        "TF-Slim's nets, or a small CNN for the digits).",
    )
    add(
        image_size_flag,
        type=positive_int,
        default=None,
        help="The image size (height and width) the network takes "
        "(default: the network's, e.g. 224 for mobilenet_v2).",
    )
    add(
        "--preprocessing_name",
        choices=preprocessing.PREPROCESSING,
        default=None,
        help="The name of the preprocessing to use (default: the "
        "network's, as TF-Slim's preprocessing_factory picks it).",
    )


def add_data_flags(add):
    """Adds `--dataset_name`, `--dataset_dir` and `--labels`."""
    add(
        "--dataset_name",
        default=DIGITS,
        help="The name of the dataset: 'digits' (scikit-learn's 8x8 "
        "digits, bundled) without --dataset_dir; with it, the name of its "
        "TFRecord shards (<name>_<split>_*.tfrecord) or any name for a "
        "folder of class subfolders.",
    )
    add(
        "--dataset_dir",
        default=None,
        help="The directory where the dataset files are stored: a folder "
        "of class subfolders of images, or TF-Slim's TFRecord shards.",
    )
    add(
        "--labels",
        type=labels,
        default=None,
        help="The digits to keep, e.g. 0-4 or 5,7 (digits only; default "
        "all ten).",
    )


def check_flags(p, flags, image_size_flag):
    """Cross-flag checks shared by both commands (argparse errors)."""
    size = getattr(flags, image_size_flag.lstrip("-"))
    if size is not None and size < nets.minimum_image_size(flags.model_name):
        p.error(
            f"argument {image_size_flag}: {flags.model_name} takes images "
            f"of at least {nets.minimum_image_size(flags.model_name)} "
            f"pixels, got {size}"
        )
    if flags.dataset_dir is None and flags.dataset_name != DIGITS:
        p.error(
            f"argument --dataset_name: {flags.dataset_name!r} needs "
            "--dataset_dir (only 'digits' is bundled)"
        )
    if flags.dataset_dir is not None and flags.labels is not None:
        p.error("argument --labels: only for the bundled digits")
