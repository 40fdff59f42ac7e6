"""What a training checkpoint holds, and reading it back safely."""

import logging
import re

import numpy as np

from keras_slim import _backend
from keras_slim import _keras_optimizer
from keras_slim import _variable_maps
from keras_slim._backend import tensorflow as tf
from keras_slim.checkpoints import list_variables
from keras_slim.gradients import variable_path

__all__ = [
    "AVERAGES_KEY",
    "CHECKPOINT_NAME",
    "STRUCTURE_KEY",
    "all_finite",
    "global_step",
    "restore_for_inference",
    "restore_latest",
    "restore_training_state",
    "training_checkpoint",
]

#: The prefix of training checkpoints: `model.ckpt-<global step>`.
CHECKPOINT_NAME = "model.ckpt"
#: The checkpoint entry holding the model's variable paths, in model order.
STRUCTURE_KEY = "structure"
#: The checkpoint entry holding the moving averages by variable path.
AVERAGES_KEY = "averages"

logger = logging.getLogger("keras_slim")

# What saves and restores a run off Keras's TensorFlow backend.
_KERAS_CHECKPOINTS = (
    "keras.callbacks.BackupAndRestore or keras.callbacks.OrbaxCheckpoint"
)


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
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    checkpoint = training_checkpoint(model)
    checkpoint.write("/tmp/run/model.ckpt-100")
    ```
    """
    _backend.require_tensorflow(
        "keras_slim.training_state.training_checkpoint",
        _KERAS_CHECKPOINTS,
        why="tf.train.Checkpoint",
    )
    variables = _variable_maps.model_variables(model)
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
    averages = _keras_optimizer.moving_averages(model.optimizer)
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
    inner = _keras_optimizer.inner_optimizer(optimizer)
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
    variables = list(_variable_maps.model_variables(model).values())
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


def _holds_position(path):
    """Whether a checkpoint holds the input position of a `fit`."""
    reader = tf.train.load_checkpoint(path)
    return reader.has_tensor("data/step/.ATTRIBUTES/VARIABLE_VALUE")


def restore_training_state(model, path, *, data=None):
    """Restores a training checkpoint into `model`, matching its structure.

    The input position (`data`) is restored when given and the checkpoint
    holds one; whether it applies to the coming `fit` is the caller's to
    decide (`Checkpoints` asks the run's input position: a `fit` that did
    not finish, or one continued past its last epoch). Variables are
    matched by path; when the paths differ only by the counters of
    automatic layer names (`dense_4` for `dense_1`: the same
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
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    restore_training_state(model, tf.train.latest_checkpoint("/tmp/run"))
    ```
    """
    _backend.require_tensorflow(
        "keras_slim.training_state.restore_training_state",
        _KERAS_CHECKPOINTS,
        why="tf.train.Checkpoint",
    )
    names = _names_by_structure(model, _saved_structure(path))
    if data is not None and not _holds_position(path):
        data = None
    checkpoint = training_checkpoint(model, data=data, names=names)
    status = checkpoint.restore(path)
    # An input position not asked for is left in the file on purpose.
    status.expect_partial()
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
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.
    """
    _backend.require_tensorflow(
        "keras_slim.training_state.restore_latest",
        _KERAS_CHECKPOINTS,
        why="tf.train.Checkpoint",
    )
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


def restore_for_inference(model, path):
    """Restores a training checkpoint's model variables into `model`, with
    the moving averages in place of the trainable ones when it holds them.

    What an evaluation of a checkpoint needs (`keras-slim-eval`): no
    optimizer and no input position, and the averages TF-Slim's
    eval_image_classifier restored with `--moving_average_decay`.

    Args:
        model: The network, built as in training.
        path: A checkpoint prefix.

    Returns:
        `(global_step, used_averages)`.

    Raises:
        ValueError: when the model differs from the checkpoint's.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    step, averaged = restore_for_inference(model, "/tmp/run/model.ckpt-600")
    ```
    """
    _backend.require_tensorflow(
        "keras_slim.training_state.restore_for_inference",
        "model.load_weights",
        why="tf.train.Checkpoint",
    )
    names = _names_by_structure(model, _saved_structure(path))
    variables = _variable_maps.model_variables(model)
    if names is not None:
        variables = dict(zip(names, variables.values()))
    saved = {v.name for v in list_variables(path)}
    averages = {
        name: v
        for name, v in variables.items()
        if f"{AVERAGES_KEY}/{name}" in saved
    }
    missing = [n for n in variables if f"model/{n}" not in saved]
    if missing:
        raise ValueError(
            f"The checkpoint {path!r} does not hold these variables of "
            f"model {model.name!r}: {missing[:10]}. Evaluate with the "
            "--model_name, --train_image_size and data flags of training."
        )
    tf.train.Checkpoint(model=variables).read(path).expect_partial()
    if averages:
        # Then the averages over the trainable variables.
        tf.train.Checkpoint(**{AVERAGES_KEY: averages}).read(
            path
        ).expect_partial()
    return global_step(path), bool(averages)


#: Where a training checkpoint holds the global step: under a loss scale,
#: the inner optimizer's (the `LossScaleOptimizer`'s own stays 0).
_STEP_KEYS = (
    "optimizer/inner_optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE",
    "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE",
)


def global_step(path):
    """The global step a training checkpoint was saved at.

    Args:
        path: A checkpoint prefix written by `training_checkpoint`.

    Returns:
        The optimizer's `iterations` in it, as a Python integer (the inner
        optimizer's under a `LossScaleOptimizer`).

    Raises:
        ValueError: if the checkpoint holds no optimizer step.

    Example:
    ```python
    global_step("/tmp/run/model.ckpt-600")  # 600
    ```
    """
    reader = tf.train.load_checkpoint(path)
    for key in _STEP_KEYS:
        if reader.has_tensor(key):
            return int(reader.get_tensor(key))
    raise ValueError(
        f"The checkpoint {path!r} holds no optimizer step (looked for "
        f"{', '.join(_STEP_KEYS)}): is it a training checkpoint?"
    )
