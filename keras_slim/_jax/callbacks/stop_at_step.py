"""`StopAtStep` on JAX: stop at a global step, counted on the host."""

from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks import stop_at_step


class StopAtStep(RunCallback):
    """Stops `fit` after a number of steps or at a global step.

    `keras_slim.callbacks.StopAtStep` on JAX, with its arguments and
    semantics (contrib.learn's `StopAtStepHook`): `num_steps` more steps
    in this `fit`, or up to the global step `last_step`
    (`optimizer.iterations`). The target is computed when the first batch
    begins (after `Checkpoints` restored a run), and the train function
    stops at it exactly, whatever `steps_per_execution`. A `fit` already
    at its target runs no step and reads no batch.

    Args:
        num_steps: Positive integer: steps to run in this call.
            Defaults to `None`.
        last_step: Non-negative integer: the global step to stop at.
            Defaults to `None`.

    Raises:
        ValueError: unless exactly one of `num_steps` and `last_step` is
            given, or if the one given is not a valid integer; at train
            begin, for a model that is not a `keras_slim.SlimModel`.

    Example:
    ```python
    model.fit(x, y, epochs=1000, callbacks=[StopAtStep(last_step=5000)])
    ```
    """

    def __init__(self, num_steps=None, last_step=None):
        super().__init__()
        self.num_steps, self.last_step = stop_at_step.check_target(
            num_steps, last_step
        )
        self.target = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.target = None

    def on_train_batch_begin(self, batch, logs=None):
        if self.target is not None:
            return
        step = self.run.step
        self.target = (
            step + self.num_steps if self.num_steps else self.last_step
        )
        self.run.stop_at(self.target)
