"""Checkpoints: what a training checkpoint holds, reading it back safely,
and restoring variables from other checkpoints (warm start).

A checkpoint is a `tf.train.Checkpoint` written by a
`tf.train.CheckpointManager` under TF-Slim's names (`model.ckpt-<global
step>`), so `tf.train.latest_checkpoint(directory)` finds the newest. It
holds what resuming a run exactly needs:

- `model`: every variable of the model, keyed by its path (trainable and
  not: batch-norm statistics, the state of dropout's seed generators);
- `optimizer`: the optimizer's own variables (`iterations`, the global
  step; slots such as Adam's moments; a loss scale);
- `averages`: with `use_ema=True` (`--moving_average_decay`), the
  moving averages again, keyed by their variable's path, so that an
  evaluation finds them without knowing the optimizer
  (`keras-slim-eval`).

Keras 3 models are not tracked as `tf.train.Checkpoint` dependencies by
their layers, so the model's variables are listed by path here.

The warm-start building blocks (TF-Slim's `variables` module and
object_detection's `variables_helper`) read TF1 name-based checkpoints,
TF2 object-based ones and Keras weights files; see `list_variables`.
"""

import collections
import logging
import re

import numpy as np
import tensorflow as tf

from keras_slim import _checkpoint_readers
from keras_slim import _keras
from keras_slim import _validation
from keras_slim.gradients import variable_path

__all__ = [
    "CHECKPOINT_NAME",
    "CheckpointVariable",
    "all_finite",
    "assign_from_checkpoint",
    "assign_from_values",
    "available_in_checkpoint",
    "list_variables",
    "restore_latest",
    "restore_training_state",
    "training_checkpoint",
    "variables_to_restore",
]

CHECKPOINT_NAME = "model.ckpt"

logger = logging.getLogger("keras_slim")


def _model_variables(model):
    by_path = {}
    for variable in model.variables:
        path = variable_path(variable)
        if path in by_path and by_path[path] is not variable:
            raise ValueError(
                f"Two variables of model {model.name!r} share the path "
                f"{path!r}, so a checkpoint cannot tell them apart. Give "
                "their layers distinct names."
            )
        by_path[path] = variable
    return by_path


#: The checkpoint entry holding the model's variable paths, in model order.
STRUCTURE_KEY = "structure"
#: The checkpoint entry holding the moving averages by variable path.
AVERAGES_KEY = "averages"


def training_checkpoint(model, *, data=None, names=None):
    """Returns the `tf.train.Checkpoint` of a model's training state.

    The model's variables are keyed by path (`model/fc1/kernel`, readable
    with `tf.train.load_checkpoint` and warm start), and `structure` holds
    those paths in model order, so that `restore_training_state` can
    restore into an identically built model whose layers got other
    automatic names (a model built twice in one process).

    Args:
        model: A compiled Keras model whose optimizer is built.
        data: The input position of a `SlimModel.fit` (its run's feed
            state: Keras's epoch, the step in it, the data iterator), or
            `None`. Defaults to `None`.
        names: The checkpoint's names for the model's variables, in model
            order, when they differ from the paths (a restore by
            structure); `None` for the paths. Defaults to `None`.

    Returns:
        A `tf.train.Checkpoint` with `model`, `optimizer`, `structure`,
        and `data` when given.

    Raises:
        ValueError: if two variables of the model share a path.

    Example:
    ```python
    checkpoint = training_checkpoint(model)
    checkpoint.write("/tmp/run/model.ckpt-100")
    ```
    """
    variables = _model_variables(model)
    paths = list(variables)
    if names is not None:
        variables = dict(zip(names, variables.values()))
    with tf.init_scope():
        structure = tf.Variable(paths if paths else [""], dtype=tf.string)
    parts = {
        "model": variables,
        "optimizer": model.optimizer,
        STRUCTURE_KEY: structure,
    }
    _build_moving_averages(model)
    averages = _keras.moving_averages(model.optimizer)
    if averages:
        # The same variables as the optimizer's slots: saved once.
        by_variable = {id(v): name for name, v in variables.items()}
        parts[AVERAGES_KEY] = {
            by_variable[id(v)]: average
            for v, average in averages
            if id(v) in by_variable
        }
    if data is not None:
        parts["data"] = data
    return tf.train.Checkpoint(**parts)


def _build_moving_averages(model):
    """Builds an optimizer with `use_ema=True` that the first step has not
    built yet (on the trainable variables, as the train step does), so
    that every checkpoint holds the averages."""
    optimizer = model.optimizer
    inner = getattr(optimizer, "inner_optimizer", optimizer)
    if getattr(inner, "use_ema", False) and not inner.built:
        if model.trainable_variables:
            with model.distribute_strategy.scope():
                optimizer.build(model.trainable_variables)


