"""Applying already-summed gradients through a Keras 3 optimizer.

Keras 3's optimizer sums gradients across replicas inside `apply()`;
`SlimModel` sums once itself, runs the policy on the sum, then applies
with that sum switched off (`presummed`). The step is gated on a finite
loss and gradient (`numeric_check`, `apply_gradients`): a failing step
asserts, or is skipped as Keras's `LossScaleOptimizer` skips one (still
advancing `iterations`); under XLA the check is deferred to the loop
around the compiled step (`verdict`, `fail_on_verdict`). Under a
`LossScaleOptimizer` that gate is the only check, and a finite loss with
a non-finite gradient is an overflow that skips the step and lowers the
scale (`keras_slim/_loss_scale.py`). docs/how_it_works.md ("The train step",
"Mixed precision", "The numeric check and XLA") says why; the internals
used are in `keras_slim/_keras.py`.
"""

import contextlib
import functools
import threading

import keras
import tensorflow as tf

from keras_slim import _accumulation
from keras_slim import _keras
from keras_slim import _loss_scale

_LOCK = threading.Lock()

#: The message of the step's `Assert` on a non-finite loss or gradient.
NONFINITE = "keras_slim: LossTensor is inf or nan"

#: The key of a deferred check's verdict in a step's logs.
VERDICT = "keras_slim_numeric_verdict"


