"""A command's `--checkpoint_path` read for inference: checked, then
restored into the net.
"""

import os

import tensorflow as tf

from keras_slim import _checkpoint_readers
from keras_slim import checkpoints
from keras_slim import training_state
from keras_slim.image import nets


def _restore_tf_slim(model, path, *, model_name, moving_average_decay):
    """Restores a TF-Slim checkpoint (TF1, TF-Slim's names) into the net,
    every variable (batch-norm statistics too) from TF-Slim's name; with
    `moving_average_decay`, a trainable variable's moving average
    (`<name>/ExponentialMovingAverage`) where the checkpoint holds it, as
    TF-Slim's eval_image_classifier restored them.

    Returns:
        `(global_step, used_averages)`.

    Raises:
        ValueError: naming the variables the checkpoint lacks.
    """
    name_map = nets.slim_name_map(model_name)
    saved = {v.name for v in checkpoints.list_variables(path)}
    trainable = {id(v) for v in model.trainable_variables}
    var_map, averaged = {}, False
    for variable in checkpoints.variables_to_restore(model):
        name = name_map(variable.path)
        average = f"{name}/ExponentialMovingAverage"
        use = moving_average_decay and id(variable) in trainable
        if use and average in saved:
            name, averaged = average, True
        var_map[name] = variable
    checkpoints.assign_from_checkpoint(path, var_map)
    reader = tf.train.load_checkpoint(path)
    step = reader.get_tensor("global_step") if "global_step" in saved else 0
    return int(step), averaged


def restore(model, path, *, model_name, moving_average_decay=None):
    """Restores checkpoint `path` into `model` for inference.

    A keras_slim checkpoint's moving averages are used whenever it holds
    them; a TF-Slim checkpoint's with `moving_average_decay` (TF-Slim's
    `--moving_average_decay`), as TF-Slim's eval_image_classifier did.

    Args:
        model: The net, built as `nets.build(model_name, ...)`.
        path: A checkpoint prefix (keras_slim's or TF-Slim's).
        model_name: The net's `--model_name` (TF-Slim's names for it).
        moving_average_decay: `--moving_average_decay`, or `None`.

    Returns:
        `(global_step, used_averages)`.

    Raises:
        ValueError: for a checkpoint that cannot be read (naming it), or
            that lacks variables of the net.

    Example:
    ```python
    model = nets.build("digits_cnn", 10)
    step, averaged = restore(
        model, "/tmp/run/model.ckpt-600", model_name="digits_cnn"
    )
    ```
    """
    try:
        if checkpoints.checkpoint_format(path) == "tf1":
            return _restore_tf_slim(
                model,
                path,
                model_name=model_name,
                moving_average_decay=moving_average_decay,
            )
        return training_state.restore_for_inference(model, path)
    except (tf.errors.OpError, IndexError) as error:
        raise _checkpoint_readers.damaged(path, error) from None


def check_checkpoint_path(p, path, *, purpose, waits=False):
    """Refuses a `--checkpoint_path` that is not a checkpoint (or a
    directory of them), before any data is read (`p.error`: exit 2).

    Args:
        p: The command's `FlagParser`.
        path: The `--checkpoint_path`.
        purpose: What the command does with checkpoints, for the message
            (`"evaluates"`).
        waits: Whether a directory without a checkpoint passes (the
            command waits for one, or says so itself); else it is refused.
            Defaults to `False`.

    Returns:
        The checkpoint prefix to read: `path`, or a directory's latest
        (`None` for a directory without one that `waits`).
    """
    if not os.path.exists(path) and not tf.io.gfile.glob(path + ".index"):
        p.error(
            f"flag --checkpoint_path: {path!r} is neither a directory nor a "
            "checkpoint prefix"
        )
    if os.path.isdir(path):
        directory, path = path, tf.train.latest_checkpoint(path)
        if path is None and waits:
            return None
        if path is None:
            p.error(
                f"flag --checkpoint_path: no checkpoint in {directory!r} "
                "(looked for its `checkpoint` state file)"
            )
    try:
        kind = checkpoints.checkpoint_format(path)
    except (FileNotFoundError, ValueError) as error:
        p.error(f"flag --checkpoint_path: {error}")
    if kind == "keras":
        p.error(
            f"flag --checkpoint_path: {path!r} is a Keras weights file; "
            f"{p.prog} {purpose} checkpoints: a directory of "
            "keras-slim-train's, a checkpoint prefix (such as "
            "'model.ckpt-123') of keras-slim-train or of TF-Slim"
        )
    return path
