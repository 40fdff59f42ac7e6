"""`LogEveryNSteps`: TF-Slim's `global step N: loss = ...` line."""

import logging
import time

from keras_slim import _backend
from keras_slim import checks
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.callbacks._step_loss import StepLoss
from keras_slim.callbacks._step_loss import records_step_losses
from keras_slim.callbacks.step_callback import StepCallback

logger = logging.getLogger("keras_slim")


def log_step(step, loss, sec_per_step, examples):
    """Logs TF-Slim's line of one step (with its examples/sec, if known).

    Args:
        step: The global step.
        loss: The step's loss.
        sec_per_step: Wall seconds per step since the last line.
        examples: The step's examples, or `None`.
    """
    line = "global step %d: loss = %.4f (%.3f sec/step)"
    args = [step, loss, sec_per_step]
    if examples and sec_per_step > 0:
        line += ", %.1f examples/sec"
        args.append(examples / sec_per_step)
    logger.info(line, *args)


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
    line, divided by the steps run since.

    With several steps per call of the train function: a `SlimModel`
    records each step's loss in the graph, so every multiple of n gets its
    line with the loss of that step, logged when the call ends (the lines
    of one call share its `sec/step`), and `steps_per_execution="auto"`
    needs no call to end on those steps. Other models log at the first
    call boundary at or past each multiple of n, with the mean loss over
    that call's steps. Under gradient accumulation (an optimizer with
    `gradient_accumulation_steps=k`, with a `SlimModel`) a global step is
    an update: its loss is the mean over its `k` micro-batches (one
    device's loss on the `k`-times batch), its examples theirs.
    Python's `logging` drops INFO lines unless configured, e.g.
    `logging.basicConfig(level=logging.INFO)`.

    Args:
        every_n_steps: Positive integer.
            Defaults to `100`.

    Raises:
        ValueError: if `every_n_steps` is not a positive integer.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    logging.basicConfig(level=logging.INFO)
    model.fit(x, y, callbacks=[keras_slim.callbacks.LogEveryNSteps(100)])
    ```
    """

    def __init__(self, every_n_steps=100, *, clock=None):
        _backend.require_tensorflow(
            "keras_slim.callbacks.LogEveryNSteps",
            "fit's progress bar (verbose=) or a keras.callbacks.LambdaCallback",
        )
        super().__init__()
        self.every_n_steps = checks.positive_int("every_n_steps", every_n_steps)
        self._clock = clock or time.monotonic

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._loss = StepLoss(self.model, self._run)
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
        if not self._trigger.would_fire(self.counter.step):
            return
        steps = self._loss.per_step()
        if steps is not None:
            self._log_each_step(steps)
            return
        self._trigger(self.counter.step)
        loss, examples = self._loss.since_mark()
        if loss is None:
            loss = (logs or {}).get("loss")
        if loss is None:
            return
        step = self.counter.sync()
        sec_per_step = self._sec_per_step(step)
        if examples and not self._loss.of_one_step:
            examples /= self.steps_in_batch(batch)
        self._log(step, loss, sec_per_step, examples)

    def _log_each_step(self, steps):
        """Logs the due steps of a call from its per-step losses."""
        end = self.counter.sync()
        sec_per_step = self._sec_per_step(end)
        for step, (loss, examples) in enumerate(steps, end - len(steps) + 1):
            if self._trigger(step):
                self._log(step, loss, sec_per_step, examples)

    def _sec_per_step(self, step):
        now = self._clock()
        steps = max(step - self._last[0], 1)
        sec_per_step = (now - self._last[1]) / steps
        self._last = (step, now)
        return sec_per_step

    def _log(self, step, loss, sec_per_step, examples):
        log_step(step, loss, sec_per_step, examples)

    def step_multiples(self, model):
        """The log interval, or any steps per call for a model recording
        each step's loss (a `SlimModel`).

        Args:
            model: The model about to be fitted.

        Returns:
            `[every_n_steps]`, or `[]`.
        """
        if records_step_losses(model):
            return []
        return [self.every_n_steps]