def _inner(optimizer):
    """Returns the optimizer that runs the cross-replica sum."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def check(optimizer):
    """Raises before any step for an optimizer keras_slim cannot apply
    summed gradients through.

    Args:
        optimizer: The model's Keras optimizer, possibly a
            `LossScaleOptimizer`.

    Raises:
        ValueError: for a `keras.optimizers.MultiOptimizer`, whose
            sub-optimizers would sum the gradients across replicas again
            (its own switch `install` replaces is never called) and which a
            checkpoint saves without their slots or steps.

    Example:
    ```python
    check(keras.optimizers.Adam())  # fine
    ```
    """
    inner = _inner(optimizer)
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
    """Lets `presummed()` switch off `optimizer`'s cross-replica sum.

    Idempotent; outside `presummed()` the optimizer sums as before.

    Args:
        optimizer: A Keras 3 optimizer (TensorFlow backend), possibly a
            `LossScaleOptimizer`.

    Returns:
        The installed switch.
    """
    switch = _keras.replace_all_reduce_sum(_inner(optimizer), _switch)
    # An accumulating optimizer updates at once when keras_slim applies.
    _accumulation.install(_inner(optimizer), lambda: switch.depth > 0)
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


def verdict(finite, error):
    """A deferred check's verdict: `[finite, loss, squared norm]`, float32.

    Args:
        finite: The scalar boolean of `numeric_check`.
        error: The assertion data of `numeric_check`.

    Returns:
        A float32 vector: 1.0 or 0.0, then the data of `error` after its
        message (the loss, and the squared gradient norm when checked).
    """
    values = [tf.cast(finite, tf.float32)]
    values += [tf.cast(v, tf.float32) for v in error[1:]]
    return tf.stack(values)


def fail_on_verdict(logs):
    """Removes a deferred verdict from a step's logs; fails on a false one.

    Called outside the compiled step, where an `Assert` runs. The message
    is the in-step check's, so `NanLossDuringTrainingError` reads it the
    same way.

    Args:
        logs: The step's reduced logs (a dict), possibly with `VERDICT`.

    Returns:
        The logs without `VERDICT`, depending on the assertion.
    """
    if not isinstance(logs, dict) or VERDICT not in logs:
        return logs
    logs = dict(logs)
    finite, *data = tf.unstack(logs.pop(VERDICT))
    check = _assert(finite > 0, [NONFINITE, *data])
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, logs)


def loss_scale(optimizer):
    """Returns the factor the gradients still carry when `apply` is called.

    Args:
        optimizer: A Keras 3 optimizer.

    Returns:
        `dynamic_scale` for a `LossScaleOptimizer`, `loss_scale_factor` when
        set, else `None`.
    """
    if hasattr(optimizer, "inner_optimizer"):
        return optimizer.dynamic_scale
    return getattr(optimizer, "loss_scale_factor", None)


def sum_across_replicas(grads, loss=None):
    """Sums per-replica gradients (and the loss) in one all-reduce.

    Args:
        grads: List of gradients; `None` entries are kept.
        loss: Optional scalar per-replica loss, already divided by the
            number of replicas as Keras's `compute_loss` does.

    Returns:
        `(grads, loss)` summed across replicas; unchanged with one replica.
    """
    ctx = tf.distribute.get_replica_context()
    if ctx is None or ctx.num_replicas_in_sync == 1:
        return list(grads), loss
    present = [g for g in grads if g is not None]
    values = present + ([loss] if loss is not None else [])
    reduced = ctx.all_reduce(tf.distribute.ReduceOp.SUM, values)
    summed_loss = reduced.pop() if loss is not None else None
    reduced = iter(reduced)
    return [None if g is None else next(reduced) for g in grads], summed_loss


def numeric_check(loss, squares=None):
    """The step's gate: whether the loss and the gradients are finite.

    Computed once per step, on values already summed across replicas, so
    every replica reaches the same verdict. The gradients are checked
    through their squared norms (`keras_slim.gradients.squared_norms`,
    which the clip stage reuses): their sum is finite exactly when every
    gradient is, up to float32's range (a global norm beyond about 1.8e19
    counts as not finite).

    Args:
        loss: The scalar loss, summed across replicas.
        squares: The float32 vector of the gradients' squared norms, or
            `None` to check the loss only (no gradient to check).
            Defaults to `None`.

    Returns:
        `(finite, error)`: a scalar boolean tensor, and the data of the
        assertion that reports a failure (`NONFINITE`, the loss and, when
        checked, the squared global gradient norm).

    Example:
    ```python
    squares = gradients.squared_norms(grads)
    finite, error = numeric_check(total_loss, squares)
    apply_gradients(optimizer, grads, variables, finite, error)
    ```
    """
    finite = tf.math.is_finite(loss)
    if squares is None:
        return finite, [NONFINITE, loss]
    total = tf.reduce_sum(squares)
    finite = tf.logical_and(finite, tf.math.is_finite(total))
    return finite, [NONFINITE, loss, total]


def apply_gradients(
    optimizer,
    grads,
    variables,
    finite=None,
    error=None,
    skipped=None,
    deferred=False,
    *,
    loss_finite=None,
    overflows=None,
):
    """Applies summed gradients; when `finite` is given, only if it is True.

    Must be called in replica context (inside `train_step`). With `error`,
    a false `finite` also fails the step with an `Assert` op carrying
    `error`; on one device the update ops then depend on the
    assertion, which costs two ops instead of a `cond`. Without `error`, a
    false `finite` skips the update but still advances `iterations` and
    records the step in `skipped`. With `deferred` (under XLA), a false
    `finite` applies nothing and advances nothing: the caller fails the
    step on the verdict it returns (`fail_on_verdict`).

    Under a `LossScaleOptimizer` (`loss_finite` given), `finite` is checked
    here only: the optimizer's own check does not run again. A finite
    loss with a non-finite gradient is an overflow of the loss scale, not
    a failure: the step is skipped whatever `error` says (no variable but
    the scale, its growth counter and `iterations` changes), the scale is
    halved, and the step is recorded in `overflows` (and in `skipped`).
    The assertion (and `deferred`) then only covers a non-finite loss.

    Args:
        optimizer: The model's Keras optimizer.
        grads: Gradients already summed across replicas.
        variables: The variables to update, one per gradient.
        finite: `None` to always apply, or a scalar boolean tensor with the
            same value on every replica.
        error: Optional list of values for the assertion's message.
        skipped: Optional `SkippedSteps` recording the steps skipped.
        deferred: Whether the failing check is deferred (see above).
            Defaults to `False`.
        loss_finite: Under a `LossScaleOptimizer`, the scalar boolean
            tensor: whether the loss is finite; else `None`.
            Defaults to `None`.
        overflows: Optional `SkippedSteps` recording the overflows.
            Defaults to `None`.
    """
    variables = list(variables)
    scaled = _loss_scale.dynamic(optimizer) if loss_finite is not None else None

    def apply(grads):
        with presummed(optimizer):
            if scaled is None:
                optimizer.apply(list(grads), variables)
            else:
                _loss_scale.apply_unscaled(scaled, list(grads), variables)

    def skip_step(record):
        # The micro-steps' count: `iterations` is its quotient when
        # Keras's `gradient_accumulation_steps` is set.
        _keras.micro_step_counter(optimizer).assign_add(1)
        for counter in record:
            counter.record(tf.convert_to_tensor(optimizer.iterations))

    def nan_skip():
        if error is not None or deferred:
            return  # the step fails: it is not a step
        skip_step([s for s in (skipped,) if s is not None])

    def overflow():
        _loss_scale.lower(scaled)
        skip_step([s for s in (skipped, overflows) if s is not None])

    def skip(loss_finite=loss_finite):
        if scaled is None:
            nan_skip()
        else:
            tf.cond(loss_finite, overflow, nan_skip)

    if finite is None:
        apply(grads)
        return
    checked = finite if scaled is None else loss_finite
    no_merge_call = _keras.strategy_supports_no_merge_call()
    if deferred:
        error = None  # asserted by the caller, outside XLA
    if error is not None and no_merge_call and scaled is None:
        with tf.control_dependencies([_assert(finite, error)]):
            apply(grads)
        return
    if error is not None and no_merge_call:
        with tf.control_dependencies([_assert(checked, error)]):
            tf.cond(finite, lambda: apply(grads), skip)
        return
    if no_merge_call:
        tf.cond(finite, lambda: apply(grads), skip)
    else:
        with presummed(optimizer):
            tf.distribute.get_replica_context().merge_call(
                functools.partial(_gated, apply=apply, skip=skip),
                args=(finite, grads, loss_finite),
            )
    if error is not None:
        _assert(checked, error)


def _assert(condition, data):
    # The raw op: tf.debugging.Assert wraps itself in a `cond` in graphs.
    return tf.raw_ops.Assert(
        condition=condition,
        data=data,
        summarize=len(data),
        name="check_numerics",
    )


def _gated(distribution, finite, grads, loss_finite, apply, skip):
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
