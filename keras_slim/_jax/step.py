"""The JAX backend's train step: the gradient policy between Keras's
`jax.value_and_grad` and the optimizer, as one functional update."""

import dataclasses
import functools
import math

import jax
import keras
import numpy as np
from keras import ops

from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim import gradients as gradients_lib
from keras_slim._jax import step_summaries
from keras_slim._step import gate as gate_lib
from keras_slim._step import lr_factors

__all__ = [
    "JaxPlan",
    "host_counters",
    "initial_counters",
    "packed_counters",
    "plan_for",
    "run",
]

# The step's counters, kept beside Keras's state by the train function:
# one int32 vector, `[failed step, skipped, first skipped, last skipped,
# overflows, loss, squared gradient norm]`, 0 where none; the last two
# (of the step that failed) are float32 values held in its bits. One
# array, not one per type: each array a step takes and returns costs
# Keras's `fit` loop on JAX some microseconds a step.
FAILED, SKIPPED, FIRST_SKIPPED, LAST_SKIPPED, OVERFLOWS = range(5)
INTS = 5
SIZE = INTS + 2


@dataclasses.dataclass(frozen=True)
class JaxPlan:
    """What one run's compiled step does, fixed when it is traced.

    Attributes:
        policy: The resolved `PolicyPlan`.
        indices: The position of each of `policy.variables` in the model's
            `trainable_variables` (the order of Keras's gradient list).
        raises: Whether a non-finite loss or gradient fails the step (else
            it is skipped). Only with `policy.check_numerics`.
        loss_scale: The `LossScaleOptimizer` whose dynamic scale the step
            moves, or `None`.
        accumulation: Keras's `gradient_accumulation_steps`, or `None`.
        optimizer: The optimizer that updates the variables (a
            `LossScaleOptimizer`'s inner one).
    """

    policy: object
    indices: tuple
    raises: bool
    loss_scale: object
    accumulation: int
    optimizer: object

    def describe(self):
        """The stages of the update in the order they run, one a line,
        as `StepPlan.describe` prints them on TensorFlow."""
        lines = []
        if self.accumulation:
            lines.append(
                f"{'accumulate':<12}the mean of every {self.accumulation} "
                "micro-batches' gradients makes one update"
            )
        if self.policy.check_numerics:
            what = "fails" if self.raises else "skips"
            lines.append(
                f"{'gate':<12}a non-finite loss or gradient {what} the step"
            )
        n = len(self.policy.variables)
        noun = "variable" if n == 1 else "variables"
        lines.append(
            f"{'policy':<12}select, multiply, clip: {n} {noun} trained"
        )
        if self.loss_scale is not None:
            lines.append(
                f"{'loss scale':<12}unscale a finite update (the scale "
                f"doubles every {self.loss_scale.dynamic_growth_steps} of "
                "them); an overflow halves it and skips the step"
            )
        lines.append(
            f"{'apply':<12}{type(self.optimizer).__name__} on the global "
            "batch's "
            "gradient (JAX)"
        )
        return "\n".join(f"{i}. {line}" for i, line in enumerate(lines, 1))


def initial_counters():
    """The counters of a model that has not skipped or failed a step:
    copied from the host (each `fit` starts from new ones, the step
    donating them), not computed by an operation on the device."""
    return jax.numpy.asarray(np.zeros([SIZE], np.int32))


def host_counters(counters):
    """`(ints, error)` of the counters, read on the host: the five ints
    as an int32 NumPy vector, and `[loss, squared gradient norm]` of the
    step that failed as a float32 one.

    Args:
        counters: The step's counters (a JAX array).

    Returns:
        `(ints, error)`.

    Example:
    ```python
    ints, error = host_counters(model.train_function.counters)
    ints[SKIPPED]  # steps skipped so far
    ```
    """
    values = np.asarray(counters)
    return values[:INTS], values[INTS:].view(np.float32)


