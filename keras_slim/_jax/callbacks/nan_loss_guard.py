"""`NanLossGuard` on JAX: fail, skip, or roll back past a batch whose
loss or gradient is not finite."""

import logging
import math
import time

from keras_slim._jax import step as step_lib
from keras_slim._jax import train_function
from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks import nan_loss_guard

logger = logging.getLogger("keras_slim")


class NanLossGuard(RunCallback):
    """Stops training, or goes on, when the loss or gradient is not finite.

    `keras_slim.callbacks.NanLossGuard` on JAX, with its arguments. The
    `SlimModel`'s step checks the loss and the global norm of the
    gradient itself, and a failing update changes nothing:

    - `fail=True`: `keras_slim.NanLossDuringTrainingError` stops training,
      naming the global step and the loss; the model holds the weights
      from before that step.
    - `fail=False`: the update is skipped, the global step advances; the
      guard warns at the first skipped step, then at most once a minute,
      and at the end, with the count, the first and the last skipped
      step (read from the step's counters when they are ready: the host
      never waits for them during the epoch).
    - `rollback=n` (with `fail=True`): a failing step is passed over and
      training goes on, at most `n` times per `fit`; the next one stops
      training as `fail=True` does. The run ends as a run on the same data
      without those batches, exactly. On JAX the failing step changed
      nothing, so the state to go back to is the one in memory, right
      before it: no checkpoint is read (on TensorFlow the rollback reads
      the last checkpoint and replays the steps since), and none is
      needed. The verdict is then read after every call (one host wait a
      step), and the steps run one per call.

    Under a loss scale (`mixed_float16`), a step whose gradient overflows
    under a finite loss is skipped and the scale halved, whatever `fail`
    says: logged at INFO, at the first, then at most once a minute, and
    at the end, with the scale.

    Args:
        fail: Whether a non-finite loss stops training.
            Defaults to `True`.
        rollback: Non-negative integer: how many times a `fit` goes on
            past a batch that diverged.
            Defaults to `0`.

    Raises:
        ValueError: if `fail` is not a boolean, `rollback` not a
            non-negative integer, or positive with `fail=False`; before the
            first step, for `rollback` with `steps_per_execution` other
            than 1, or a policy with `check_numerics=False`, or a model
            that is not a `keras_slim.SlimModel`.

    Example:
    ```python
    guard = keras_slim.callbacks.NanLossGuard(rollback=3)
    model.fit(x, y, epochs=10, callbacks=[guard])
    ```
    """

    #: Seconds between two warnings about skipped steps.
    WARN_EVERY_SECS = 60.0

    def __init__(self, fail=True, *, rollback=0, clock=None):
        super().__init__()
        self.fail, self.rollback = nan_loss_guard.check_arguments(
            fail, rollback
        )
        self._clock = clock or time.monotonic

    def step_options(self, model):
        """The step fails or skips a non-finite update, as `fail` says.

        Args:
            model: The model about to be fitted.

        Returns:
            `{"raise_on_nonfinite": fail}`.
        """
        del model
        return {"raise_on_nonfinite": self.fail}

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._reported = (0, 0)  # skipped (overflows aside), overflows
        self._logged_at = [None, None]
        self._next_read = -math.inf
        if not self.rollback:
            return
        model = self._model
        if model.steps_per_execution != 1:
            raise ValueError(
                f"NanLossGuard(rollback={self.rollback}) needs one step per "
                "call (a failing step is then a call of its own): compile "
                "with steps_per_execution=1. Received: "
                f"steps_per_execution={model.steps_per_execution!r}"
            )
        if not model.gradient_policy.check_numerics:
            raise ValueError(
                f"NanLossGuard(rollback={self.rollback}) passes over a step "
                "the SlimModel's check found not finite; this model's "
                "GradientPolicy has check_numerics=False. Use "
                "check_numerics=True."
            )
        self.run.rollbacks_left = self.rollback

    def after_call(self):
        # Skipped steps are read (one transfer) only if the call's step is
        # done, and at most every `READ_INTERVAL`, as the train function
        # reads the verdict: a warning may come a few calls late, never a
        # wait for the device.
        if self.fail:
            return
        counters = self._model.train_function.counters
        now = time.monotonic()
        if now >= self._next_read and counters.is_ready():
            self._next_read = now + train_function.READ_INTERVAL
            self._report(counters, final=False)

    def on_train_end(self, logs=None):
        if not self.fail:
            self._report(self._model.train_function.counters, final=True)

    def _report(self, counters, final):
        ints = step_lib.host_counters(counters)[0]
        count = int(ints[step_lib.SKIPPED])
        overflows = int(ints[step_lib.OVERFLOWS])
        first = int(ints[step_lib.FIRST_SKIPPED])
        last = int(ints[step_lib.LAST_SKIPPED])
        scaled = self.run.loss_scale() is not None
        if scaled and overflows > self._reported[1] and self._due(final, 1):
            nan_loss_guard.log_overflows(
                overflows, first, last, self.run.loss_scale()
            )
            self._reported = (self._reported[0], overflows)
        if count - overflows > self._reported[0] and self._due(final, 0):
            nan_loss_guard.log_skipped(
                count, first, last, overflows if scaled else None
            )
            self._reported = (count - overflows, self._reported[1])

    def _due(self, final, which):
        now = self._clock()
        logged = self._logged_at[which]
        if final or logged is None or now - logged >= self.WARN_EVERY_SECS:
            self._logged_at[which] = now
            return True
        return False
