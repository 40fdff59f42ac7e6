"""Checking, before the first step, that a callback can write its files."""

import contextlib
import os
import uuid

from keras_slim._backend import tensorflow as tf


def _nearest_existing(directory):
    path = os.path.abspath(directory)
    while not tf.io.gfile.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def check_writable(name, directory, *, what, create):
    """Raises a ValueError unless files can be written in `directory`.

    Args:
        name: The argument's name, for the message.
        directory: The directory the callback will write to.
        what: What the callback writes ("checkpoints"), for the message.
        create: Whether to create `directory` now. Without it, the nearest
            existing ancestor is test-written instead, so that a callback
            that may write nothing leaves nothing behind.

    Raises:
        ValueError: naming `directory`, when it cannot be created or written.
    """
    try:
        if create:
            tf.io.gfile.makedirs(directory)
            target = directory
        else:
            target = _nearest_existing(directory)
            if not tf.io.gfile.isdir(target):
                raise NotADirectoryError(f"{target!r} is not a directory")
        probe = os.path.join(target, f".keras_slim_probe_{uuid.uuid4().hex}")
        try:
            with tf.io.gfile.GFile(probe, "w") as f:
                f.write("x")  # A byte: an empty file fits on a full disk.
        finally:
            with contextlib.suppress(OSError, tf.errors.OpError):
                tf.io.gfile.remove(probe)
    except (OSError, tf.errors.OpError) as error:
        raise ValueError(
            f"Invalid value for argument `{name}`: {what} cannot be written "
            f"there ({type(error).__name__}: {error}). Received: "
            f"{name}={directory!r}. Expected a directory that can be created "
            "and written."
        ) from None