def packed_counters(ints, error):
    """The counters of `ints` (5) and `error` (2 floats), on the host:
    what `host_counters` reads back.

    Args:
        ints: The five ints.
        error: `[loss, squared gradient norm]`.

    Returns:
        An int32 NumPy vector.
    """
    error = np.asarray(error, np.float32).view(np.int32)
    return np.concatenate([np.asarray(ints, np.int32), error])


def _unpacked(counters):
    """`(ints, error)` of the counters, in the step."""
    error = jax.lax.bitcast_convert_type(counters[INTS:], "float32")
    return counters[:INTS], error


def _packed(ints, error):
    """The counters of `ints` and `error`, in the step."""
    bits = jax.lax.bitcast_convert_type(ops.cast(error, "float32"), "int32")
    return ops.concatenate([ints, bits])


def plan_for(model, policy, raises):
    """The `JaxPlan` of `model`'s step.

    Args:
        model: The `SlimModel`, compiled and built.
        policy: The resolved `PolicyPlan`.
        raises: Whether a non-finite update fails (else it is skipped).

    Returns:
        A `JaxPlan`.
    """
    positions = {id(v): i for i, v in enumerate(model.trainable_variables)}
    optimizer = model.optimizer
    scale = _keras_optimizer.loss_scale_optimizer(optimizer)
    if scale is not None and not hasattr(scale, "dynamic_growth_steps"):
        scale = None
    inner = _keras_optimizer.inner_optimizer(optimizer)
    return JaxPlan(
        policy=policy,
        indices=tuple(positions[id(v)] for v in policy.variables),
        raises=raises,
        loss_scale=scale,
        accumulation=getattr(inner, "gradient_accumulation_steps", None),
        optimizer=inner,
    )


def run(model, plan, state, counters, data, summaries=None):
    """One train step: forward, loss, gradient, the policy, metrics.

    Under `keras.distribution` the gradient `jax.value_and_grad` returns
    is already the global batch's (the cross-device sum is in the compiled
    program), so the policy acts after the sum by construction.

    Args:
        model: The `SlimModel`.
        plan: Its `JaxPlan`.
        state: Keras's `(trainable, non-trainable, optimizer, metrics)`
            variable values.
        counters: The step's counters (`initial_counters`).
        data: The batch, `(x, y, sample_weight)` in Keras's convention.
        summaries: A `step_summaries.SummaryPlan` for a step that also
            returns what `Summaries` writes from inside the step, or
            `None`. Defaults to `None`.

    Returns:
        `(logs, state, counters)`; with `summaries`, `(logs, state,
        counters, outputs)`, `outputs` as `step_summaries.outputs` makes
        them.
    """
    tv, old_ntv, ov, mv = state
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    forward = model.compute_loss_and_updates
    if summaries is not None and summaries.probe is not None:
        forward = functools.partial(step_summaries.forward, model, summaries)
    grad_fn = jax.value_and_grad(forward, has_aux=True)
    (loss, (unscaled, y_pred, ntv, mv, *activations)), grads = grad_fn(
        tv, old_ntv, mv, x, y, sample_weight,
        training=True, optimizer_variables=ov,
    )  # fmt: skip
    grads = [grads[i] for i in plan.indices]
    tv, ov, counted, counters, hold, applied = _update(
        model, plan, tv, ov, grads, loss, counters
    )
    # The forward pass's own updates (batch norm's moving statistics, the
    # seed generators' states) are held too by a failing step, and by a
    # skipped one whose loss was not finite: the state stays the one of a
    # run without that batch.
    ntv = [ops.where(hold, a, b) for a, b in zip(old_ntv, ntv)]
    logs, mv = _metrics(
        model, mv, unscaled, counted, (x, y, y_pred, sample_weight)
    )
    if summaries is None:
        return logs, (tv, ntv, ov, mv), counters
    outputs = step_summaries.outputs(summaries, applied, activations)
    return logs, (tv, ntv, ov, mv), counters, outputs


