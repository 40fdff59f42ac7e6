"""The flags of `keras-slim-train` and `keras-slim-eval`, in groups.

TF-Slim's train_image_classifier.py and eval_image_classifier.py define
their flags in sections (deployment, optimization, learning rate,
dataset, fine-tuning); here each section is a function adding its flags
to a `_flag_parser.FlagParser` (absl's flags, as `tf.app.flags` was),
and the sections the two commands share (the model and the data) are
added by both. Every flag has TF-Slim's name, default and help. The
converters below take the flag's text and raise `ValueError` saying what
is wrong; absl names the flag and the value.
"""

from keras_slim.image import _best_checkpoint as best_checkpoint
from keras_slim.image import learning_rate
from keras_slim.image import nets
from keras_slim.image import optimizer as optimizer_lib
from keras_slim.image import preprocessing
from keras_slim.image._flag_types import finite_float
from keras_slim.image._flag_types import fraction
from keras_slim.image._flag_types import labels
from keras_slim.image._flag_types import lr_multipliers
from keras_slim.image._flag_types import multipliers
from keras_slim.image._flag_types import non_negative_float
from keras_slim.image._flag_types import non_negative_int
from keras_slim.image._flag_types import positive_float
from keras_slim.image._flag_types import positive_int
from keras_slim.image._flag_types import randaugment
from keras_slim.image._flag_types import scopes

#: The `--dataset_name` of the bundled digits.
DIGITS = "digits"


def add_deployment_flags(add):
    """Adds model_deploy's flags: clones, replicas, parameter servers, the task.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "num_clones",
        1,
        "Number of model clones to deploy.",
        parse=positive_int,
    )
    add(
        "clone_on_cpu",
        False,
        "Use CPUs to deploy clones (logical CPU devices).",
    )
    add(
        "worker_replicas",
        1,
        "Number of worker replicas.",
        parse=positive_int,
    )
    add(
        "sync_replicas",
        False,
        "Whether or not to synchronize the replicas during training. "
        "With --num_ps_tasks: each step averages the first "
        "--replicas_to_aggregate of --worker_replicas gradients and drops "
        "stale ones (SyncReplicasOptimizer); without parameter servers the "
        "replicas are always synchronous (MultiWorkerMirroredStrategy).",
    )
    add(
        "replicas_to_aggregate",
        None,
        "The number of gradients to collect before updating params; "
        "the learning rate's decay steps are divided by it (default: "
        "--worker_replicas). Below --worker_replicas the others are backup "
        "workers (needs --num_ps_tasks and --sync_replicas).",
        parse=positive_int,
    )
    add(
        "num_ps_tasks",
        0,
        "The number of parameter servers. If the value is 0, then the "
        "parameters are handled locally by the worker.",
        parse=non_negative_int,
    )
    add(
        "task",
        None,
        "Task id of the replica running the training (default: the "
        "index in TF_CONFIG, else the rank in a SLURM job step, else 0).",
        parse=non_negative_int,
    )
    add(
        "slurm_port_base",
        8888,
        "In a SLURM job step (srun) without TF_CONFIG: the port of each "
        "node's first task, the node's other tasks on the next ports.",
        parse=positive_int,
    )


def add_services_flags(add):
    """Adds slim.learning.train's flags: steps, batch, logs, summaries,
    checkpoints, traces.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "max_number_of_steps",
        None,
        "The maximum number of training steps.",
        parse=positive_int,
    )
    add(
        "batch_size",
        32,
        "The number of samples in each batch (per clone).",
        parse=positive_int,
    )
    add(
        "log_every_n_steps",
        10,
        "The frequency with which logs are printed.",
        parse=positive_int,
    )
    add(
        "save_summaries_secs",
        600,
        "The frequency with which summaries are saved, in seconds.",
        parse=positive_float,
    )
    add(
        "save_summaries_steps",
        None,
        "Also save summaries every this many steps.",
        parse=positive_int,
    )
    add(
        "summarize_variables",
        True,
        "Histograms of the variables in the summaries.",
        boolean=True,
    )
    add(
        "summarize_activations",
        None,
        "Histograms and sparsity of the net's end_points (as "
        "train_image_classifier; every layer's output for digits_cnn), "
        "from the step's own forward pass (a "
        "conditional branch in the step; default: on, except for "
        "synchronous steps over parameter servers, whose batches stay on "
        "the workers).",
        boolean=True,
    )
    add(
        "summarize_gradients",
        False,
        "Histograms and norms of the gradients after the policy (a "
        "conditional branch in the step).",
        boolean=True,
    )
    add(
        "save_interval_secs",
        600,
        "The frequency with which the model is saved, in seconds.",
        parse=positive_float,
    )
    add(
        "trace_every_n_steps",
        None,
        "Trace the steps beginning at multiples of this (Chrome "
        "traces and TensorBoard profiles in --train_dir).",
        parse=positive_int,
    )
    add(
        "keep_checkpoint_max",
        5,
        "Recent checkpoints to keep; 0 keeps every one.",
        parse=non_negative_int,
    )
    add(
        "keep_checkpoint_every_n_hours",
        None,
        "Also keep one checkpoint every this many hours.",
        parse=positive_float,
    )
    add(
        "rollback_on_nan",
        0,
        "How many times a non-finite loss or gradient rolls back to the "
        "last checkpoint, skips the batch that diverged and goes on, "
        "before one stops training (keras_slim's; 0: stop at the first, "
        "as TF-Slim).",
        parse=non_negative_int,
    )


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


