"""`KeepBest`: keras-slim-train's `--keep_best`, evaluating each save."""

import logging

from keras_slim import training_state
from keras_slim.callbacks import StepCallback
from keras_slim.image import _task
from keras_slim.image import evaluation

_LOG = logging.getLogger("keras_slim")


class KeepBest(StepCallback):
    """Evaluates each checkpoint the chief saves, keeps the best.

    Placed after `Checkpoints` (as `keras_slim.train` places the callbacks
    it is given), it sees each save at the same batch end (and the last,
    at train end). The checkpoint file is restored into a network of its
    own, as `keras-slim-eval` restores it (with the moving averages when
    the checkpoint holds them), so the training weights are never touched
    and training goes on exactly as without it. The checkpoint a run
    resumes from is not evaluated again.

    Args:
        keeper: The `_best_checkpoint.BestCheckpoint` of the train dir.
        network: A network built as the trained one, for the evaluation.
        task: The held-out split's `_task.Task`.

    Example:
    ```python
    keep = KeepBest(BestCheckpoint.open(train_dir), network=net, task=task)
    keras_slim.train(model, data, train_dir, callbacks=[keep])
    ```
    """

    def __init__(self, keeper, *, network, task):
        super().__init__()
        self.keeper = keeper
        self.network = network
        self.evaluator = evaluation.Evaluator(network)
        self.task = task
        self._seen = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._seen = self.run.latest_checkpoint

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self._check()

    def on_train_end(self, logs=None):
        self._check()

    def _check(self):
        path = self.run.latest_checkpoint
        if path is None or path == self._seen or not self.run.is_chief:
            return
        self._seen = path
        step, _ = training_state.restore_for_inference(self.network, path)
        with _task.images_named(self.task):
            results = self.evaluator(self.task.make_dataset(None))
        _LOG.info(
            "held-out | global step: %d | %s: %.4f",
            step,
            self.keeper.metric,
            results[self.keeper.metric],
        )
        self.keeper.consider(path, step=step, results=results)
