"""The Apply stage: the one adapter onto Keras's optimizer."""

import contextlib
import functools
import threading

import keras
import tensorflow as tf

from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim._step import accumulate as accumulate_lib
from keras_slim._step import gate as gate_lib
from keras_slim._step import lr_factors

_LOCK = threading.Lock()


def check(model):
    """Raises before any step for an optimizer keras_slim cannot apply
    summed gradients through.

    Args:
        model: The `SlimModel`, compiled (or its optimizer).

    Raises:
        ValueError: for a `keras.optimizers.MultiOptimizer`, whose
            sub-optimizers would sum the gradients across replicas again
            (its own switch `install` replaces is never called) and which a
            checkpoint saves without their slots or steps.

    Example:
    ```python
    check(model)  # fine for Adam
    ```
    """
    optimizer = getattr(model, "optimizer", model)
    inner = _keras_optimizer.inner_optimizer(optimizer)
    if isinstance(inner, keras.optimizers.MultiOptimizer):
        raise ValueError(
            "Invalid value for argument `optimizer`. Received: "
            f"optimizer={type(inner).__name__}(name={inner.name!r}). "
            "A SlimModel cannot train with keras.optimizers.MultiOptimizer: "
            "its sub-optimizers sum the gradients across replicas a second "
            "time, after the step's own sum, and a checkpoint of it holds "
            "none of their slots or step counts. For a learning rate per "
            "group of variables, use one optimizer and "
            "keras_slim.GradientPolicy(lr_multipliers={pattern: factor})."
        )


def _switch(original):
    """The sum's replacement: the identity while `presummed()` is active."""

    def all_reduce_sum_gradients(grads_and_vars):
        if all_reduce_sum_gradients.depth > 0:
            return list(grads_and_vars)
        return original(grads_and_vars)

    all_reduce_sum_gradients.depth = 0
    return all_reduce_sum_gradients


def install(optimizer):
    """Lets `presummed()` switch off `optimizer`'s cross-replica sum (and,
    for an accumulating optimizer, Keras's accumulation).

    Idempotent; outside `presummed()` the optimizer runs as before.

    Args:
        optimizer: A Keras 3 optimizer (TensorFlow backend), possibly a
            `LossScaleOptimizer`.

    Returns:
        The installed switch.
    """
    inner = _keras_optimizer.inner_optimizer(optimizer)
    switch = _keras_optimizer.replace_all_reduce_sum(inner, _switch)
    # An accumulating optimizer updates at once when keras_slim applies.
    accumulate_lib.install(inner, lambda: switch.depth > 0)
    return switch


@contextlib.contextmanager
def presummed(optimizer):
    """Context in which `optimizer.apply` does not sum across replicas.

    A counter, not a flag: under `MirroredStrategy` each replica thread
    enters the context while tracing the same step.
    """
    switch = install(optimizer)
    with _LOCK:
        switch.depth += 1
    try:
        yield
    finally:
        with _LOCK:
            switch.depth -= 1


def gradient_scale(optimizer):
    """The factor the gradients still carry when `apply` is called.

    Args:
        optimizer: A Keras 3 optimizer.

    Returns:
        `dynamic_scale` for a `LossScaleOptimizer`, `loss_scale_factor` when
        set, else `None`.
    """
    if _keras_optimizer.loss_scale_optimizer(optimizer) is not None:
        return optimizer.dynamic_scale
    return getattr(optimizer, "loss_scale_factor", None)


class OptimizerSteps:
    """The optimizer's step count, as a skipped update moves it.

    Args:
        optimizer: The model's optimizer.
    """

    def __init__(self, optimizer):
        self._optimizer = optimizer

    def advance(self):
        """Counts a skipped micro-step (`iterations` is its quotient when
        Keras's `gradient_accumulation_steps` is set)."""
        _keras_optimizer.micro_step_counter(self._optimizer).assign_add(1)

    def read(self):
        """The global step, as a tensor."""
        return tf.convert_to_tensor(self._optimizer.iterations)