def _update(model, plan, tv, ov, grads, loss, counters):
    """The policy's update, selected by the gate: applied, skipped, or
    failed (nothing changes, and the counters name the step); whether
    the forward pass's updates are held too; and the gradients the
    optimizer was given (after the policy, unscaled)."""
    optimizer = model.optimizer
    inner = _keras_optimizer.inner_optimizer(optimizer)
    mapping = list(zip(model.trainable_variables, tv))
    mapping += list(zip(optimizer.variables, ov))
    old = [value for _, value in mapping]
    failed_before = counters[FAILED] > 0
    with keras.StatelessScope(state_mapping=mapping):
        step = inner.iterations + 1  # the global step this update makes
        if plan.accumulation:
            grads = _poisoned(grads, loss)
        micro = grads
        grads, ready = _accumulated(plan, inner, grads)
        finite, loss_finite, error = _check(plan, grads, loss)

    ok, fails, counted = _outcome(plan, ready, finite, loss_finite)
    keep = ops.logical_or(fails, failed_before)
    if not _gated(plan):
        # Nothing is checked: no step fails or skips, each one applies.
        scope = keras.StatelessScope(state_mapping=mapping)
        values, grads = _applied(scope, mapping, plan, optimizer, grads)
    else:
        take = ops.logical_and(ok, ops.logical_not(keep))
        gated = _GatedScope(take, mapping)
        applied, grads = _applied(gated, mapping, plan, optimizer, grads)
        with keras.StatelessScope(state_mapping=mapping) as scope:
            _not_applied(plan, optimizer, micro, ready, finite, loss_finite)
        not_applied = _read(scope, mapping)
        spare = ops.logical_and(ops.logical_not(ok), ops.logical_not(keep))
        values = [
            a if n is o else ops.where(spare, n, a)
            for o, a, n in zip(old, applied, not_applied)
        ]
    recorded = _record(plan, counters, step, ready, finite, fails, error)
    # After a failure the call's later steps change nothing, counters too.
    counters = ops.where(failed_before, counters, recorded)
    hold = ops.logical_or(
        keep,
        ops.logical_and(ops.logical_not(counted), ops.logical_not(loss_finite)),
    )
    counted = ops.logical_and(counted, ops.logical_not(keep))
    n = len(tv)
    return values[:n], values[n:], counted, counters, hold, grads


def _applied(scope, mapping, plan, optimizer, grads):
    """`(values, gradients)`: the values of `mapping`'s variables after
    the policy and the optimizer applied `grads` in `scope`, and the
    gradients the optimizer was given."""
    with scope:
        grads = _apply(plan, optimizer, grads)
    return _read(scope, mapping), grads


class _GatedScope(keras.StatelessScope):
    """A stateless scope whose every update is kept only where `take`.

    Each assignment stores `where(take, new, old)` at once, so that what
    the update reads next (a momentum, then the variable it moves) is the
    selected value: the compiled step writes each variable once, in place,
    where a select of the results after the update would keep the old
    value and the new one alive side by side (a copy of every slot).

    On XLA's CPU backend each assignment also waits for the one before
    it (`_after`, in its condition): every assignment waits for the
    global verdict, and once it is known, XLA's CPU executor would find
    all of them ready at once. Past eight ready kernels it hands the rest
    to another thread and waits for it, which on a small model costs more
    than the update itself.

    Args:
        take: Scalar boolean: whether the updates apply.
        mapping: `(variable, value)` pairs, the values before the step.
    """

    def __init__(self, take, mapping):
        super().__init__(state_mapping=mapping)
        self._take = take
        self._old = dict(self.state_mapping)
        self._chained = jax.default_backend() == "cpu"
        self._last = None

    def add_update(self, update):
        variable, value = update
        old = self._old.get(id(variable))
        if old is not None:
            take = self._take
            if self._chained and self._last is not None:
                take = _after(take, self._last)
            value = ops.where(take, value, old)
            self._last = value
        super().add_update((variable, value))


def _after(flag, value):
    """`flag`, computed only once `value` is: a data dependency that
    changes nothing (`x == x or x != x` holds for every `x`, NaN
    included), so that what reads it waits for `value`."""
    if math.prod(value.shape) == 0:
        return flag
    # Its first element, not a reshape: a variable sharded by a layout map
    # would be laid out again to be flattened.
    x = value[(0,) * len(value.shape)]
    return ops.logical_and(flag, ops.logical_or(x == x, x != x))


