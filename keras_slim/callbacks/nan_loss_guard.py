"""`NanLossGuard`: stop, or go on, when the loss is not finite."""

import logging
import math

import keras

from keras_slim import _run
from keras_slim import _validation
from keras_slim.callbacks._steps import global_step
from keras_slim.errors import NanLossDuringTrainingError

logger = logging.getLogger("keras_slim")


class NanLossGuard(keras.callbacks.Callback):
    """Raises `NanLossDuringTrainingError` when the loss is NaN or infinite.

    contrib.learn's `NanLossDuringTrainingError` monitor for `model.fit`, on
    any model:

    - `fail=True`: a non-finite loss stops training with
      `keras_slim.NanLossDuringTrainingError`, naming the global step and
      the loss. A `SlimModel` whose policy checks numerics raises it from
      the step itself, before any variable changed; for other models the
      guard reads the loss Keras already brings to the host after every
      batch, so it costs no extra device sync.
    - `fail=False`: training goes on as if nothing happened. On a
      `SlimModel` the policy's numeric check then skips the step silently:
      no variable changes, the global step does not advance, and the
      step does not count in the reported loss. Other models apply the
      step as Keras does, and the guard logs one warning per epoch.

    `keras_slim.callbacks.Checkpoints` never writes a state with a
    non-finite variable, with or without this guard.

    Args:
        fail: Whether a non-finite loss stops training.
            Defaults to `True`.

    Raises:
        ValueError: if `fail` is not a boolean.

    Example:
    ```python
    model.fit(x, y, callbacks=[keras_slim.callbacks.NanLossGuard()])
    ```
    """

    def __init__(self, fail=True):
        super().__init__()
        self.fail = _validation.boolean("fail", fail)

    def on_train_begin(self, logs=None):
        # A SlimModel gates its update on a finite loss; the run tells its
        # train step whether to raise or to skip the step silently.
        _run.of(self.model, self.params).raise_on_nonfinite = self.fail

    def on_epoch_begin(self, epoch, logs=None):
        self._warned = False

    def step_multiples(self, model):
        """Any steps per call: a `SlimModel` checks each step in the graph.

        Args:
            model: The model about to be fitted.

        Returns:
            `[]`, or `[1]` for a model without that check.
        """
        return [] if _run.is_slim_model(model) else [1]

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(loss):
            return
        step = global_step(self.model)
        if self.fail:
            raise NanLossDuringTrainingError(step, loss)
        if not self._warned:
            logger.warning(
                "NaN loss during training: loss = %s at global step %d; "
                "training goes on (fail=False).",
                loss,
                step,
            )
            self._warned = True
