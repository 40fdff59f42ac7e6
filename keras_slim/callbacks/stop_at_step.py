"""`StopAtStep`: stop training at a global step (contrib.learn semantics)."""

from keras_slim import _backend
from keras_slim import checks
from keras_slim.callbacks.step_callback import StepCallback


def check_target(num_steps, last_step):
    """`StopAtStep`'s arguments, checked (one of them set, valid).

    Args:
        num_steps: Positive integer or `None`.
        last_step: Non-negative integer or `None`.

    Returns:
        `(num_steps, last_step)`, as ints or `None`.

    Raises:
        ValueError: unless exactly one is set, and valid.
    """
    if (num_steps is None) == (last_step is None):
        raise ValueError(
            "Exactly one of `num_steps` and `last_step` must be set. "
            f"Received: num_steps={num_steps!r}, last_step={last_step!r}"
        )
    if num_steps is not None:
        num_steps = checks.positive_int("num_steps", num_steps)
    if last_step is not None:
        if not checks.is_int(last_step) or last_step < 0:
            raise checks.invalid(
                "last_step", last_step, "a non-negative integer"
            )
        last_step = int(last_step)
    return num_steps, last_step


class StopAtStep(StepCallback):
    """Stops `fit` after a number of steps or at a global step.

    contrib.learn's `StopAtStepHook`:

    - `num_steps`: run that many more steps in this `fit` call; two calls of
      `num_steps=100` give 200 steps;
    - `last_step`: stop when the global step (`optimizer.iterations`)
      reaches it; a second call runs no step at all.

    The target is computed when the first batch begins, after every
    callback's `on_train_begin` (so after `Checkpoints` restored a run). The
    global step is counted on the host and read from the optimizer only
    when the count reaches the target. With `steps_per_execution > 1`,
    training stops at the first execution boundary at or past the target.
    When the target is already reached, the `fit` call runs no step and
    its epoch logs are empty; list `StopAtStep` before `Summaries` and
    `Trace` (as `keras_slim.train` does) so that they see that its one
    batch runs no step, and write nothing for it.

    Args:
        num_steps: Positive integer: steps to run in this call.
            Defaults to `None`.
        last_step: Non-negative integer: the global step to stop at.
            Defaults to `None`.

    Raises:
        ValueError: unless exactly one of `num_steps` and `last_step` is
            given, or if the one given is not a valid integer.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    model.fit(dataset, epochs=1000, callbacks=[StopAtStep(last_step=5000)])
    ```
    """

    def __init__(self, num_steps=None, last_step=None):
        _backend.require_tensorflow(
            "keras_slim.callbacks.StopAtStep",
            "fit's epochs and steps_per_epoch",
        )
        super().__init__()
        self.num_steps, self.last_step = check_target(num_steps, last_step)

    def step_multiples(self, model):
        if self.num_steps:
            return [self.num_steps]
        start = (
            int(model.optimizer.iterations.numpy()) if model.optimizer else 0
        )
        return [v for v in (self.last_step, start) if v > 0]

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.target = None
        self._at_target_already = False

    def on_first_batch(self, step):
        self.target = (
            step + self.num_steps if self.num_steps else self.last_step
        )
        if step >= self.target:
            self._at_target_already = True
            self._run.no_step = True
            self.model.stop_training = True

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self._at_target_already:
            return
        # The count may run ahead of the optimizer (a skipped step): read it.
        if (
            self.counter.step >= self.target
            and self.counter.sync() >= self.target
        ):
            self.model.stop_training = True