def _saved_structure(path):
    """The variable paths a training checkpoint saved, in model order, or
    `None` for a checkpoint written before they were saved."""
    reader = tf.train.load_checkpoint(path)
    key = f"{STRUCTURE_KEY}/.ATTRIBUTES/VARIABLE_VALUE"
    if not reader.has_tensor(key):
        return None
    return [p.decode() for p in reader.get_tensor(key).tolist() if p]


def _names_by_structure(model, saved):
    """The checkpoint's names for the model's variables, matched by
    position, shape and dtype; raises listing what differs."""
    variables = list(_model_variables(model).values())
    paths = [variable_path(v) for v in variables]
    if saved is None or saved == paths:
        return None
    differences = []
    if len(saved) != len(paths):
        differences.append(
            f"the checkpoint holds {len(saved)} model variables, the model "
            f"has {len(paths)}"
        )
    for i, (name, variable) in enumerate(zip(saved, variables)):
        model_name = _strip_counter(variable_path(variable))
        if _strip_counter(name) != model_name:
            differences.append(
                f"variable {i}: checkpoint {name!r}, model "
                f"{variable_path(variable)!r}"
            )
    if differences:
        raise ValueError(
            "The checkpoint was written by a model of another structure, so "
            "it cannot be restored into this one:\n  "
            + "\n  ".join(differences[:20])
        )
    return saved


_COUNTER = re.compile(r"_\d+(?=/|$)")


def _strip_counter(path):
    """`dense_4/kernel` -> `dense/kernel`: a path without the counters
    Keras appends to automatic layer names."""
    return _COUNTER.sub("", path)


def _resumable(path):
    """Whether a checkpoint holds the input position of an unfinished
    `fit` (one that was killed or preempted)."""
    reader = tf.train.load_checkpoint(path)
    key = "data/finished/.ATTRIBUTES/VARIABLE_VALUE"
    return reader.has_tensor(key) and not bool(reader.get_tensor(key))


def restore_training_state(model, path, *, data=None):
    """Restores a training checkpoint into `model`, matching its structure.

    The input position (`data`) is restored only from a checkpoint of a
    `fit` that did not finish: a new `fit` after a finished one starts its
    own schedule. Variables are matched by path; when the paths differ
    only by the
    counters of automatic layer names (`dense_4` for `dense_1`: the same
    model built again in one process), by their position in the model,
    as `tf.train.Checkpoint` and Keras weights files match objects. The
    shapes are then checked by TensorFlow's restore.

    Args:
        model: A compiled Keras model whose optimizer is built.
        path: A checkpoint prefix (`.../model.ckpt-100`).
        data: As for `training_checkpoint`. Defaults to `None`.

    Raises:
        ValueError: if the model differs from the checkpoint's (the
            message lists the differences).
        Exception: what TensorFlow raises for a file it cannot read.

    Example:
    ```python
    restore_training_state(model, tf.train.latest_checkpoint("/tmp/run"))
    ```
    """
    names = _names_by_structure(model, _saved_structure(path))
    if data is not None and not _resumable(path):
        data = None  # no input position, or that of a finished fit
    checkpoint = training_checkpoint(model, data=data, names=names)
    status = checkpoint.restore(path)
    try:
        status.assert_existing_objects_matched()
    except AssertionError as error:
        raise ValueError(
            f"The checkpoint {path!r} does not match model "
            f"{model.name!r}: {error}"
        ) from None


def all_finite(model):
    """Whether every variable of the model and its optimizer is finite.

    Args:
        model: A compiled Keras model.

    Returns:
        A Python boolean (read on the host).
    """
    variables = list(model.variables) + list(model.optimizer.variables)
    for variable in variables:
        value = np.asarray(variable.numpy())
        if np.issubdtype(value.dtype, np.inexact):
            if not np.all(np.isfinite(value)):
                return False
    return True


def restore_latest(checkpoint, manager, *, model=None, data=None):
    """Restores the newest readable checkpoint of `manager`.

    Checkpoints are tried from the newest to the oldest: one that cannot be
    read (a truncated file, say) is skipped with a warning.

    Args:
        checkpoint: The `tf.train.Checkpoint` to restore into (unused when
            `model` is given).
        manager: The `tf.train.CheckpointManager` of the directory.
        model: The model, to restore with `restore_training_state`
            (matching its structure); `None` restores `checkpoint`.
            Defaults to `None`.
        data: As for `training_checkpoint`. Defaults to `None`.

    Returns:
        The path restored, or `None` when the directory has no checkpoint.

    Raises:
        RuntimeError: if the directory has checkpoints and none is readable.
        ValueError: if the newest readable checkpoint was written by a model
            of another structure.
    """
    paths = list(reversed(manager.checkpoints))
    if not paths:
        return None
    failures = []
    for path in paths:
        try:
            if model is None:
                checkpoint.restore(path).assert_existing_objects_matched()
            else:
                restore_training_state(model, path, data=data)
        except ValueError:
            raise
        # A damaged file fails in many ways (OpError, IndexError, ...).
        except Exception as error:
            failures.append(f"{path}: {type(error).__name__}: {error}")
            logger.warning(
                "Checkpoint %s cannot be restored (%s); trying an older one.",
                path,
                type(error).__name__,
            )
            continue
        return path
    raise RuntimeError(
        f"No checkpoint in {manager.directory!r} can be restored:\n"
        + "\n".join(failures)
    )


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


