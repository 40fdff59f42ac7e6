"""TF-Slim's variables functions: read a checkpoint, restore from it.

TF-Slim's `slim.variables` (`get_variables_to_restore`,
`assign_from_checkpoint`, `assign_from_values`) and object_detection's
`variables_helper.get_variables_available_in_checkpoint`, eager, for TF1
name-based checkpoints (TF-Slim, `tf.compat.v1.train.Saver`), TF2
object-based checkpoints (`tf.train.Checkpoint`, keras_slim's
`Checkpoints`) and Keras weights files; see `list_variables` for the
names each format gives. `keras_slim.callbacks.WarmStart` composes them;
what keras_slim's own training checkpoints hold is
`keras_slim.training_state`.
"""

import collections

from keras_slim import _checkpoint_readers
from keras_slim import _variable_maps
from keras_slim.gradients import variable_path

__all__ = [
    "CheckpointVariable",
    "assign_from_checkpoint",
    "assign_from_values",
    "available_in_checkpoint",
    "list_variables",
    "variables_to_restore",
]

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


def variables_to_restore(model, *, include=None, exclude=None):
    """The model variables a warm start restores (slim's function).

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

    Example:
    ```python
    var_map = available_in_checkpoint(variables_to_restore(model), ckpt)
    assign_from_checkpoint(var_map, ckpt)
    ```
    """
    var_map = _variable_maps.as_var_map(var_map)
    reader = _checkpoint_readers.resolve(path)
    try:
        found, _, _ = _variable_maps.split(var_map, reader)
    finally:
        reader.close()
    return {key: variable for key, (_, variable) in found.items()}


def assign_from_checkpoint(var_map, path):
    """Assigns checkpoint values to variables (slim's function, eagerly).

    Args:
        var_map: A dict {checkpoint key: variable}, or a list of variables
            (keyed by path). For a TF2 checkpoint whose root has a `model`
            object (keras_slim's), keys are paths below it.
        path: A checkpoint directory, prefix or Keras weights file.

    Returns:
        The number of variables assigned.

    Raises:
        FileNotFoundError: if there is no checkpoint at `path`.
        ValueError: if a key is not in the checkpoint (all such keys are
            listed) or a shape differs (each is named); nothing is
            assigned then.

    Example:
    ```python
    assign_from_checkpoint({"fc/weights": model.layers[1].kernel}, ckpt)
    ```
    """
    var_map = _variable_maps.as_var_map(var_map)
    reader = _checkpoint_readers.resolve(path)
    try:
        found, missing, mismatched = _variable_maps.split(var_map, reader)
        if missing:
            raise ValueError(
                f"{len(missing)} keys are not in the {reader.format} "
                f"{reader.path!r}: {sorted(missing)}. It holds: "
                f"{_variable_maps.some(reader.entries)}"
            )
        if mismatched:
            raise ValueError(
                f"Shapes differ between the {reader.format} "
                f"{reader.path!r} and the variables:\n"
                + _variable_maps.mismatch_lines(mismatched, var_map, reader)
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
