"""Checking, before the first step, that a callback can write its files."""

import contextlib
import os
import uuid

from keras_slim import _backend
from keras_slim._backend import tensorflow as tf


class _LocalFiles:
    """`tf.io.gfile`'s few functions used here, on the local file system
    (off the TensorFlow backend, where no TensorFlow is imported)."""

    exists = staticmethod(os.path.exists)
    isdir = staticmethod(os.path.isdir)
    remove = staticmethod(os.remove)
    GFile = staticmethod(open)

    @staticmethod
    def makedirs(path):
        os.makedirs(path, exist_ok=True)


def _files():
    """The file functions and their errors: TensorFlow's (which also reach
    gs:// and hdfs://) on its backend, the local ones elsewhere."""
    if _backend.is_tensorflow():
        return tf.io.gfile, (OSError, tf.errors.OpError)
    return _LocalFiles, (OSError,)


def _nearest_existing(directory, gfile):
    path = os.path.abspath(directory)
    while not gfile.exists(path):
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
    gfile, errors = _files()
    try:
        if create:
            gfile.makedirs(directory)
            target = directory
        else:
            target = _nearest_existing(directory, gfile)
            if not gfile.isdir(target):
                raise NotADirectoryError(f"{target!r} is not a directory")
        probe = os.path.join(target, f".keras_slim_probe_{uuid.uuid4().hex}")
        try:
            with gfile.GFile(probe, "w") as f:
                f.write("x")  # A byte: an empty file fits on a full disk.
        finally:
            with contextlib.suppress(*errors):
                gfile.remove(probe)
    except errors as error:
        raise ValueError(
            f"Invalid value for argument `{name}`: {what} cannot be written "
            f"there ({type(error).__name__}: {error}). Received: "
            f"{name}={directory!r}. Expected a directory that can be created "
            "and written."
        ) from None
