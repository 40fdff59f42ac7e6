"""The training services' flags: steps, logs, summaries, checkpoints."""

from keras_slim.image import _best_checkpoint as best_checkpoint
from keras_slim.image._flag_types import non_negative_int
from keras_slim.image._flag_types import positive_float
from keras_slim.image._flag_types import positive_int

__all__ = [
    "add_best_flags",
    "add_dry_run_flag",
    "add_logging_flags",
    "add_services_flags",
]


def add_services_flags(add):
    """Adds slim.learning.train's flags: steps, batch, logs, summaries,
    checkpoints, traces.

    Args:
        add: The command's `FlagParser.add`.
    """
    _add_step_flags(add)
    _add_summary_flags(add)
    _add_checkpoint_flags(add)


def _add_step_flags(add):
    """Adds the steps, the batch and how often a line is logged.

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


def _add_summary_flags(add):
    """Adds when summaries are written and what they hold.

    Args:
        add: The command's `FlagParser.add`.
    """
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


def _add_checkpoint_flags(add):
    """Adds when checkpoints are saved and kept, traces, and the
    rollbacks on a non-finite loss.

    Args:
        add: The command's `FlagParser.add`.
    """
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
