"""The Gate stage: the numeric check of one update, once, on the summed
gradients.
"""

import keras

from keras_slim import gradients as gradients_lib

#: The message of the step's `Assert` on a non-finite loss or gradient.
NONFINITE = "keras_slim: LossTensor is inf or nan"

#: The key of a deferred check's verdict in a step's logs.
VERDICT = "keras_slim_numeric_verdict"


def check(model):
    """Raises before any step where the verdict cannot be deferred: XLA
    compiles a whole step on one device, so one local replica only.

    Args:
        model: The `SlimModel`, compiled.

    Raises:
        ValueError: for `jit_compile=True` under a strategy with several
            replicas in this process.
    """
    if not model.jit_compile:
        return
    try:
        devices = model.distribute_strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: one device
        return
    if len(devices) > 1:
        raise ValueError(
            "Invalid value for argument `jit_compile`. Received: "
            f"jit_compile={model.jit_compile!r} under a strategy with "
            f"{len(devices)} replicas in this process "
            f"({', '.join(devices)}). XLA compiles a step for one device, "
            "so it needs one replica per process: compile with "
            '`jit_compile=False` (or "auto", which picks it).'
        )


def numeric_check(loss, squares=None):
    """Whether the loss and the gradients are finite.

    The gradients are checked through their squared norms
    (`keras_slim.gradients.squared_norms`, which the clip reuses): their
    sum is finite exactly when every gradient is, up to float32's range (a
    global norm beyond about 1.8e19 counts as not finite).

    Args:
        loss: The scalar loss, summed across replicas.
        squares: The float32 vector of the gradients' squared norms, or
            `None` to check the loss only. Defaults to `None`.

    Returns:
        `(finite, error)`: a scalar boolean tensor, and the data of the
        assertion that reports a failure (`NONFINITE`, the loss and, when
        checked, the squared global gradient norm).

    Example:
    ```python
    finite, error = numeric_check(total_loss, squared_norms(grads))
    ```
    """
    finite = keras.ops.isfinite(loss)
    if squares is None:
        return finite, [NONFINITE, loss]
    total = keras.ops.sum(squares)
    finite = keras.ops.logical_and(finite, keras.ops.isfinite(total))
    return finite, [NONFINITE, loss, total]


def verdict(finite, error):
    """A deferred check's verdict: `[finite, loss, squared norm]`, float32.

    Args:
        finite: The scalar boolean of `numeric_check`.
        error: The assertion data of `numeric_check`.

    Returns:
        A float32 vector: 1.0 or 0.0, then the data of `error` after its
        message (the loss, and the squared gradient norm when checked).
    """
    values = [keras.ops.cast(finite, "float32")]
    values += [keras.ops.cast(v, "float32") for v in error[1:]]
    return keras.ops.stack(values)


def idle_verdict():
    """The verdict of an update that applies nothing (a micro-step)."""
    # `verdict`'s [finite, loss, squared norm] of a good step.
    return keras.ops.convert_to_tensor([1.0, 0.0, 0.0])


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
    import tensorflow as tf  # TensorFlow's step only

    logs = dict(logs)
    finite, *data = tf.unstack(logs.pop(VERDICT))
    check = assert_op(finite > 0, [NONFINITE, *data])
    with tf.control_dependencies([check]):
        return tf.nest.map_structure(tf.identity, logs)


def assert_op(condition, data):
    """The raw `Assert` op (`tf.debugging.Assert` wraps itself in a `cond`
    in graphs)."""
    import tensorflow as tf  # TensorFlow's step only

    return tf.raw_ops.Assert(
        condition=condition,
        data=data,
        summarize=len(data),
        name="check_numerics",
    )


class Gate:
    """The numeric check: fail, skip, or return the verdict under XLA.

    Args:
        raises: Whether a non-finite update fails (else it is skipped).
        deferred: Whether the step is XLA-compiled: the verdict is
            returned and asserted outside.
        skipped: The `SkippedSteps` a skipped update is recorded in, or
            `None`.
        loss_scaled: Whether a dynamic loss scale runs (a finite loss with
            a non-finite gradient is then an overflow, the LossScale
            stage's, not a failure).
        optimizer_steps: The Apply stage's `OptimizerSteps`: advances and
            reads the optimizer's step count on a skipped update.

    Example:
    ```python
    gate = Gate(raises=True, deferred=False, skipped=None,
                loss_scaled=False, optimizer_steps=apply.steps)
    ```
    """

    name = "gate"

    def __init__(
        self, *, raises, deferred, skipped, loss_scaled, optimizer_steps
    ):
        self.raises = raises
        self.deferred = deferred
        self.skipped = skipped
        self.loss_scaled = loss_scaled
        self._steps = optimizer_steps

    def describe(self):
        """One line: what a non-finite update does."""
        if not self.raises:
            what = "a non-finite loss or gradient skips the step"
        elif self.deferred:
            what = "a non-finite loss or gradient fails the step (after XLA)"
        else:
            what = "a non-finite loss or gradient fails the step"
        return f"{self.name:<12}{what}"

    def update(self, step, then):
        """Checks the update, then runs the rest of the plan with its
        verdict.

        Args:
            step: The `Update`.
            then: The rest of the plan.

        Returns:
            An `Outcome`: the deferred verdict (under XLA), and what the
            loss tracker counts as finite.
        """
        squares = None
        present = [g for g in step.grads if g is not None]
        if present:
            squares = gradients_lib.squared_norms(present)
        finite, error = numeric_check(step.loss, squares)
        loss_finite = None
        if self.loss_scaled:
            loss_finite = keras.ops.isfinite(step.loss)
        checked = finite if loss_finite is None else loss_finite
        deferred = None
        if self.raises and self.deferred:
            deferred = verdict(checked, error)
        then(
            step.replace(
                finite=finite,
                checked=checked,
                error=error if self.raises and not self.deferred else None,
                squares=squares,
                loss_finite=loss_finite,
                gate=self,
            )
        )
        return step.outcome(verdict=deferred, finite=checked)

    def skip(self, counters=()):
        """The branch of a non-finite update that does not fail: nothing
        when the update fails (it is not a step), else the step count
        advances and the step is recorded.

        Args:
            counters: More `SkippedSteps` to record the step in (the loss
                scale's overflows).
        """
        if self.raises:
            return  # the step fails: it is not a step
        self.record_skip(counters)

    def record_skip(self, counters=()):
        """Advances the step count; records the step in the skipped
        steps and in `counters`."""
        self._steps.advance()
        for counter in (self.skipped, *counters):
            if counter is not None:
                counter.record(self._steps.read())
