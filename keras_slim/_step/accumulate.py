"""The Accumulate stage: Keras's `gradient_accumulation_steps`, with the
policy once per update.
"""

import functools

import keras
import tensorflow as tf

from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim import _strategy

__all__ = [
    "Accumulate",
    "StepLossMean",
    "batch_count",
    "check",
    "install",
    "micro_step",
    "step_loss",
    "steps",
]


def steps(optimizer):
    """The optimizer's `gradient_accumulation_steps`, or `None`.

    Args:
        optimizer: A Keras optimizer, or `None`.

    Returns:
        An int >= 2, or `None` when it does not accumulate.
    """
    inner = _keras_optimizer.inner_optimizer(optimizer)
    return getattr(inner, "gradient_accumulation_steps", None) or None


def batch_count(optimizer):
    """`(batches, k)`: the batches (micro-steps) `optimizer` applied so
    far, and the batches of one global step (`k`, else 1), as ints.

    Args:
        optimizer: A built Keras optimizer.

    Returns:
        A pair of ints, read on the host.
    """
    k = steps(optimizer) or 1
    return int(_keras_optimizer.micro_step_counter(optimizer).numpy()), k


def step_loss(model):
    """The `StepLossMean` of a `SlimModel` whose optimizer accumulates
    (made with its train function), or `None`.

    Args:
        model: A Keras model.

    Returns:
        A `StepLossMean`, or `None`.
    """
    if steps(getattr(model, "optimizer", None)) is None:
        return None
    return getattr(model, "_step_loss", None)


def check(model):
    """Raises before any step for an accumulation keras_slim cannot run.

    Args:
        model: The `SlimModel`, compiled.

    Raises:
        ValueError: under `ParameterServerStrategy`, or with a
            `LossScaleOptimizer`, when the optimizer accumulates.
    """
    optimizer = getattr(model, "optimizer", None)
    k = steps(optimizer)
    if k is None:
        return
    if _strategy.mode(model.distribute_strategy).workers_apply_own_steps:
        raise ValueError(
            "Invalid value for argument `gradient_accumulation_steps`. "
            f"Received: gradient_accumulation_steps={k} under "
            "ParameterServerStrategy, whose workers apply their own "
            "steps (asynchronously, or aggregated with "
            "`replicas_to_aggregate`). Accumulate with MirroredStrategy or "
            "MultiWorkerMirroredStrategy, or raise `replicas_to_aggregate` "
            "(or the batch size) instead."
        )
    if _keras_optimizer.loss_scale_optimizer(optimizer) is not None:
        raise ValueError(
            "Invalid value for argument `gradient_accumulation_steps`. "
            f"Received: gradient_accumulation_steps={k} on the optimizer "
            f"of a {type(optimizer).__name__}, whose loss scale may change "
            "between micro-batches. Accumulate without loss scaling, or "
            "without accumulation."
        )


def install(optimizer, active):
    """Lets keras_slim apply an accumulating optimizer's updates itself.

    While `active()`, `optimizer.apply` updates at once (Keras's own
    accumulation is off), and a learning-rate schedule is read at the
    global step (`iterations`) rather than at micro-steps. Idempotent; a
    no-op for an optimizer that does not accumulate.

    Args:
        optimizer: A Keras 3 optimizer (not a `LossScaleOptimizer`).
        active: A function of no argument: whether keras_slim is applying.
    """
    if steps(optimizer) is None:
        return
    _keras_optimizer.replace_accumulating_apply(optimizer, active)
    _keras_optimizer.schedule_at_optimizer_steps(optimizer)


class StepLossMean:
    """The loss of the optimizer step, over its `k` micro-batches.

    Keras's loss tracker averages each batch's loss over the epoch; the
    loss "of a step" that TF-Slim logged is, under accumulation, the mean
    over the step's `k` micro-batches, weighted by their sizes: one
    device's loss on the `k`-times batch. `update` adds a micro-batch's
    loss in the train step (restarting at each step's first micro-batch);
    on the `k`-th, the running mean becomes `last`, the loss of the global
    step `optimizer.iterations`, which the host reads when it logs.

    Args:
        strategy: The model's distribution strategy: the state is
            per-replica sums, as Keras's metrics keep.

    Attributes:
        running: A `keras.metrics.Mean` over the current step's
            micro-batches so far.
        last: A `keras.metrics.Mean` of the last completed step (empty
            before the first).

    Example:
    ```python
    mean = StepLossMean(model.distribute_strategy)
    mean.update(optimizer, loss, batch_size)  # in the train step
    ```
    """

    def __init__(self, strategy):
        with strategy.scope():
            self.running = keras.metrics.Mean(name="keras_slim_step_running")
            self.last = keras.metrics.Mean(name="keras_slim_step_loss")

    def update(self, optimizer, loss, batch_size):
        """Adds one micro-batch's loss, before its gradients are added.

        Args:
            optimizer: The accumulating optimizer (its micro-step count
                not yet advanced for this micro-batch).
            loss: This replica's mean loss over its share of the batch.
            batch_size: This replica's share of the batch.
        """
        k = steps(optimizer)
        counter = _keras_optimizer.micro_step_counter(optimizer)
        starts = keras.ops.equal(counter % k, 0)
        ends = keras.ops.equal((counter + 1) % k, 0)
        size = keras.ops.cast(batch_size, "float32")
        added = (keras.ops.cast(loss, "float32") * size, size)
        for running, last, value in zip(
            (self.running.total, self.running.count),
            (self.last.total, self.last.count),
            added,
        ):
            now = keras.ops.where(starts, 0.0, running) + value
            running.assign(now)
            last.assign(keras.ops.where(ends, now, last))

    def state(self, optimizer):
        """`[last total, last count, 1.0 if a step ended]` as float32: what
        a multi-step call records after each micro-batch
        (`keras_slim/_fit/loops.py`)."""
        ended = tf.equal(
            _keras_optimizer.micro_step_counter(optimizer) % steps(optimizer), 0
        )
        return tf.stack(
            [
                tf.convert_to_tensor(self.last.total),
                tf.convert_to_tensor(self.last.count),
                tf.cast(ended, "float32"),
            ]
        )


