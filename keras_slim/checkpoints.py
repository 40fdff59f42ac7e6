"""What a training checkpoint holds, and reading it back safely.

A checkpoint is a `tf.train.Checkpoint` written by a
`tf.train.CheckpointManager` under TF-Slim's names (`model.ckpt-<global
step>`), so `tf.train.latest_checkpoint(directory)` finds the newest. It
holds what resuming a run exactly needs:

- `model`: every variable of the model, keyed by its path (trainable and
  not: batch-norm statistics, the state of dropout's seed generators);
- `optimizer`: the optimizer's own variables (`iterations`, the global
  step; slots such as Adam's moments; a loss scale).

Keras 3 models are not tracked as `tf.train.Checkpoint` dependencies by
their layers, so the model's variables are listed by path here.
"""

import logging

import numpy as np
import tensorflow as tf

from keras_slim.gradients import variable_path

__all__ = [
    "CHECKPOINT_NAME",
    "all_finite",
    "restore_latest",
    "training_checkpoint",
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


def training_checkpoint(model):
    """Returns the `tf.train.Checkpoint` of a model's training state.

    Args:
        model: A compiled Keras model whose optimizer is built.

    Returns:
        A `tf.train.Checkpoint` with `model` (the model's variables by
        path) and `optimizer`.

    Raises:
        ValueError: if two variables of the model share a path.

    Example:
    ```python
    checkpoint = training_checkpoint(model)
    checkpoint.write("/tmp/run/model.ckpt-100")
    ```
    """
    return tf.train.Checkpoint(
        model=_model_variables(model), optimizer=model.optimizer
    )


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


def restore_latest(checkpoint, manager):
    """Restores the newest readable checkpoint of `manager`.

    Checkpoints are tried from the newest to the oldest: one that cannot be
    read (a truncated file, say) is skipped with a warning.

    Args:
        checkpoint: The `tf.train.Checkpoint` to restore into.
        manager: The `tf.train.CheckpointManager` of the directory.

    Returns:
        The path restored, or `None` when the directory has no checkpoint.

    Raises:
        RuntimeError: if the directory has checkpoints and none is readable.
    """
    paths = list(reversed(manager.checkpoints))
    if not paths:
        return None
    failures = []
    for path in paths:
        try:
            checkpoint.restore(path).assert_existing_objects_matched()
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
