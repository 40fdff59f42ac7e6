"""`NanLossGuard`: stop, or go on, when the loss is not finite."""

import logging
import math
import time

from keras_slim import _backend
from keras_slim import checks
from keras_slim._fit.rollback import Rollback
from keras_slim.callbacks._run_callback import RunCallback
from keras_slim.errors import NanLossDuringTrainingError
from keras_slim.model import SlimModel

logger = logging.getLogger("keras_slim")


def check_arguments(fail, rollback):
    """`NanLossGuard`'s arguments, checked.

    Args:
        fail: A boolean.
        rollback: A non-negative integer, 0 unless `fail`.

    Returns:
        `(fail, rollback)`.

    Raises:
        ValueError: naming the value that does not fit.
    """
    fail = checks.boolean("fail", fail)
    rollback = checks.non_negative_int("rollback", rollback)
    if rollback and not fail:
        raise ValueError(
            "`rollback` rolls back instead of failing: it needs "
            f"fail=True. Received: fail=False, rollback={rollback!r}"
        )
    return fail, rollback


def log_overflows(count, first, last, scale):
    """Logs (INFO) the steps skipped so far for a float16 loss-scale
    overflow.

    Args:
        count: How many.
        first: The first one's global step.
        last: The last one's global step.
        scale: The loss scale now.
    """
    logger.info(
        "%d step%s skipped so far for a float16 loss-scale overflow "
        "(first at global step %d, last at %d): no variable changed "
        "at those steps but the loss scale, now %g; the global step "
        "advanced and training goes on.",
        count,
        "" if count == 1 else "s",
        first,
        last,
        scale,
    )


def log_skipped(count, first, last, overflow_count):
    """Warns about the steps skipped so far for a non-finite loss or
    gradient (`fail=False`).

    Args:
        count: How many, overflows included.
        first: The first one's global step.
        last: The last one's global step.
        overflow_count: How many of them were loss-scale overflows, or
            `None` without a loss scale.
    """
    of_them = ""
    if overflow_count is not None:
        of_them = f", {overflow_count} of them float16 loss-scale overflows"
    logger.warning(
        "%d step%s skipped so far%s: loss or gradient not finite "
        "(first at global step %d, last at %d). No variable changed at "
        "those steps; the global step advanced and training goes on "
        "(fail=False).",
        count,
        "" if count == 1 else "s",
        of_them,
        first,
        last,
    )


