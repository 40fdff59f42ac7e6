"""`LogEveryNSteps`: TF-Slim's `global step N: loss = ...` line."""

import logging
import time

from keras_slim import _validation
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.callbacks._steps import StepCallback
from keras_slim.callbacks._steps import StepLoss

logger = logging.getLogger("keras_slim")


class LogEveryNSteps(StepCallback):
    """Logs the loss of the step at global steps that are multiples of n.

    Through the `logging` logger named `keras_slim`, at level INFO, in
    TF-Slim's format plus the throughput (as inception's trainer logged it):

    ```text
    global step 100: loss = 0.2391 (0.004 sec/step), 16000.0 examples/sec
    ```

    The loss is that of the step itself, read from the model's loss tracker
    around that step, not the running mean of the epoch that Keras puts in
    `logs`; it is brought to the host only on the steps that log. The
    examples/sec part appears when the model reports its loss through a
    loss tracker (the built-in train step and `SlimModel` do), which also
    counts the batch's examples. `sec/step` is the wall time since the last
    line, divided by the steps run since. With `steps_per_execution > 1`,
    a line is logged at the first execution boundary at or past each
    multiple of n, and its loss is the mean over that execution's steps.
    Python's `logging` drops INFO lines unless configured, e.g.
    `logging.basicConfig(level=logging.INFO)`.

    Args:
        every_n_steps: Positive integer.

    Raises:
        ValueError: if `every_n_steps` is not a positive integer.

    Example:
    ```python
    logging.basicConfig(level=logging.INFO)
    model.fit(x, y, callbacks=[keras_slim.callbacks.LogEveryNSteps(100)])
    ```
    """

    def __init__(self, every_n_steps=100, *, clock=None):
        super().__init__()
        self.every_n_steps = _validation.positive_int(
            "every_n_steps", every_n_steps
        )
        self._clock = clock or time.monotonic

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._loss = StepLoss(self.model)
        self._trigger = IntervalTrigger(every_n_steps=self.every_n_steps)

    def on_first_batch(self, step):
        self._trigger.reset(step)
        self._last = (step, self._clock())

    def on_train_batch_begin(self, batch, logs=None):
        super().on_train_batch_begin(batch, logs)
        if self._trigger.would_fire(self.next_step):
            self._loss.mark()

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if not self._trigger(self.counter.step):
            return
        loss, examples = self._loss.since_mark()
        if loss is None:
            loss = (logs or {}).get("loss")
        if loss is None:
            return
        step = self.counter.sync()
        now = self._clock()
        steps = max(step - self._last[0], 1)
        sec_per_step = (now - self._last[1]) / steps
        self._last = (step, now)
        line = "global step %d: loss = %.4f (%.3f sec/step)"
        args = [step, loss, sec_per_step]
        if examples and sec_per_step > 0:
            per_step = examples / self.steps_in_batch(batch)
            line += ", %.1f examples/sec"
            args.append(per_step / sec_per_step)
        logger.info(line, *args)

    def step_multiples(self, model):
        return [self.every_n_steps]
