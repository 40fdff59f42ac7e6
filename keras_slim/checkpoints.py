"""TF-Slim's variables functions: read a checkpoint, restore from it."""

import collections
import logging
import os

from keras_slim import _checkpoint_readers
from keras_slim import _variable_maps
from keras_slim.gradients import variable_path

__all__ = [
    "CheckpointVariable",
    "checkpoint_format",
    "assign_from_checkpoint",
    "assign_from_values",
    "available_in_checkpoint",
    "list_variables",
    "variables_to_restore",
]

_LOG = logging.getLogger("keras_slim")

CheckpointVariable = collections.namedtuple(
    "CheckpointVariable", ["name", "shape", "dtype"]
)
CheckpointVariable.__doc__ = """One entry of `list_variables`: name, shape
(a tuple of ints) and dtype (a string such as `"float32"`)."""


def list_variables(path):
    """Lists what a checkpoint holds, in any format warm start reads.

    Names by format:

    - TF1 name-based (TF-Slim, `tf.compat.v1.train.Saver`): the variable
      names, `InceptionV1/Conv2d_1a_7x7/weights`;
    - TF2 object-based (`tf.train.Checkpoint`, `Checkpoints`): the object
      paths read back from the checkpoint's object graph,
      `model/layer1/kernel`, `optimizer/_iterations`;
    - Keras `.weights.h5` / `.keras`: the HDF5 dataset paths,
      `layers/dense/vars/0`.

    Args:
        path: A checkpoint directory (its latest checkpoint), a checkpoint
            prefix, or a `.weights.h5` / `.keras` file.

    Returns:
        A list of `CheckpointVariable(name, shape, dtype)`, sorted by name.

    Raises:
        FileNotFoundError: if there is no checkpoint at `path`.
        ValueError: if `path` is not a checkpoint, or a truncated or
            damaged one (the message names it).

    Example:
    ```python
    for name, shape, dtype in list_variables("/tmp/pretrain"):
        print(name, shape, dtype)
    ```
    """
    reader = _checkpoint_readers.resolve(path)
    try:
        return [
            CheckpointVariable(name, shape, dtype)
            for name, (shape, dtype) in sorted(reader.entries.items())
        ]
    finally:
        reader.close()


def checkpoint_format(path):
    """Which kind of checkpoint `path` is.

    Args:
        path: A checkpoint directory (its latest checkpoint), a checkpoint
            prefix, or a `.weights.h5` / `.keras` file.

    Returns:
        `"tf1"` for a TF1 name-based checkpoint (TF-Slim's,
        `tf.compat.v1.train.Saver`'s), `"tf2"` for an object-based one
        (`tf.train.Checkpoint`, keras_slim's `Checkpoints`), `"keras"` for
        a Keras weights file.

    Raises:
        FileNotFoundError: if there is no checkpoint at `path`.
        ValueError: if `path` is not a checkpoint, or a truncated or
            damaged one (the message names it).

    Example:
    ```python
    if checkpoint_format(path) == "tf1":
        name_map = nets.slim_name_map("inception_v3")  # TF-Slim's names
    ```
    """
    reader = _checkpoint_readers.resolve(path)
    try:
        return reader.kind
    finally:
        reader.close()


def variables_to_restore(model, include=None, exclude=None):
    """The model variables a warm start restores (slim's function).

    TF-Slim's `get_variables_to_restore(include, exclude)` with the model
    first: `variables_to_restore(model, ["a"], ["a/c"])` as ported code
    calls `slim.get_variables_to_restore(["a"], ["a/c"])`.

    Every variable of the model, trainable or not (batch-norm statistics
    included), except the state of random seed generators (dropout's),
    which is not a weight; then filtered by `re.match` on the path.

    Args:
        model: A built Keras model.
        include: A pattern or list of patterns; when given, only variables
            whose path matches one are kept.
            Defaults to `None`.
        exclude: A pattern or list of patterns; variables whose path
            matches one are dropped (train_image_classifier's
            `--checkpoint_exclude_scopes`).
            Defaults to `None`.

    Returns:
        A list of variables, in the model's order.

    Raises:
        ValueError: for a pattern that is not a valid regular expression.

    Example:
    ```python
    backbone = variables_to_restore(model, exclude=["logits/"])
    ```
    """
    include = _variable_maps.compile_patterns("include", include)
    exclude = _variable_maps.compile_patterns("exclude", exclude) or []
    selected = []
    for variable in _variable_maps.model_variables(model).values():
        path = variable_path(variable)
        if _variable_maps.is_seed_state(path):
            continue
        if include is not None and not any(p.match(path) for p in include):
            continue
        if any(p.match(path) for p in exclude):
            continue
        selected.append(variable)
    return selected


