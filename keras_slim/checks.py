"""The argument checks the library and the image app share."""

import math
import numbers
import os

import numpy as np

from keras_slim._backend import tensorflow as tf

__all__ = [
    "boolean",
    "boolean_or_names",
    "checkpoints_to_keep",
    "invalid",
    "is_int",
    "is_number",
    "no_batch_size_for_dataset",
    "non_negative_int",
    "non_negative_number",
    "numeric_inputs",
    "one_of",
    "path",
    "positive_int",
    "positive_int_or_none",
    "positive_number",
    "positive_number_or_none",
]


def invalid(name, value, expected):
    """The `ValueError` for a bad argument, in Keras's wording.

    Args:
        name: The argument's name.
        value: The value received.
        expected: What would be valid, as words: `"a positive integer"`.

    Returns:
        A `ValueError` (not raised) saying "Invalid value for argument
        `name`. Received: name=value. Expected expected."

    Example:
    ```python
    from keras_slim import checks

    raise checks.invalid("batch_size", 0, "a positive integer")
    ```
    """
    return ValueError(
        f"Invalid value for argument `{name}`. Received: {name}={value!r}. "
        f"Expected {expected}."
    )


def is_int(value):
    """Whether `value` is an integer (numpy's included), not a bool.

    Args:
        value: Any value.

    Returns:
        `True` for a Python or numpy integer, `False` otherwise (`True`
        and `False` included).
    """
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_number(value):
    """Whether `value` is a real number (numpy's included), not a bool.

    Args:
        value: Any value.

    Returns:
        `True` for an int or a float (Python's or numpy's), `False`
        otherwise (`True` and `False` included).
    """
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def positive_int(name, value):
    """`value` as an int if it is a positive integer.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `int(value)`.

    Raises:
        ValueError: unless `value` is an integer above 0.

    Example:
    ```python
    every_n_steps = checks.positive_int("every_n_steps", every_n_steps)
    ```
    """
    if not is_int(value) or value <= 0:
        raise invalid(name, value, "a positive integer")
    return int(value)


def non_negative_int(name, value):
    """`value` as an int if it is an integer >= 0.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `int(value)`.

    Raises:
        ValueError: unless `value` is an integer of at least 0.
    """
    if not is_int(value) or value < 0:
        raise invalid(name, value, "a non-negative integer")
    return int(value)


def positive_int_or_none(name, value):
    """Like `positive_int`, with `None` allowed.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `None`, or `int(value)`.

    Raises:
        ValueError: unless `value` is `None` or an integer above 0.
    """
    if value is None:
        return None
    if not is_int(value) or value <= 0:
        raise invalid(name, value, "a positive integer or None")
    return int(value)


def checkpoints_to_keep(name, value):
    """How many recent checkpoints to keep.

    Args:
        name: The argument's name, for the message.
        value: A non-negative integer or `None`.

    Returns:
        `int(value)`, or `None` (keep every one, as TF1's `Saver`) for 0
        or `None`.

    Raises:
        ValueError: for a negative number or a value that is not an
            integer.
    """
    if value is not None and (not is_int(value) or value < 0):
        raise invalid(
            name,
            value,
            "a non-negative integer (0 or None keeps every checkpoint)",
        )
    return int(value) if value else None


def positive_number(name, value):
    """`value` if it is a finite number above 0.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `value`, unchanged.

    Raises:
        ValueError: unless `value` is a number in (0, inf).
    """
    if not is_number(value) or not 0 < value < math.inf:
        raise invalid(name, value, "a positive number")
    return value


def non_negative_number(name, value):
    """`value` if it is a finite number of at least 0.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `value`, unchanged.

    Raises:
        ValueError: unless `value` is a number in [0, inf).
    """
    if not is_number(value) or not 0 <= value < math.inf:
        raise invalid(name, value, "a non-negative number")
    return value


def positive_number_or_none(name, value):
    """`value` as a float if it is a positive number, or `None`.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `None`, or `float(value)`.

    Raises:
        ValueError: unless `value` is `None` or a number above 0.
    """
    if value is None:
        return None
    if not is_number(value) or not value > 0:
        raise invalid(name, value, "a positive number or None")
    return float(value)


def one_of(name, value, choices):
    """`value` if it is one of `choices`.

    Args:
        name: The argument's name, for the message.
        value: The value received.
        choices: The valid values (the message lists them).

    Returns:
        `value`, unchanged.

    Raises:
        ValueError: when `value` is not in `choices`.

    Example:
    ```python
    kind = checks.one_of("kind", kind, ("fixed", "exponential"))
    ```
    """
    if value not in choices:
        raise invalid(name, value, f"one of {choices}")
    return value


def boolean(name, value):
    """`value` if it is a bool.

    Args:
        name: The argument's name, for the message.
        value: The value received.

    Returns:
        `value`, unchanged.

    Raises:
        ValueError: unless `value` is `True` or `False`.
    """
    if not isinstance(value, bool):
        raise invalid(name, value, "True or False")
    return value


def boolean_or_names(name, value):
    """A bool, or a list of layer names.

    Args:
        name: The argument's name, for the message.
        value: `True`, `False`, or a list or tuple of non-empty strings.

    Returns:
        `value` if a bool, else the names as a tuple.

    Raises:
        ValueError: for anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, str) and v for v in value
    ):
        return tuple(value)
    raise invalid(name, value, "True, False, or a list of layer names")


def path(name, value):
    """`value` as a str if it is a non-empty path.

    Args:
        name: The argument's name, for the message.
        value: A `str` or `os.PathLike`.

    Returns:
        `os.fspath(value)`.

    Raises:
        ValueError: for an empty path or a value that is not a path.
    """
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise invalid(name, value, "a non-empty path")
    return os.fspath(value)


def no_batch_size_for_dataset(batch_size, kind="a tf.data.Dataset"):
    """Refuses a `batch_size` given with a `tf.data.Dataset`.

    Args:
        batch_size: The `batch_size` given with a dataset.
        kind: The input, as words. Defaults to `"a tf.data.Dataset"`.

    Raises:
        ValueError: unless `batch_size` is `None`: a dataset is batched.
    """
    if batch_size is not None:
        raise ValueError(
            f"`batch_size` is only for array data; {kind} is already "
            f"batched. Received: batch_size={batch_size!r}"
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
