"""Argument checks shared by the callbacks, with Keras-style messages."""

import numbers
import os


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


def positive_int_or_none(name, value):
    """Like `positive_int`, with `None` allowed."""
    if value is None:
        return None
    if not is_int(value) or value <= 0:
        raise invalid(name, value, "a positive integer or None")
    return int(value)


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