class Apply:
    """The optimizer's update of the policy's variables, gated.

    Args:
        optimizer: The model's optimizer (possibly a `LossScaleOptimizer`).
        policy: The resolved `PolicyPlan`: its variables and lr
            multipliers.
        loss_scale: The `LossScale` stage, or `None` (without one, a
            `LossScaleOptimizer` applies through its own `apply`).

    Example:
    ```python
    apply = Apply(model.optimizer, policy, loss_scale=None)
    ```
    """

    name = "apply"

    def __init__(self, optimizer, policy, loss_scale):
        self.optimizer = optimizer
        self.variables = list(policy.variables)
        self.lr_multipliers = policy.lr_multipliers
        self.loss_scale = loss_scale
        self.steps = OptimizerSteps(optimizer)
        self.gradient_scale = gradient_scale(optimizer)

    def describe(self):
        """One line: the optimizer, and what is installed on it."""
        inner = _keras_optimizer.inner_optimizer(self.optimizer)
        what = f"{type(inner).__name__} on the summed gradients"
        if self.lr_multipliers is not None:
            scaled = sum(m is not None for m in self.lr_multipliers)
            noun = "variable" if scaled == 1 else "variables"
            what += f", {scaled} {noun} at a scaled learning rate"
        return f"{self.name:<12}{what}"

    def update(self, step, then=None):
        """Applies the update's gradients, gated on its verdict.

        Args:
            step: The `Update`.
            then: Unused: Apply is the last stage.

        Returns:
            An empty `Outcome`.
        """
        with lr_factors.scaled(
            self.optimizer, self.variables, self.lr_multipliers
        ):
            self._gated(step)
        return step.outcome()

    def _apply(self, grads):
        with presummed(self.optimizer):
            if self.loss_scale is None:
                self.optimizer.apply(list(grads), self.variables)
            else:
                self.loss_scale.apply(list(grads), self.variables)

    def _skip(self, step, loss_finite=None):
        if self.loss_scale is None:
            step.gate.skip()
        else:
            if loss_finite is None:
                loss_finite = step.loss_finite
            self.loss_scale.skip(step.gate, loss_finite)

    def _gated(self, step):
        """The update as `cond`s: asserts, applies, or skips."""
        grads, finite, error = step.grads, step.finite, step.error
        if finite is None:
            self._apply(grads)
            return
        skip = functools.partial(self._skip, step)
        no_merge_call = _keras.strategy_supports_no_merge_call()
        if error is not None and no_merge_call and self.loss_scale is None:
            with tf.control_dependencies([gate_lib.assert_op(finite, error)]):
                self._apply(grads)
            return
        if error is not None and no_merge_call:
            check = gate_lib.assert_op(step.checked, error)
            with tf.control_dependencies([check]):
                tf.cond(finite, lambda: self._apply(grads), skip)
            return
        if no_merge_call:
            tf.cond(finite, lambda: self._apply(grads), skip)
        else:
            with presummed(self.optimizer):
                tf.distribute.get_replica_context().merge_call(
                    functools.partial(
                        _cross_replica, apply=self._apply, skip=skip
                    ),
                    args=(finite, grads, step.loss_finite),
                )
        if error is not None:
            gate_lib.assert_op(step.checked, error)


def _cross_replica(distribution, finite, grads, loss_finite, apply, skip):
    """Cross-replica `cond`, as Keras's `LossScaleOptimizer._tf_apply`."""
    # Every replica holds the same values: they were all-reduced.
    finite = distribution.experimental_local_results(finite)[0]
    if loss_finite is not None:
        loss_finite = distribution.experimental_local_results(loss_finite)[0]
    tf.cond(
        finite,
        lambda: distribution.extended.call_for_each_replica(
            apply, args=(grads,)
        ),
        lambda: skip(loss_finite),
    )
