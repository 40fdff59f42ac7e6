"""TF1's moving averages of the weights, on Keras's `use_ema`."""

import keras

from keras_slim import _backend
from keras_slim import _keras_optimizer

__all__ = ["decay_at", "warm_up"]


def decay_at(decay, step):
    """TF1's `ExponentialMovingAverage` decay at global step `step`.

    Args:
        decay: The decay (Keras's `ema_momentum`), a float in [0, 1].
        step: The global step after the update, a scalar (tensor or number).

    Returns:
        `min(decay, (1 + step) / (10 + step))`, float32.

    Example:
    ```python
    float(decay_at(0.9999, 40))  # 0.82
    ```
    """
    step = keras.ops.cast(step, "float32")
    return keras.ops.minimum(
        keras.ops.cast(decay, "float32"), (1.0 + step) / (10.0 + step)
    )


def warm_up(optimizer):
    """Makes `optimizer`'s moving averages TF1's, with its warm-up.

    The averages of an optimizer built with `use_ema=True` become those of
    TF1's `tf.compat.v1.train.ExponentialMovingAverage(ema_momentum,
    num_updates=global_step)` applied after each update: they start at the
    variables' values when the optimizer is built (TF1's initial values),
    and the update of global step `n` (`iterations` after the step) is
    `average -= (average - variable) * (1 - decay_at(ema_momentum, n))`.
    `keras-slim-train --moving_average_decay` averages so. On this
    instance only (a `LossScaleOptimizer`'s inner optimizer): its config
    does not record it, so call it again on an optimizer rebuilt from a
    config.

    Args:
        optimizer: A Keras optimizer with `use_ema=True`, or a
            `LossScaleOptimizer` of one.

    Returns:
        `optimizer`.

    Raises:
        ValueError: if the optimizer keeps no moving averages.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    optimizer = keras_slim.moving_averages.warm_up(
        keras.optimizers.SGD(0.1, use_ema=True, ema_momentum=0.9999)
    )
    model.compile(optimizer=optimizer, loss="mse")
    ```
    """
    _backend.require_tensorflow(
        "keras_slim.moving_averages.warm_up",
        "a keras.optimizers optimizer with use_ema=True (Keras's own "
        "averages, without TF1's warm-up)",
    )
    inner = _keras_optimizer.inner_optimizer(optimizer)
    if not getattr(inner, "use_ema", False):
        raise ValueError(
            "Invalid value for argument `optimizer`. Received: "
            f"{type(inner).__name__}(use_ema=False). warm_up changes the "
            "moving averages of an optimizer that keeps them: build it "
            "with use_ema=True and ema_momentum=<TF1's decay>."
        )
    _keras_optimizer.replace_moving_averages(
        inner, start=_start, update=_update
    )
    return optimizer


def _start(variables, averages):
    """TF1's initial averages: the variables' values."""
    for variable, average in zip(variables, averages):
        average.assign(variable)


def _update(optimizer, variables, averages):
    """One update of TF1's averages, after the optimizer's update (whose
    `iterations` is still the step before)."""
    decay = decay_at(optimizer.ema_momentum, optimizer.iterations + 1)
    for variable, average in zip(variables, averages):
        if average is None:
            continue
        rate = keras.ops.cast(1.0 - decay, average.dtype)
        average.assign_sub((average - variable) * rate)
