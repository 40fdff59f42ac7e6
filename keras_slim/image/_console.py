"""What the commands print: their own lines, and TensorFlow's warnings."""

import logging
import os
import sys

import tensorflow as tf

from keras_slim import _backend


class _NoDeprecations(logging.Filter):
    """Drops TensorFlow's deprecation notices (`... is deprecated ...`)."""

    def filter(self, record):
        return "deprecat" not in record.getMessage().lower()


def check_backend(parser):
    """Refuses to run a command on a Keras backend other than TensorFlow,
    before anything else: the commands' input (tf.data), nets (TF-Slim's
    layers, the fused batch norm) and checkpoints are TensorFlow's.

    Args:
        parser: The command's `argparse.ArgumentParser`: its `error`
            prints the message and exits with status 2.
    """
    try:
        _backend.require_tensorflow(
            parser.prog,
            "KERAS_BACKEND=tensorflow for this command (or unset it)",
            why="tf.data input, TF-Slim's nets and checkpoints",
        )
    except RuntimeError as error:
        parser.error(str(error))


def configure(verbosity, to_stderr=False):
    """Sets up the command's logging for `--verbosity`.

    Args:
        verbosity: absl's `--verbosity`: 0 (the default) for the command's
            lines and TensorFlow's warnings and errors, 1 or more for
            TensorFlow's info lines and deprecation notices too.
    """
    handler = logging.StreamHandler(sys.stderr if to_stderr else sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    ours = logging.getLogger("keras_slim")
    ours.handlers[:] = [handler]
    ours.setLevel(logging.DEBUG if verbosity >= 2 else logging.INFO)
    ours.propagate = False
    theirs = tf.get_logger()
    for old in [f for f in theirs.filters if isinstance(f, _NoDeprecations)]:
        theirs.removeFilter(old)
    if verbosity >= 1:
        theirs.setLevel(logging.INFO)
    else:
        theirs.setLevel(logging.WARNING)
        theirs.addFilter(_NoDeprecations())


def exit_now(code):
    """Ends the process with `code` once its output is out, skipping the
    interpreter's teardown of TensorFlow's objects.

    When a command's `main` returns, everything it writes is on disk:
    checkpoints are written synchronously, the summary writers flushed at
    the end of training or of each evaluation. What is left is teardown,
    and there the destructor of a `tf.data` iterator waits, idle, for its
    pipeline's threads: up to 37 s of nothing after keras-slim-train on
    resnet_v1_50, in one exit out of three (bench/vs_tf_slim_nets.py
    `--logs`). After a success the console scripts end as `os._exit`
    does; an error's exit (a run stopped by a NaN or a signal, a bad
    flag) keeps the teardown, which flushes whatever the failure left
    unflushed. `main` itself, called from Python, returns as before.

    Args:
        code: The exit code (`main`'s return value).

    Example:
        >>> _console.exit_now(main())  # doctest: +SKIP
    """
    if code != 0:
        sys.exit(code)
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
