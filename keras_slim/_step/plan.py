"""`StepPlan`: one update of a `SlimModel` step, as an ordered chain of
stages.
"""

import dataclasses
import functools

import tensorflow as tf

from keras_slim._step import accumulate as accumulate_lib
from keras_slim._step import apply as apply_lib
from keras_slim._step import gate as gate_lib
from keras_slim._step import loss_scale as loss_scale_lib
from keras_slim._step import policy as policy_lib

__all__ = [
    "Outcome",
    "StepPlan",
    "Update",
    "build",
    "check",
    "sum_across_replicas",
]


@dataclasses.dataclass(frozen=True)
class Update:
    """What flows through the stages: one update's values so far.

    Attributes:
        grads: One gradient (or `None`) per variable of the policy,
            summed across replicas.
        loss: The loss summed across replicas, or `None` when the
            update is not checked.
        replica_loss: This replica's loss, as `compute_loss` gave it
            (`None` for an update aggregated from workers).
        batch_size: This replica's batch size (or `None`).
        x: The batch's inputs, for in-step summaries (or `None`).
        activations: The layer outputs in-step summaries write, or `None`.
        gate: The `Gate` once it checked the update, else `None`.
        finite: The gate's verdict (a scalar boolean), or `None`.
        checked: What a failing update asserts: `finite`, or under a loss
            scale whether the loss is finite.
        error: The assertion's data when a non-finite update fails here,
            else `None`.
        squares: The gradients' squared norms, for the clip to reuse.
        loss_finite: Under a loss scale, whether the loss is finite.
    """

    grads: list
    loss: object = None
    replica_loss: object = None
    batch_size: object = None
    x: object = None
    activations: object = None
    gate: object = None
    finite: object = None
    checked: object = None
    error: object = None
    squares: object = None
    loss_finite: object = None

    def replace(self, **changes):
        """A copy with `changes`."""
        return dataclasses.replace(self, **changes)

    def outcome(self, verdict=None, finite=None):
        """An `Outcome` of this update."""
        return Outcome(verdict, finite)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What the train step reads back from its update.

    Attributes:
        verdict: The deferred numeric verdict under XLA (the loop around
            the step fails on it), else `None`.
        finite: What the loss tracker counts as finite (a scalar boolean),
            or `None` without a check.
    """

    verdict: object = None
    finite: object = None


@dataclasses.dataclass(frozen=True)
class StepPlan:
    """The stages of one run's update, in order.

    Attributes:
        stages: The stages, outermost first; the last is `Apply`.
        policy: The resolved `PolicyPlan`.

    Example:
    ```python
    plan = build(model, options)
    grads, loss = sum_across_replicas(grads, loss if plan.checks else None)
    outcome = plan.update(Update(grads, loss, replica_loss=..., ...))
    ```
    """

    stages: tuple
    policy: object

    @property
    def variables(self):
        """The variables the update trains, in model order."""
        return self.policy.variables

    @property
    def checks(self):
        """Whether the update is checked (the loss is then summed too)."""
        return self.policy.check_numerics

    def update(self, step):
        """Runs the stages on one update.

        Args:
            step: The `Update`, gradients summed across replicas.

        Returns:
            The `Outcome`.
        """
        return _chain(self.stages)(step)

    def describe(self):
        """The stages in order, one line each.

        Returns:
            The text, as `SlimModel.describe` prints it above the policy's
            table.
        """
        return "\n".join(
            f"{i}. {stage.describe()}" for i, stage in enumerate(self.stages, 1)
        )


def _chain(stages):
    """`update(step)` running `stages[0]`, which runs the rest."""
    if len(stages) == 1:
        return functools.partial(stages[0].update, then=None)
    rest = _chain(stages[1:])
    return functools.partial(stages[0].update, then=rest)


def check(model):
    """Raises before any step for settings no plan can run: each stage's
    own check.

    Args:
        model: The `SlimModel`, compiled.

    Raises:
        ValueError: for `jit_compile=True` with several replicas in this
            process, a `keras.optimizers.MultiOptimizer`, or a loss scale
            or gradient accumulation the strategy cannot run.
    """
    gate_lib.check(model)
    apply_lib.check(model)
    accumulate_lib.check(model)
    loss_scale_lib.check(model)


def build(model, options, policy):
    """The plan of a run: the stages its options, policy and optimizer
    need.

    Args:
        model: The `SlimModel` (its optimizer built).
        options: The run's `StepOptions`.
        policy: The resolved `PolicyPlan`.

    Returns:
        A `StepPlan`.
    """
    optimizer = model.optimizer
    scale = None
    if policy.check_numerics:
        # Unchecked, a LossScaleOptimizer's own `apply` checks and scales.
        scale = loss_scale_lib.LossScale.of(optimizer, options.overflow_steps)
    apply = apply_lib.Apply(optimizer, policy, scale)
    stages = []
    k = accumulate_lib.steps(optimizer)
    if k:
        idle = None
        if options.defer_check and options.raise_on_nonfinite:
            if policy.check_numerics:
                idle = gate_lib.idle_verdict
        stages.append(
            accumulate_lib.Accumulate(
                optimizer, policy.variables, model._step_loss, idle=idle
            )
        )
    if policy.check_numerics:
        stages.append(
            gate_lib.Gate(
                raises=options.raise_on_nonfinite,
                deferred=options.defer_check,
                skipped=options.skipped_steps,
                loss_scaled=scale is not None,
                optimizer_steps=apply.steps,
            )
        )
    stages.append(policy_lib.Policy(policy, apply.gradient_scale))
    if options.step_summaries is not None:
        stages.append(
            policy_lib.Summaries(
                options.step_summaries, model, policy.variables
            )
        )
    if scale is not None:
        stages.append(scale)
    stages.append(apply)
    return StepPlan(tuple(stages), policy)


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
