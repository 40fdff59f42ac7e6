"""Argument checks shared by the callbacks, with Keras-style messages."""

import numbers
import os

import numpy as np
import tensorflow as tf


def invalid(name, value, expected):
    """Returns the ValueError for a bad argument, in Keras's wording."""
    return ValueError(
        f"Invalid value for argument `{name}`. Received: {name}={value!r}. "
        f"Expected {expected}."
    )


def is_int(value):
    """Whether `value` is an integer (numpy's included), not a bool."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive_int(name, value):
    """Returns `value` as an int if it is a positive integer, else raises."""
    if not is_int(value) or value <= 0:
        raise invalid(name, value, "a positive integer")
    return int(value)


def non_negative_int(name, value):
    """Returns `value` as an int if it is an integer >= 0, else raises."""
    if not is_int(value) or value < 0:
        raise invalid(name, value, "a non-negative integer")
    return int(value)


def positive_int_or_none(name, value):
    """Like `positive_int`, with `None` allowed."""
    if value is None:
        return None
    if not is_int(value) or value <= 0:
        raise invalid(name, value, "a positive integer or None")
    return int(value)


def checkpoints_to_keep(name, value):
    """How many recent checkpoints to keep: a non-negative integer or
    `None`; returns `None` (keep every one, as TF1's `Saver`) for 0."""
    if value is not None and (not is_int(value) or value < 0):
        raise invalid(
            name,
            value,
            "a non-negative integer (0 or None keeps every checkpoint)",
        )
    return int(value) if value else None


def positive_number_or_none(name, value):
    """Returns `value` as a float if it is a positive number or `None`."""
    if value is None:
        return None
    if not _is_number(value) or not value > 0:
        raise invalid(name, value, "a positive number or None")
    return float(value)


def boolean(name, value):
    """Returns `value` if it is a bool, else raises."""
    if not isinstance(value, bool):
        raise invalid(name, value, "True or False")
    return value


def boolean_or_names(name, value):
    """`value` if a bool, else a tuple of non-empty str (layer names)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, str) and v for v in value
    ):
        return tuple(value)
    raise invalid(name, value, "True, False, or a list of layer names")


def path(name, value):
    """Returns `value` as a str if it is a non-empty path, else raises."""
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise invalid(name, value, "a non-empty path")
    return os.fspath(value)


def no_batch_size_for_dataset(batch_size):
    """Raises unless `batch_size` is None: a tf.data.Dataset is batched."""
    if batch_size is not None:
        raise ValueError(
            "`batch_size` is only for array data; a tf.data.Dataset is "
            f"already batched. Received: batch_size={batch_size!r}"
        )


def _fed_dtypes(x):
    """The dtypes of the features `x` feeds: of a dataset of `(x, y)`
    batches, or of arrays; `None` where they are not known."""
    if isinstance(x, tf.data.Dataset):
        spec = x.element_spec
        features = spec[0] if isinstance(spec, tuple) and spec else spec
        return [s.dtype for s in tf.nest.flatten(features)]
    leaves = tf.nest.flatten(x)
    if not leaves or not all(isinstance(v, np.ndarray) for v in leaves):
        return None
    return [
        tf.string if v.dtype.kind in "USO" else tf.as_dtype(v.dtype)
        for v in leaves
    ]


def numeric_inputs(model, x):
    """Text fed to a model whose inputs take numbers: an error naming both
    dtypes, before TensorFlow's graph error.

    Args:
        model: A Keras model (its `inputs`, where it has them).
        x: The data given to `fit` or `train`: a `tf.data.Dataset` of
            `(x, y)` batches, or arrays of features.

    Raises:
        ValueError: when `x` holds strings for an input that does not take
            them.
    """
    inputs = getattr(model, "inputs", None)
    fed = _fed_dtypes(x) if inputs else None
    if not fed or len(fed) != len(inputs):
        return
    for tensor, given in zip(inputs, fed):
        wanted = tf.as_dtype(str(tensor.dtype))
        if given == tf.string and wanted != tf.string:
            raise ValueError(
                f"x holds strings (dtype {given.name}), but the model's "
                f"input {tensor.name!r} takes {wanted.name}. Convert the "
                "features to numbers first (or start the model with a layer "
                "that takes text, such as TextVectorization)."
            )