def add_logging_flags(add):
    """Adds absl's logging flags TF-Slim's scripts took: `--verbosity`,
    `--alsologtostderr`, `--logtostderr`.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "verbosity",
        0,
        "Logging verbosity: 0 prints the command's lines and "
        "TensorFlow's warnings and errors; 1 adds TensorFlow's info lines "
        "and deprecation notices.",
        parse=int,
        short_name="v",
    )
    add(
        "alsologtostderr",
        False,
        "Print the command's log lines to stderr (instead of stdout).",
    )
    add(
        "logtostderr",
        False,
        "Print the command's log lines to stderr (instead of stdout).",
    )


def add_master_flag(add):
    """Adds TF-Slim's `--master` (a TF1 session target).

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "master",
        "",
        "The address of the TensorFlow master to use. Only '' (this "
        "process) is taken: keras_slim finds the cluster in TF_CONFIG "
        "(keras-slim-cluster writes it) with --worker_replicas, --task "
        "and --num_ps_tasks, as tf.distribute does.",
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


def add_data_flags(add, *, training):
    """Adds the dataset's flags: name, directory, split, labels, readers.

    Args:
        add: The command's `FlagParser.add`.
        training: `True` for keras-slim-train (adds `--num_readers`;
            split `train`), `False` for keras-slim-eval.
    """
    add(
        "dataset_name",
        DIGITS,
        "The name of the dataset to load: 'digits' (scikit-learn's 8x8 "
        "digits, bundled) without --dataset_dir; with it, one of TF-Slim's "
        "dataset_factory names (flowers, cifar10, mnist, imagenet, "
        "visualwakewords), read in TF-Slim's layout, or any name: TFRecord "
        "shards <name>_<split>_*.tfrecord, one file <name>_<split>.tfrecord, "
        "or a folder of class subfolders.",
    )
    add(
        "dataset_split_name",
        "train" if training else None,
        "The name of the train/test split"
        + (
            "."
            if training
            else " (default: the dataset's held-out split: test for cifar10 "
            "and mnist, val for visualwakewords, validation otherwise)."
        ),
    )
    add(
        "dataset_dir",
        None,
        "The directory where the dataset files are stored: TF-Slim's "
        "TFRecords (as its download_and_convert scripts and "
        "build_imagenet_data write them) or a folder of class subfolders.",
    )
    add(
        "labels_offset",
        0,
        "An offset for the labels in the dataset. This flag is primarily "
        "used to evaluate the VGG and ResNet architectures which do not use "
        "a background class for the ImageNet dataset.",
        parse=non_negative_int,
    )
    if training:
        add(
            "num_readers",
            4,
            "The number of parallel readers that read data from the "
            "dataset (TFRecord files read at a time, in order; by "
            "parallel calls for remote files, gs://..., by one thread for "
            "local ones, the same records in the same order).",
            parse=positive_int,
        )
    add(
        "num_preprocessing_threads",
        4,
        "The number of threads used to create the batches (parallel "
        "decode and preprocessing calls).",
        parse=positive_int,
    )
    add(
        "use_grayscale",
        False,
        "Whether to convert input images to grayscale.",
    )
    add(
        "labels",
        None,
        "The digits to keep, e.g. 0-4 or 5,7 (digits only; default all ten).",
        parse=labels,
    )