def _gated(plan):
    """Whether a step can fail, skip or only accumulate (else each one
    applies its update)."""
    return bool(
        plan.policy.check_numerics
        or plan.loss_scale is not None
        or plan.accumulation
    )


def _read(scope, mapping):
    """Each variable's value in `scope`, its mapped value if unchanged."""
    values = []
    for variable, value in mapping:
        new = scope.get_current_value(variable)
        values.append(value if new is None else new)
    return values


def _accumulated(plan, inner, grads):
    """The gradients this step applies and whether it applies them: each
    micro-batch's under accumulation, their mean on the `k`-th (the
    accumulators start again from zero when it applies: `_apply`)."""
    if not plan.accumulation:
        return grads, ops.convert_to_tensor(True)
    k = plan.accumulation
    ready = ops.equal((_keras_optimizer.micro_step_counter(inner) + 1) % k, 0)
    sums = _keras_optimizer.accumulators(inner, plan.policy.variables)
    return [(s.value + g) / k for g, s in zip(grads, sums)], ready


def _poisoned(grads, loss):
    """`grads` with the first made non-finite by a non-finite `loss`: a
    micro-batch's non-finite loss reaches the update through the sums."""
    first = grads[0] + ops.cast(0.0 * loss, grads[0].dtype)
    return [first, *grads[1:]]


def _check(plan, grads, loss):
    """`(finite, loss finite, [loss, squared norm])` of the update.

    The gradients are checked through their squared global norm: the sum
    of the per-gradient norms a clip computes too (the compiled step
    computes them once), else one reduction over them all."""
    present = [g for g in grads if g is not None]
    clipped = plan.policy.clip_norm is not None
    clipped = clipped or plan.policy.clip_global_norm is not None
    if not present:
        squares = None
    elif not clipped:
        squares = gradients_lib.squared_global_norm(present)[None]
    else:
        squares = gradients_lib.squared_norms(present)
    finite, error = gate_lib.numeric_check(loss, squares)
    data = [ops.cast(v, "float32") for v in error[1:]]
    if len(data) == 1:
        data.append(ops.convert_to_tensor(0.0))
    return finite, ops.isfinite(loss), ops.stack(data)


def _apply(plan, optimizer, grads):
    """The policy and the optimizer on `grads`, in a stateless scope: the
    variables the policy freezes never reach the optimizer. Returns the
    gradients the optimizer was given (after the policy, unscaled)."""
    policy = plan.policy
    inner = _keras_optimizer.inner_optimizer(optimizer)
    if plan.accumulation:
        for s in _keras_optimizer.accumulators(inner, policy.variables):
            s.assign(ops.zeros(s.shape, s.dtype))
    scale = None if plan.loss_scale is None else plan.loss_scale.dynamic_scale
    grads = policy.apply(grads, scale=scale)
    if scale is not None:
        grads = [
            g
            if g is None or getattr(v, "overwrite_with_gradient", False)
            else g / ops.cast(scale, g.dtype)
            for g, v in zip(grads, policy.variables)
        ]
    with lr_factors.scaled(inner, policy.variables, policy.lr_multipliers):
        inner.apply(grads, list(policy.variables))
    _hold_frozen_averages(inner, policy.variables)
    if plan.loss_scale is not None:
        _grow(plan.loss_scale)
    return grads


def _hold_frozen_averages(inner, trained):
    """Keras's `use_ema` averages every variable the optimizer was built
    on; the average of one the policy does not train stays equal to it,
    bitwise (no drift by rounding of `m * v + (1 - m) * v`)."""
    trained = {id(v) for v in trained}
    for variable, average in _keras_optimizer.moving_averages(inner):
        if id(variable) not in trained:
            average.assign(variable.value)