def available_in_checkpoint(var_map, path):
    """The entries of `var_map` that the checkpoint holds, shapes matching.

    object_detection's `get_variables_available_in_checkpoint`: use it to
    restore whatever a checkpoint has, skipping the rest.

    Args:
        var_map: A dict {checkpoint key: variable}, or a list of variables
            (keyed by path). For a TF2 checkpoint whose root has a `model`
            object (keras_slim's), keys are paths below it.
        path: A checkpoint directory, prefix or Keras weights file.

    Returns:
        A dict {checkpoint key: variable}.

    Raises:
        FileNotFoundError: if there is no checkpoint at `path`.
        ValueError: if `path` is not a checkpoint, or a truncated or
            damaged one (the message names it).

    Example:
    ```python
    var_map = available_in_checkpoint(variables_to_restore(model), ckpt)
    assign_from_checkpoint(ckpt, var_map)
    ```
    """
    var_map = _variable_maps.as_var_map(var_map)
    reader = _checkpoint_readers.resolve(path)
    try:
        found, _, _ = _variable_maps.split(var_map, reader)
    finally:
        reader.close()
    return {key: variable for key, (_, variable) in found.items()}


def _path_and_map(first, second):
    """`(path, var_map)` of the two arguments, in either order: a path is a
    str or `os.PathLike`, a var_map a dict or a list of variables."""
    if isinstance(first, (str, os.PathLike)):
        return first, second  # TF-Slim's order: model_path, var_list
    if isinstance(second, (str, os.PathLike)):
        return second, first
    raise TypeError(
        "Invalid arguments for `assign_from_checkpoint`. Received: "
        f"{type(first).__name__} and {type(second).__name__}. Expected a "
        "checkpoint path (str) and a dict {checkpoint key: variable} or a "
        "list of variables, in either order."
    )


def assign_from_checkpoint(model_path, var_list, ignore_missing_vars=False):
    """Assigns checkpoint values to variables (slim's function, eagerly).

    TF-Slim's `assign_from_checkpoint(model_path, var_list,
    ignore_missing_vars)`, which builds an op and a feed dict, assigns
    here at once. The first two arguments are taken in either order
    (`assign_from_checkpoint(var_map, path)` works too): a path is a str,
    a var_map a dict or a list.

    Args:
        model_path: A checkpoint directory, prefix or Keras weights file.
        var_list: A dict {checkpoint key: variable}, or a list of
            variables (keyed by path). For a TF2 checkpoint whose root has
            a `model` object (keras_slim's), keys are paths below it.
        ignore_missing_vars: Boolean. If `True`, keys the checkpoint lacks
            are skipped (a warning names them), as in TF-Slim; a shape
            that differs is an error all the same.
            Defaults to `False`.

    Returns:
        The number of variables assigned.

    Raises:
        FileNotFoundError: if there is no checkpoint at `model_path`.
        ValueError: if `model_path` is not a checkpoint, or a truncated or
            damaged one (the message names it).
        ValueError: if a key is not in the checkpoint (all such keys are
            listed) and `ignore_missing_vars` is `False`, or if a shape
            differs (each is named); nothing is assigned then.
        TypeError: if neither argument is a path.

    Example:
    ```python
    assign_from_checkpoint(ckpt, {"fc/weights": model.layers[1].kernel})
    ```
    """
    path, var_map = _path_and_map(model_path, var_list)
    var_map = _variable_maps.as_var_map(var_map)
    reader = _checkpoint_readers.resolve(path)
    try:
        found, missing, mismatched = _variable_maps.split(var_map, reader)
        if missing and not ignore_missing_vars:
            raise ValueError(
                f"{len(missing)} keys are not in the {reader.format} "
                f"{reader.path!r}: {sorted(missing)}. It holds: "
                f"{_variable_maps.some(reader.entries)}. Pass "
                "ignore_missing_vars=True to skip them."
            )
        if mismatched:
            raise ValueError(
                f"Shapes differ between the {reader.format} "
                f"{reader.path!r} and the variables:\n"
                + _variable_maps.mismatch_lines(mismatched, var_map, reader)
            )
        if missing:
            _LOG.warning(
                "%d keys are not in %r, left as they are: %s",
                len(missing),
                reader.path,
                sorted(missing),
            )
        values = {key: reader.read(name) for key, (name, _) in found.items()}
    finally:
        reader.close()
    for key, (_, variable) in found.items():
        _variable_maps.assign(variable, values[key])
    return len(found)


def assign_from_values(model, values):
    """Assigns arrays to model variables by path (slim's function).

    Args:
        model: A built Keras model.
        values: A dict {variable path: array-like}.

    Returns:
        The number of variables assigned.

    Raises:
        ValueError: for a path the model does not have, or a value of
            another shape; nothing is assigned then.

    Example:
    ```python
    assign_from_values(model, {"logits/bias": np.zeros(10)})
    ```
    """
    arrays, variables = _variable_maps.checked_values(model, values)
    for path, array in arrays.items():
        _variable_maps.assign(variables[path], array)
    return len(arrays)
