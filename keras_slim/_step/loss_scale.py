"""The LossScale stage: a `LossScaleOptimizer`'s dynamic loss scale, moved
by the Gate's verdict.
"""

import tensorflow as tf

from keras_slim import _keras_optimizer
from keras_slim import _strategy


def dynamic(optimizer):
    """Returns `optimizer` if it is a `LossScaleOptimizer`, else `None`.

    Args:
        optimizer: A Keras 3 optimizer.

    Returns:
        The optimizer when it carries a dynamic loss scale, else `None`.

    Example:
    ```python
    dynamic(keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD()))
    ```
    """
    if _keras_optimizer.loss_scale_optimizer(optimizer) is not None and hasattr(
        optimizer, "dynamic_growth_steps"
    ):
        return optimizer
    return None


def check(model):
    """Raises before any step where the loss scale cannot be exact.

    Asynchronous workers over parameter servers each scale their loss by
    the scale they read, then unscale their gradients by the scale they
    read when they apply them, which other workers may have halved or
    doubled in between. Synchronous steps (`replicas_to_aggregate`) are
    exact: every gradient of a step is computed after the previous step
    was applied, with one scale.

    Args:
        model: The `SlimModel`, compiled.

    Raises:
        ValueError: for a `LossScaleOptimizer` under a
            `ParameterServerStrategy` running asynchronous steps.

    Example:
    ```python
    check(model)  # before the first step
    ```
    """
    optimizer = dynamic(getattr(model, "optimizer", None))
    if optimizer is None:
        return
    mode = _strategy.mode(model.distribute_strategy)
    if mode.applies_steps_asynchronously:
        raise ValueError(
            "Invalid value for argument `optimizer`. Received: "
            f"optimizer={type(optimizer).__name__} (the dynamic loss scale "
            "of the mixed_float16 policy) under ParameterServerStrategy "
            "with asynchronous steps. Each worker would unscale its "
            "gradients by the loss scale it reads when it applies them, "
            "which other workers may have changed since it scaled its "
            "loss. Use the mixed_bfloat16 policy (no loss scale), "
            "synchronous steps (DeploymentConfig(replicas_to_aggregate="
            "...)), or MirroredStrategy / MultiWorkerMirroredStrategy."
        )


def apply_unscaled(optimizer, grads, variables):
    """Applies finite scaled gradients: unscale, apply, grow the scale.

    Must run where Keras's `LossScaleOptimizer` runs its own finite branch
    (replica context); the gradients are already summed across replicas.

    Args:
        optimizer: A built `LossScaleOptimizer`.
        grads: The gradients, still multiplied by `optimizer.dynamic_scale`
            (`None` entries are kept).
        variables: The variables, one per gradient.
    """
    scale = optimizer.dynamic_scale
    unscaled = [
        g
        if g is None or getattr(v, "overwrite_with_gradient", False)
        else _divide(g, scale)
        for g, v in zip(grads, variables)
    ]
    _keras_optimizer.inner_optimizer(optimizer).apply(unscaled, variables)
    counter = optimizer.step_counter

    def grow():
        counter.assign(0)
        scale.assign(scale * 2.0)

    def count():
        counter.assign_add(1)

    tf.cond(tf.equal(counter, optimizer.dynamic_growth_steps - 1), grow, count)


def _divide(grad, scale):
    if isinstance(grad, tf.IndexedSlices):
        values = grad.values / tf.cast(scale, grad.values.dtype)
        return tf.IndexedSlices(values, grad.indices, grad.dense_shape)
    return grad / tf.cast(scale, grad.dtype)


def lower(optimizer):
    """Halves the loss scale and restarts its growth count (an overflow).

    Args:
        optimizer: A built `LossScaleOptimizer`.
    """
    optimizer.step_counter.assign(0)
    optimizer.dynamic_scale.assign(optimizer.dynamic_scale * 0.5)


class LossScale:
    """The dynamic loss scale of a `LossScaleOptimizer`.

    Args:
        optimizer: The `LossScaleOptimizer`.
        overflows: The `SkippedSteps` counting overflows, or `None`.

    Example:
    ```python
    scale = LossScale.of(model.optimizer, options.overflow_steps)
    ```
    """

    name = "loss scale"

    def __init__(self, optimizer, overflows):
        self.optimizer = optimizer
        self.overflows = overflows

    @classmethod
    def of(cls, optimizer, overflows):
        """The stage for `optimizer`, or `None` without a dynamic scale."""
        if dynamic(optimizer) is None:
            return None
        return cls(optimizer, overflows)

    def describe(self):
        """One line: what the stage does."""
        return (
            f"{self.name:<12}unscale a finite update (the scale doubles "
            f"every {self.optimizer.dynamic_growth_steps} of them); an "
            "overflow halves it and skips the step"
        )

    def update(self, step, then):
        """Runs the rest of the plan: the scale moves in Apply's branches
        (`apply`, `overflow`)."""
        return then(step)

    def apply(self, grads, variables):
        """The finite branch: unscale, apply, grow the scale."""
        apply_unscaled(self.optimizer, grads, variables)

    def overflow(self, gate):
        """The overflow branch: lower the scale, skip the step (counted by
        the `gate` and in `overflows`)."""
        lower(self.optimizer)
        gate.record_skip([self.overflows])

    def skip(self, gate, loss_finite):
        """The branch of a non-finite update: an overflow when the loss is
        finite, else the gate's skip."""
        tf.cond(loss_finite, lambda: self.overflow(gate), gate.skip)