def add_augmentation_flags(add):
    """Adds keras-slim-train's recipe flags (not TF-Slim's; all off by
    default): `--randaugment`, `--mixup_alpha`, `--cutmix_alpha`.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "randaugment",
        None,
        "N,M: Keras's RandAugment on each training image (timm's "
        "rand-mM-nN): N of its 11 operations (1-11), each at most M/10 "
        "(M in 0-10) of its strength, on the decoded image before the "
        "preprocessing. Unset: off.",
        parse=randaugment,
    )
    add(
        "mixup_alpha",
        0.0,
        "MixUp's Beta(alpha, alpha) on each training batch (Keras's "
        "MixUp; soft labels); 0: off.",
        parse=non_negative_float,
    )
    add(
        "cutmix_alpha",
        0.0,
        "CutMix's Beta(alpha, alpha), at most 1 (Keras's CutMix; the "
        "label weight is the pasted area); 0: off. With --mixup_alpha "
        "each batch gets one or the other, 0.5 each.",
        parse=non_negative_float,
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


def add_best_flags(add, *, training):
    """Adds `--keep_best` and `--best_metric`: the best checkpoint kept in
    `best/` (`keras_slim/image/_best_checkpoint.py`).

    Args:
        add: The command's `FlagParser.add`.
        training: Whether for keras-slim-train (off by default: each
            save then costs an evaluation), else keras-slim-eval (on).
    """
    kept = (
        "The chief evaluates the held-out split at each checkpoint save "
        "(the moving averages with --moving_average_decay) and keeps"
        if training
        else "Keep"
    )
    where = "--train_dir" if training else "--eval_dir"
    add(
        "keep_best",
        not training,
        f"{kept} a copy of the checkpoint with the best --best_metric in "
        f"{where}/best/ (a checkpoint directory, with best.json), replaced "
        "only by a strictly better one (a tie keeps the earlier), also "
        "across reruns.",
        boolean=True,
    )
    add(
        "best_metric",
        "accuracy",
        "The metric --keep_best goes by: accuracy or recall_5 (top-5, "
        "more than 5 classes), higher-better, or loss, lower-better.",
        choices=best_checkpoint.METRICS,
    )


#: Why `--quantize_delay` / `--quantize` are refused, and what to use.
QUANTIZATION = (
    "quantization-aware training (tf.contrib.quantize in TF-Slim) is not "
    "built in keras_slim; use the TensorFlow Model Optimization Toolkit "
    "(tfmot.quantization.keras.quantize_model) on the network, and "
    "TFLite's converter for a quantized model"
)


def check_image_size(p, flags, image_size_flag):
    """Refuses an image size below the net's minimum (`p.error`)."""
    size = getattr(flags, image_size_flag.lstrip("-"))
    if size is not None and size < nets.minimum_image_size(flags.model_name):
        p.error(
            f"flag {image_size_flag}: {flags.model_name} takes images "
            f"of at least {nets.minimum_image_size(flags.model_name)} "
            f"pixels, got {size}"
        )


def check_digits_flags(p, flags):
    """Refuses `--labels` off the bundled digits and `--labels_offset` on
    them (`p.error`)."""
    digits = flags.dataset_dir is None and flags.dataset_name == DIGITS
    if not digits and flags.labels is not None:
        p.error("flag --labels: only for the bundled digits")
    if digits and flags.labels_offset:
        p.error(
            "flag --labels_offset: the bundled digits have no "
            f"background class to offset; got {flags.labels_offset}"
        )


def check_flags(p, flags, image_size_flag):
    """Cross-flag checks shared by both commands (`p.error`: exit code 2)."""
    check_image_size(p, flags, image_size_flag)
    if flags.dataset_dir is None and flags.dataset_name != DIGITS:
        p.error(
            f"flag --dataset_name: {flags.dataset_name!r} needs "
            "--dataset_dir (only 'digits' is bundled)"
        )
    check_digits_flags(p, flags)
    if flags.master:
        p.error(
            f"flag --master: {flags.master!r} is a TF1 session target; "
            "keras_slim takes the cluster from TF_CONFIG with "
            "--worker_replicas, --task and --num_ps_tasks (keras-slim-cluster "
            "starts one): leave --master=''"
        )
    if getattr(flags, "quantize_delay", -1) >= 0:
        p.error(f"flag --quantize_delay: {QUANTIZATION}")
    if getattr(flags, "quantize", False):
        p.error(f"flag --quantize: {QUANTIZATION}")


def add_dry_run_flag(add):
    """Adds `--dry_run`: say what the run would do, then exit.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "dry_run",
        False,
        "Print what the run will do (the summary every run prints at its "
        "start: the deployment, the global batch, the steps of an epoch, "
        "the learning rate's decay in steps, the optimizer, the steps, the "
        "checkpoint it resumes or warm-starts from, the precision, the "
        "variables trained and frozen) and exit 0 before the first step, "
        "writing nothing in --train_dir. Connects to no cluster: with "
        "--worker_replicas or --num_ps_tasks the deployment is said from "
        "the flags.",
    )