def _grow(optimizer):
    """A finite update: the scale doubles every `dynamic_growth_steps`."""
    counter = optimizer.step_counter
    grows = ops.equal(counter, optimizer.dynamic_growth_steps - 1)
    scale = optimizer.dynamic_scale.value
    optimizer.dynamic_scale.assign(ops.where(grows, scale * 2.0, scale))
    counter.assign(ops.where(grows, 0, counter.value + 1))


def _not_applied(plan, optimizer, micro, ready, finite, loss_finite):
    """A step that applies nothing: a micro-step adds its gradient to the
    sums, a skipped update advances the step count (and starts the sums
    again), an overflow halves the loss scale."""
    inner = _keras_optimizer.inner_optimizer(optimizer)
    counter = _keras_optimizer.micro_step_counter(inner)
    counter.assign(counter + 1)
    if plan.accumulation:
        sums = _keras_optimizer.accumulators(inner, plan.policy.variables)
        for s, g in zip(sums, micro):
            s.assign(ops.where(ready, ops.zeros(s.shape, s.dtype), s.value + g))
    if plan.loss_scale is None:
        return
    overflow = ops.logical_and(ready, ops.logical_not(finite))
    if plan.policy.check_numerics:  # a non-finite loss is the gate's
        overflow = ops.logical_and(overflow, loss_finite)
    scale = plan.loss_scale.dynamic_scale
    scale.assign(ops.where(overflow, scale.value * 0.5, scale.value))
    counter = plan.loss_scale.step_counter
    counter.assign(ops.where(overflow, 0, counter.value))


def _outcome(plan, ready, finite, loss_finite):
    """`(applied, fails, counted)`: whether the update applies, whether
    it fails the step, and whether the loss counts in the reported mean
    (an overflow's finite loss does, as on TensorFlow)."""
    checked = plan.policy.check_numerics or plan.loss_scale is not None
    if not checked:
        return ready, ops.convert_to_tensor(False), ops.convert_to_tensor(True)
    # Under a loss scale a non-finite gradient with a finite loss is an
    # overflow (a skip), not the gate's failure.
    checked_finite = finite if plan.loss_scale is None else loss_finite
    fails = ops.logical_and(ready, ops.logical_not(checked_finite))
    fails = ops.logical_and(fails, plan.policy.check_numerics and plan.raises)
    return ops.logical_and(ready, finite), fails, checked_finite


def _record(plan, counters, step, ready, finite, fails, error):
    """The counters after this update: a skipped one (an overflow among
    them) counted, a failing one's global step and error recorded."""
    ints, before = _unpacked(counters)
    step = ops.cast(step, "int32")
    skipped = ops.logical_and(ready, ops.logical_not(finite))
    skipped = ops.logical_and(skipped, ops.logical_not(fails))
    if not (plan.policy.check_numerics or plan.loss_scale is not None):
        skipped = ops.convert_to_tensor(False)
    loss_finite = ops.isfinite(error[0])
    overflow = 0 if plan.loss_scale is None else ops.cast(loss_finite, "int32")
    after_skip = ops.stack(
        [
            ints[FAILED],
            ints[SKIPPED] + 1,
            ops.where(ints[SKIPPED] == 0, step, ints[FIRST_SKIPPED]),
            step,
            ints[OVERFLOWS] + overflow,
        ]
    )
    ints = ops.where(skipped, after_skip, ints)
    ints = ops.where(fails, ops.concatenate([step[None], ints[1:]]), ints)
    return _packed(ints, ops.where(fails, error, before))


def _metrics(model, mv, unscaled, counted, batch):
    """Keras's loss tracker and compiled metrics, a step the gate did not
    count left out of the loss mean (as on TensorFlow)."""
    x, y, y_pred, sample_weight = batch
    mapping = list(zip(model.metrics_variables, mv))
    size = next(i for i in keras.tree.flatten(x) if i is not None).shape[0]
    with keras.StatelessScope(state_mapping=mapping) as scope:
        _keras.loss_tracker(model).update_state(
            ops.where(counted, unscaled, ops.zeros_like(unscaled)),
            sample_weight=ops.where(counted, size, 0),
        )
        logs = model.compute_metrics(x, y, y_pred, sample_weight)
    return logs, _read(scope, mapping)
