"""`keras-slim-eval`: TF-Slim's eval_image_classifier.py on keras_slim."""

import logging
import os
import sys

import keras
import tensorflow as tf

from keras_slim.image import _best_checkpoint
from keras_slim.image import _console
from keras_slim.image import _flag_parser
from keras_slim.image import _flag_types
from keras_slim.image import _flags
from keras_slim.image import _inference_checkpoint
from keras_slim.image import _task
from keras_slim.image import evaluation
from keras_slim.image import nets

_LOG = logging.getLogger("keras_slim")


def parser():
    """The command's flags (absl's), with TF-Slim's names, defaults and help.

    Returns:
        A `FlagParser`: `parser().parse_args(argv)` returns the flags.
    """
    p = _flag_parser.FlagParser("keras-slim-eval", __doc__.split("\n\n")[0])
    add = p.add
    add(
        "checkpoint_path",
        "/tmp/tfmodel/",
        "The directory where the model was written to or an absolute "
        "path to a checkpoint file.",
    )
    add(
        "eval_dir",
        None,
        "Directory where the results are saved to (default: "
        "<checkpoint directory>/eval, shown by TensorBoard beside "
        "training).",
    )
    add(
        "batch_size",
        100,
        "The number of samples in each batch.",
        parse=_flag_types.positive_int,
    )
    add(
        "max_num_batches",
        None,
        "Max number of batches to evaluate by default use all.",
        parse=_flag_types.positive_int,
    )
    add(
        "eval_interval_secs",
        None,
        "Evaluate each new checkpoint of the directory, looking every "
        "this many seconds (default: evaluate the latest once).",
        parse=_flag_types.positive_float,
    )
    add(
        "timeout",
        600,
        "With --eval_interval_secs: stop when no new checkpoint has "
        "appeared for this many seconds.",
        parse=_flag_types.positive_float,
    )
    add(
        "max_number_of_steps",
        None,
        "With --eval_interval_secs: stop after evaluating a checkpoint "
        "of this global step or later (the end of training).",
        parse=_flag_types.positive_int,
    )
    _flags.add_inference_average_flag(add)
    _flags.add_best_flags(add, training=False)
    _flags.add_model_flags(add, image_size_flag="--eval_image_size")
    _flags.add_data_flags(add, training=False)
    _flags.add_quantization_flag(add, training=False)
    _flags.add_master_flag(add)
    _flags.add_logging_flags(add)
    return p


def _eval_dir(flags):
    if flags.eval_dir:
        return flags.eval_dir
    directory = flags.checkpoint_path
    if not os.path.isdir(directory):
        directory = os.path.dirname(directory)
    return os.path.join(directory, "eval")


def _evaluate_checkpoint(evaluator, task, path, writer, flags, *, keeper=None):
    step, averaged = _inference_checkpoint.restore(
        evaluator.model,
        path,
        model_name=flags.model_name,
        moving_average_decay=flags.moving_average_decay,
    )
    with _task.images_named(task):
        results = evaluator(
            task.make_dataset(None), max_num_batches=flags.max_num_batches
        )
    values = {
        "eval/Accuracy": results["accuracy"],
        "eval/loss": results["loss"],
    }
    if results["recall_5"] is not None:
        values["eval/Recall_5"] = results["recall_5"]
    with writer.as_default(step=step):
        for tag, value in values.items():
            tf.summary.scalar(tag, value)
    writer.flush()
    shown = ", ".join(f"{tag} = {value:.4f}" for tag, value in values.items())
    print(
        f"global step {step}: {shown} ({results['count']} images"
        f"{', moving averages' if averaged else ''})",
        flush=True,
    )
    if keeper is not None:
        keeper.consider(path, step=step, results=results)
    return step


def _checkpoints(flags):
    """The checkpoints to evaluate, as they appear."""
    path = flags.checkpoint_path
    if not os.path.isdir(path):
        yield path
        return
    if flags.eval_interval_secs is None:
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(
                f"No checkpoint in --checkpoint_path={path!r} (looked for "
                "its `checkpoint` state file). Train first, or pass "
                "--eval_interval_secs to wait for one."
            )
        yield latest
        return
    yield from tf.train.checkpoints_iterator(
        path, min_interval_secs=flags.eval_interval_secs, timeout=flags.timeout
    )
    print(
        f"keras-slim-eval: no new checkpoint in {path} for "
        f"{flags.timeout:g} s (--timeout): stopping.",
        flush=True,
    )


def _keeper(flags, task):
    """The `BestCheckpoint` of `<eval_dir>/best/` (the best so far read),
    or `None`: `--nokeep_best`, or a best directory evaluated."""
    if not flags.keep_best:
        return None
    _best_checkpoint.check_metric(
        flags.best_metric, num_classes=task.num_classes
    )
    if _best_checkpoint.checkpoint_is_a_best(flags.checkpoint_path):
        _LOG.info(
            "Not keeping a best: %s is a kept best checkpoint.",
            flags.checkpoint_path,
        )
        return None
    return _best_checkpoint.BestCheckpoint.open(
        _eval_dir(flags), metric=flags.best_metric
    )


def run(flags):
    """Evaluates as the flags say; returns the exit code."""
    task = _task.task(
        flags,
        split=flags.dataset_split_name or _task.held_out_split(flags),
        batch_size=flags.batch_size,
        image_size=flags.eval_image_size,
        is_training=False,
    )
    keras.utils.set_random_seed(0)
    model = nets.build(
        task.model_name,
        task.num_classes,
        image_size=task.image_size,
        channels=task.channels,
    )
    keeper = _keeper(flags, task)
    evaluator = evaluation.Evaluator(model)
    writer = tf.summary.create_file_writer(_eval_dir(flags))
    for path in _checkpoints(flags):
        step = _evaluate_checkpoint(
            evaluator, task, path, writer, flags, keeper=keeper
        )
        if flags.max_number_of_steps and step >= flags.max_number_of_steps:
            break
    return 0


def main(argv=None):
    """The console script `keras-slim-eval`."""
    p = parser()
    flags = p.parse_args(argv)
    _console.check_backend(p)
    _flags.check_flags(p, flags, "--eval_image_size")
    _inference_checkpoint.check_checkpoint_path(
        p, flags.checkpoint_path, purpose="evaluates", waits=True
    )
    _console.configure(
        flags.verbosity, flags.alsologtostderr or flags.logtostderr
    )
    try:
        return run(flags)
    except (ValueError, FileNotFoundError) as error:
        print(f"keras-slim-eval: error: {error}", file=sys.stderr)
        return 2


__all__ = ["main", "parser"]


def console():
    """The console script `keras-slim-eval`: `main()`, then the exit
    (`_console.exit_now`)."""
    _console.exit_now(main())


if __name__ == "__main__":
    console()
