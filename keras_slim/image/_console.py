"""What the commands print: their own lines, and TensorFlow's warnings.

`keras-slim-train` and `keras-slim-eval` print their own lines (the
keras_slim logger's, on stdout) and TensorFlow's warnings and errors; not
TensorFlow's info lines (its C++ level is set before it loads,
`keras_slim/_startup.py`) nor its deprecation notices. `--verbosity 1`
(absl's flag) brings both back.
"""

import logging
import sys

import tensorflow as tf


class _NoDeprecations(logging.Filter):
    """Drops TensorFlow's deprecation notices (`... is deprecated ...`)."""

    def filter(self, record):
        return "deprecat" not in record.getMessage().lower()


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