def micro_step(optimizer, grads, variables, *, loss, update, idle=None):
    """Adds one micro-batch's gradients; on the `k`-th, calls `update`.

    Must be called in replica context with gradients already summed
    across replicas, so every replica holds the same sums.

    Args:
        optimizer: The accumulating Keras optimizer (built).
        grads: This micro-batch's summed gradients, one per variable
            (`None` where a variable has none).
        variables: The variables the gradients belong to.
        loss: The micro-batch's summed loss when the step is checked, or
            `None`: a non-finite loss makes the accumulated gradient
            non-finite, so the check of the update sees it.
        update: A function of the mean gradients (one per variable) that
            checks, runs the policy and applies them (advancing the
            micro-step count, or failing). It returns a tensor when
            `idle` is given, else `None`.
        idle: `None`, or a function of no argument giving what the other
            micro-steps return in place of `update`'s tensor (the same
            shape and dtype).

    Returns:
        `update`'s tensor on the update's micro-step, `idle()`'s on the
        others; `None` without `idle`.
    """
    k = steps(optimizer)
    present = [i for i, g in enumerate(grads) if g is not None]
    if not present:
        return update(list(grads))
    summed = _poisoned([tf.convert_to_tensor(grads[i]) for i in present], loss)
    sums = _keras_optimizer.accumulators(
        optimizer, [variables[i] for i in present]
    )
    counter = _keras_optimizer.micro_step_counter(optimizer)

    def last(summed):
        means = list(grads)
        for i, s, g in zip(present, sums, summed):
            means[i] = (s + g) / k
        out = update(means)
        with tf.control_dependencies(None if out is None else [out]):
            for s in sums:
                s.assign(tf.zeros_like(s))
        return out

    def add(summed):
        for s, g in zip(sums, summed):
            s.assign_add(g)
        counter.assign_add(1)
        return None if idle is None else idle()

    if _keras.strategy_supports_no_merge_call():
        is_last = tf.equal((counter + 1) % k, 0)
        return tf.cond(is_last, lambda: last(summed), lambda: add(summed))
    # A strategy that updates through `merge_call` branches in cross-replica
    # context, as the Apply stage gates. It runs one replica
    # per device, so no XLA and no verdict.
    tf.distribute.get_replica_context().merge_call(
        functools.partial(
            _cross_replica,
            is_last=lambda: tf.equal((counter + 1) % k, 0),
            last=last,
            add=add,
        ),
        args=(summed,),
    )
    return None


def _cross_replica(distribution, summed, *, is_last, last, add):
    """`micro_step`'s `cond`, from cross-replica context."""
    run = distribution.extended.call_for_each_replica
    tf.cond(
        is_last(),
        lambda: run(last, args=(summed,)),
        lambda: run(add, args=(summed,)),
    )


def _poisoned(grads, loss):
    """The gradients, the first carrying `0 * loss`: NaN when the loss is
    not finite, zero otherwise (which leaves it unchanged)."""
    if loss is None:
        return grads
    first = grads[0] + keras.ops.cast(0.0 * loss, grads[0].dtype)
    return [first, *grads[1:]]


class Accumulate:
    """Micro-steps: adds each micro-batch's gradients; on the `k`-th, runs
    the rest of the plan on their mean.

    Args:
        optimizer: The accumulating Keras optimizer.
        variables: The policy's variables.
        step_loss: The model's `StepLossMean` (kept across fits: a step
            may span two), or `None`.
        idle: `None`, or what the micro-steps that apply nothing return
            in place of the deferred verdict (`gate.idle_verdict`).

    Example:
    ```python
    stage = Accumulate(optimizer, policy.variables, model._step_loss)
    ```
    """

    name = "accumulate"

    def __init__(self, optimizer, variables, step_loss, *, idle=None):
        self.optimizer = optimizer
        self.variables = variables
        self.step_loss = step_loss
        self._idle = idle

    def describe(self):
        """One line: how many micro-batches make an update."""
        return (
            f"{self.name:<12}the mean of every {steps(self.optimizer)} "
            "micro-batches' gradients makes one update"
        )

    def update(self, step, then):
        """Adds one micro-batch; on the `k`-th, runs `then` on the mean.

        Args:
            step: The micro-batch's `Update`.
            then: The rest of the plan.

        Returns:
            An `Outcome`: the verdict of the update's micro-step (or the
            idle one), and whether this micro-batch's loss is finite.
        """
        if self.step_loss is not None and step.replica_loss is not None:
            self.step_loss.update(
                self.optimizer,
                _keras.unscale_loss(step.replica_loss),
                step.batch_size,
            )
        verdict = micro_step(
            self.optimizer,
            step.grads,
            self.variables,
            loss=step.loss,
            update=lambda means: then(step.replace(grads=means)).verdict,
            idle=self._idle,
        )
        finite = None
        if step.loss is not None:
            finite = keras.ops.isfinite(step.loss)
        return step.outcome(verdict=verdict, finite=finite)
