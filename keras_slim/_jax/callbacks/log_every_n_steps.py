"""`LogEveryNSteps` on JAX: TF-Slim's `global step N: loss = ...` line."""

import time

import numpy as np

from keras_slim import checks
from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks import log_every_n_steps
from keras_slim.callbacks._interval import IntervalTrigger


class LogEveryNSteps(RunCallback):
    """Logs the loss of the step at global steps that are multiples of n.

    `keras_slim.callbacks.LogEveryNSteps` on JAX: the same line, through
    the `logging` logger named `keras_slim` at level INFO,

    ```text
    global step 100: loss = 0.2391 (0.004 sec/step), 16000.0 examples/sec
    ```

    The loss is that of the call of the train function that reached the
    step, read from the model's loss tracker before and after it, not the
    running mean of the epoch that Keras puts in `logs`; with the default
    `steps_per_execution=1` that is the step's own loss. Under gradient
    accumulation a global step is an update, its loss the mean over its
    micro-batches. The host never waits for a step to log it: the
    tracker's two numbers are copied on the device around the call, and
    the line is logged at a later call once they are computed (a call or
    so late where the device runs behind the host), and at the end of
    `fit` at the latest, however it ends. `sec/step` is timed on the
    host, at the calls that log.

    Args:
        every_n_steps: Positive integer.
            Defaults to `100`.

    Raises:
        ValueError: if `every_n_steps` is not a positive integer; at train
            begin, for a model that is not a `keras_slim.SlimModel`.

    Example:
    ```python
    logging.basicConfig(level=logging.INFO)
    model.fit(x, y, callbacks=[keras_slim.callbacks.LogEveryNSteps(100)])
    ```
    """

    def __init__(self, every_n_steps=100, *, clock=None):
        super().__init__()
        self.every_n_steps = checks.positive_int("every_n_steps", every_n_steps)
        self._clock = clock or time.monotonic

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._trigger = IntervalTrigger(every_n_steps=self.every_n_steps)
        self._last = None
        self._mark = None
        # (step, totals before, totals after, sec/step, steps): lines not
        # logged yet, their totals still being computed.
        self._pending = []
        self.run.at_end(lambda: self._log_ready(wait=True))

    def on_train_batch_begin(self, batch, logs=None):
        step = self.run.step
        if self._last is None:
            self._trigger.reset(step)
            self._last = (step, self._clock())
        # The step this call reaches at most: a mark only before a log.
        batches = self._model.steps_per_execution
        reach = (self.run.batches + batches) // self.run.per_step
        self._mark = (
            self.run.loss_totals(on_device=True)
            if self._trigger.would_fire(reach)
            else None
        )

    def after_call(self):
        if not self.run.no_step and self._mark is not None:
            step = self.run.step
            if self._trigger(step):
                self._hold(step)
        self._log_ready(wait=False)

    def _hold(self, step):
        """Keeps the line of `step` until its totals are computed."""
        now = self._clock()
        sec_per_step = (now - self._last[1]) / max(step - self._last[0], 1)
        self._last = (step, now)
        steps = max(self.run.batches_run / self.run.per_step, 1)
        after = self.run.loss_totals(on_device=True)
        self._pending.append((step, self._mark, after, sec_per_step, steps))

    def _log_ready(self, wait):
        """Logs the held lines, in order, whose totals are computed (all
        of them, waiting, with `wait`)."""
        while self._pending and (wait or self._pending[0][2].is_ready()):
            step, before, after, sec_per_step, steps = self._pending.pop(0)
            total, count = np.asarray(after, np.float64) - np.asarray(
                before, np.float64
            )
            loss = total / count if count else float("nan")
            log_every_n_steps.log_step(step, loss, sec_per_step, count / steps)
