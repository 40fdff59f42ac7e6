"""Rollback on divergence: back to the last checkpoint, past the bad batch."""

import logging

from keras_slim._fit import position as position_lib

logger = logging.getLogger("keras_slim")


class Rollback:
    """The rollbacks left to one `fit`, and how to do one.

    Args:
        model: The fitted model.
        position: The run's `InputPosition` (`keras_slim/_fit/
            position.py`).
        budget: How many rollbacks the `fit` may do.
        latest: A function of no argument returning the newest checkpoint
            to roll back to, or `None`.
        restore: A function of a checkpoint path that restores it with
            this worker's input position of its step (and the metrics'
            state of that step).

    Example:
    ```python
    run.rollback = Rollback(  # by NanLossGuard(rollback=2)
        model,
        run.position,
        budget=2,
        latest=lambda: saver.latest_checkpoint,
        restore=saver.restore_with_position,
    )
    ```
    """

    def __init__(self, model, position, *, budget, latest, restore):
        self._model = model
        self._position = position
        self._latest = latest
        self._restore = restore
        self.budget = budget
        self.done = []

    def takes(self, error):
        """Whether this rollback handles `error` (a non-finite step that
        changed nothing, with rollbacks left and a checkpoint to go to)."""
        if error.applied or len(self.done) >= self.budget:
            return False
        path = self._latest()
        if path is None:
            return False
        # The replay reads on in the current pass: a checkpoint of an
        # earlier epoch is not rolled back to.
        saved = position_lib.saved(path)
        return saved is not None and saved.epoch == self._position.epoch

    def roll_back(self, call, iterator, error):
        """Rolls back to the last checkpoint, replays to the step before
        `error`'s, drops the batch that diverged and runs the call's step.

        Args:
            call: The train function's call on Keras's `iterator` (one
                step).
            iterator: The iterator Keras handed the train function.
            error: The `NanLossDuringTrainingError` of the step.

        Returns:
            The logs of the call's step.

        Raises:
            NanLossDuringTrainingError: for a step of the replay that is
                not finite (the replay did not give the same steps).
        """
        model = self._model
        position = self._position
        failed = error.step
        path = self._latest()
        self.done.append(failed)
        logger.warning(
            "Non-finite %s at global step %d (epoch %d, batch %d of the "
            "epoch): rolling back to %s with its input position, replaying "
            "to step %d and skipping that batch (rollback %d of %d).",
            error.cause,
            failed,
            position.epoch,
            position.step,
            path,
            failed - 1,
            len(self.done),
            self.budget,
        )
        self._restore(path)
        while int(model.optimizer.iterations.numpy()) < failed - 1:
            call(iterator)
        position.drop_batch()
        return call(iterator)