class NanLossGuard(RunCallback):
    """Stops training, or goes on, when the loss or gradient is not finite.

    contrib.learn's `NanLossDuringTrainingError` monitor for `model.fit`, on
    any model:

    - `fail=True`: a non-finite loss stops training with
      `keras_slim.NanLossDuringTrainingError`, naming the global step and
      the loss. A `SlimModel` whose policy checks numerics checks the loss
      and the global norm of the summed gradients in the step itself and
      raises before any variable changed (the error's `cause` says which
      was not finite); for other models the guard reads the loss Keras
      already brings to the host after every batch (no extra device sync),
      after Keras applied the step (`applied=True`).
    - `fail=False`: training goes on. On a `SlimModel` the step's check
      skips the update but the step still counts: the global step
      advances, so `number_of_steps`, `StopAtStep` and every interval stay
      exact, and the skipped step's loss is logged as `nan`, not counted
      in the reported mean. The guard warns at the first skipped step and
      then at most once a minute, and at the end, with the count, the first
      and the last skipped step. Other models apply the step as Keras
      does, and the guard logs one warning per epoch.

    - `rollback=n` (with `fail=True`, on a `SlimModel`, with a
      `keras_slim.callbacks.Checkpoints` in the same `fit`): a non-finite
      loss or gradient restores the last checkpoint with its input
      position, replays the steps from there to the one before, skips the
      batch that diverged (a warning names its global step and its place
      in the epoch) and goes on, at most `n` times per `fit`; the next
      one stops training as `fail=True` does. The run then ends as a run
      on the same data without those batches. The steps run one per call,
      and the checkpoint rolled back to must be of the current epoch
      (with `repeat()`ed data, as TF-Slim read it, there is one); else the
      error stops training.

    Under a loss scale (`mixed_float16`'s `LossScaleOptimizer`), a
    `SlimModel` step whose summed gradient overflows under a finite loss
    is skipped and the scale halved, whatever `fail` says: the guard logs
    those overflows at INFO (at the first, then at most once a minute, and
    at the end, with the scale), and with `fail=False` counts them among
    the skipped steps.

    `keras_slim.callbacks.Checkpoints` never writes a state with a
    non-finite variable, nor, for a model without the step's check, a
    state after a non-finite loss was applied, whatever the order of the
    callbacks.

    Args:
        fail: Whether a non-finite loss stops training.
            Defaults to `True`.
        rollback: Non-negative integer: how many times a `fit` rolls back
            to its last checkpoint past a batch that diverged.
            Defaults to `0`.

    Raises:
        ValueError: if `fail` is not a boolean, or `rollback` not a
            non-negative integer, or positive with `fail=False`. Before
            the first step, for `rollback` on a model that is not a
            `SlimModel`, under `ParameterServerStrategy`, or in a `fit`
            without `Checkpoints`.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    model.fit(x, y, callbacks=[keras_slim.callbacks.NanLossGuard()])
    saver = keras_slim.callbacks.Checkpoints("/tmp/run", every_n_steps=100)
    guard = keras_slim.callbacks.NanLossGuard(rollback=3)
    model.fit(data, epochs=1, steps_per_epoch=10_000, callbacks=[saver, guard])
    ```
    """

    #: Seconds between two warnings about skipped steps.
    WARN_EVERY_SECS = 60.0

    def __init__(self, fail=True, *, rollback=0, clock=None):
        _backend.require_tensorflow(
            "keras_slim.callbacks.NanLossGuard",
            "keras.callbacks.TerminateOnNaN",
        )
        super().__init__()
        self.fail, self.rollback = check_arguments(fail, rollback)
        self._clock = clock or time.monotonic

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._reported = 0
        self._warned_at = None
        self._overflows_reported = 0
        self._overflows_logged_at = None
        self._checked = not self.rollback
        if self.rollback:
            if not isinstance(self.model, SlimModel):
                raise ValueError(
                    f"NanLossGuard(rollback={self.rollback}) needs a "
                    "keras_slim.SlimModel (whose step changes nothing when "
                    f"it is not finite); got a {type(self.model).__name__}."
                )
            if self._run.mode.needs_coordinator:
                raise ValueError(
                    f"NanLossGuard(rollback={self.rollback}) cannot roll "
                    "back asynchronous steps over parameter servers (other "
                    "workers' steps are in flight); use rollback=0."
                )
            if not self.model.gradient_policy.check_numerics:
                raise ValueError(
                    f"NanLossGuard(rollback={self.rollback}) rolls back a "
                    "step the SlimModel's check found not finite, before "
                    "it changed anything; this model's GradientPolicy has "
                    "check_numerics=False. Use check_numerics=True."
                )

    def on_train_batch_begin(self, batch, logs=None):
        if self._checked:
            return
        # After every callback's on_train_begin: Checkpoints has said so.
        self._checked = True
        if self.model.steps_per_execution != 1:
            raise ValueError(
                f"NanLossGuard(rollback={self.rollback}) needs one step per "
                "call (a failing step is then a call of its own): compile "
                "with steps_per_execution='auto' or 1. Received: "
                f"steps_per_execution={self.model.steps_per_execution!r}"
            )
        saver = self._run.checkpoints
        if saver is None:
            raise ValueError(
                f"NanLossGuard(rollback={self.rollback}) rolls back to the "
                "last checkpoint: add a keras_slim.callbacks.Checkpoints "
                "callback to the same fit."
            )
        self._run.rollback = Rollback(
            self.model,
            self._run.position,
            budget=self.rollback,
            latest=lambda: saver.latest_checkpoint,
            restore=saver.restore_with_position,
        )

    def on_epoch_begin(self, epoch, logs=None):
        self._warned = False

    def step_multiples(self, model):
        """Any steps per call: a `SlimModel` checks each step in the graph.

        Args:
            model: The model about to be fitted.

        Returns:
            `[]`, or `[1]` for a model without that check, or with
            rollbacks (a failing step is then a call of its own).
        """
        if self.rollback or not isinstance(model, SlimModel):
            return [1]
        return []

    def step_options(self, model):
        """A `SlimModel` gates its update on a finite loss: the step
        raises, or skips the update (`fail`).

        Args:
            model: The model about to be fitted.

        Returns:
            `{"raise_on_nonfinite": fail}`.
        """
        del model
        return {"raise_on_nonfinite": self.fail}

    def _skipped_steps(self):
        """The run's `SkippedSteps`, while its step skips non-finite
        steps; else `None`."""
        options = self._run.step_options
        return None if options is None else options.skipped_steps

    def on_train_batch_end(self, batch, logs=None):
        self._report_overflows(final=False)
        skipped = self._skipped_steps()
        if skipped is not None:
            self._report_skipped(skipped, final=False)
            return
        unchecked = self._unchecked()
        if unchecked is False:
            return  # the step checks itself: it raised, or was skipped
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(loss):
            return
        step = self._run.global_step()
        if self.fail:
            raise NanLossDuringTrainingError(
                step, loss, applied=True, unchecked=unchecked
            )
        if not self._warned:
            logger.warning(
                "NaN loss during training: loss = %s at global step %d; "
                "the step was applied (the model has no update gate: a "
                "keras_slim.SlimModel skips such steps) and training goes "
                "on (fail=False). No checkpoint is written while this "
                "epoch's loss is not finite.",
                loss,
                step,
            )
            self._warned = True

    def _unchecked(self):
        """`False` when the model's step checks numerics itself (a
        `SlimModel` whose policy does); else why it does not, for the
        error (`None`: not a `SlimModel`)."""
        if not isinstance(self.model, SlimModel):
            return None
        if self.model.gradient_policy.check_numerics:
            return False
        return (
            "its GradientPolicy has check_numerics=False: the step does "
            "not check its loss and gradients before the update"
        )

    def on_train_end(self, logs=None):
        self._report_overflows(final=True)
        skipped = self._skipped_steps()
        if skipped is not None:
            self._report_skipped(skipped, final=True)

    def _due(self, final, logged_at):
        return (
            final
            or logged_at is None
            or self._clock() - logged_at >= self.WARN_EVERY_SECS
        )

    def _overflow_steps(self):
        """The run's count of loss-scale overflows, or `None` (no
        `LossScaleOptimizer`, or not a `SlimModel`)."""
        options = self._run.step_options
        return None if options is None else options.overflow_steps

    def _report_overflows(self, final):
        """Logs (INFO) the steps skipped for a loss-scale overflow, at the
        first, then at most once per `WARN_EVERY_SECS`, and at the end."""
        overflows = self._overflow_steps()
        if overflows is None:
            return
        count, first, last = overflows.read()
        if count <= self._overflows_reported:
            return
        if not self._due(final, self._overflows_logged_at):
            return
        log_overflows(
            count,
            first,
            last,
            float(self.model.optimizer.dynamic_scale.numpy()),
        )
        self._overflows_reported = count
        self._overflows_logged_at = self._clock()

    def _report_skipped(self, skipped, final):
        """Warns about steps skipped for a non-finite loss or gradient
        (overflows aside): at the first, then at most once per
        `WARN_EVERY_SECS`, and at the end if some were not reported."""
        count, first, last = skipped.read()
        overflows = self._overflow_steps()
        overflow_count = overflows.read()[0] if overflows is not None else 0
        if count - overflow_count <= self._reported:
            return
        if not self._due(final, self._warned_at):
            return
        log_skipped(
            count,
            first,
            last,
            overflow_count if overflows is not None else None,
        )
        self._reported = count - overflow_count
        self._warned_at = self._clock()