def _patterns(name, value):
    """`None`, a pattern or a list of patterns, compiled."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    try:
        items = list(items)
    except TypeError:
        raise _validation.invalid(
            name, value, "a regular expression, a list of them, or None"
        ) from None
    compiled = []
    for item in items:
        if not isinstance(item, str):
            raise _validation.invalid(
                name, value, "a regular expression, a list of them, or None"
            )
        try:
            compiled.append(re.compile(item))
        except re.error as error:
            raise ValueError(
                f"Invalid regular expression in `{name}`: {item!r} ({error})."
            ) from None
    return compiled


def _is_seed_state(path):
    return path.rsplit("/", 1)[-1] == "seed_generator_state"


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
    include = _patterns("include", include)
    exclude = _patterns("exclude", exclude) or []
    selected = []
    for variable in _model_variables(model).values():
        path = variable_path(variable)
        if _is_seed_state(path):
            continue
        if include is not None and not any(p.match(path) for p in include):
            continue
        if any(p.match(path) for p in exclude):
            continue
        selected.append(variable)
    return selected


def _as_var_map(var_map):
    """A {key: variable} map; a list of variables is keyed by path."""
    if isinstance(var_map, dict):
        return dict(var_map)
    if isinstance(var_map, (list, tuple)):
        return {variable_path(v): v for v in var_map}
    raise _validation.invalid(
        "var_map",
        type(var_map).__name__,
        "a dict {checkpoint key: variable} or a list of variables",
    )


def _shape(variable):
    return tuple(int(d) for d in variable.shape)


def _split(var_map, reader):
    """(found {key: (name, variable)}, missing keys, mismatched keys)."""
    found, missing, mismatched = {}, [], []
    for key, variable in var_map.items():
        name = reader.lookup(key)
        if name is None:
            missing.append(key)
        elif reader.entries[name][0] != _shape(variable):
            mismatched.append(key)
        else:
            found[key] = (name, variable)
    return found, missing, mismatched


def _mismatch_lines(keys, var_map, reader):
    return "\n".join(
        f"  {key}: checkpoint {reader.entries[reader.lookup(key)][0]}, "
        f"variable {variable_path(var_map[key])} {_shape(var_map[key])}"
        for key in keys
    )


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
    var_map = _as_var_map(var_map)
    reader = _checkpoint_readers.resolve(path)
    try:
        found, _, _ = _split(var_map, reader)
    finally:
        reader.close()
    return {key: variable for key, (_, variable) in found.items()}


def _assign(variable, value):
    variable.assign(np.asarray(value).astype(variable.dtype))


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
    var_map = _as_var_map(var_map)
    reader = _checkpoint_readers.resolve(path)
    try:
        found, missing, mismatched = _split(var_map, reader)
        if missing:
            raise ValueError(
                f"{len(missing)} keys are not in the {reader.format} "
                f"{reader.path!r}: {sorted(missing)}. It holds: "
                f"{_some(reader.entries)}"
            )
        if mismatched:
            raise ValueError(
                f"Shapes differ between the {reader.format} "
                f"{reader.path!r} and the variables:\n"
                + _mismatch_lines(mismatched, var_map, reader)
            )
        values = {key: reader.read(name) for key, (name, _) in found.items()}
    finally:
        reader.close()
    for key, (_, variable) in found.items():
        _assign(variable, values[key])
    return len(found)


def _some(names, limit=10):
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return f"[{shown}{more}]"


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
    arrays, variables = _checked_values(model, values)
    for path, array in arrays.items():
        _assign(variables[path], array)
    return len(arrays)


def _checked_values(model, values):
    """({path: array}, {path: variable}) once every path and shape is valid."""
    if not isinstance(values, dict):
        raise _validation.invalid(
            "values", type(values).__name__, "a dict {variable path: array}"
        )
    variables = _model_variables(model)
    unknown = sorted(set(values) - set(variables))
    if unknown:
        raise ValueError(
            f"The model {model.name!r} has no variables {unknown}. Its "
            f"variables are: {_some(variables)}"
        )
    arrays = {path: np.asarray(value) for path, value in values.items()}
    for path, array in arrays.items():
        if array.shape != _shape(variables[path]):
            raise ValueError(
                f"The value for {path!r} has shape {array.shape}; the "
                f"variable has shape {_shape(variables[path])}."
            )
    return arrays, variables
