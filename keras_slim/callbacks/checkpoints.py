"""`Checkpoints`: save on intervals, restore the latest at train begin."""

import logging
import os
import shutil

import tensorflow as tf

from keras_slim import _validation
from keras_slim import checkpoints as checkpoints_lib
from keras_slim.callbacks._files import check_writable
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.callbacks.step_callback import StepCallback

logger = logging.getLogger("keras_slim")


def _worker_directory(directory, strategy):
    """Where a non-chief worker writes (then deletes): a sibling of the
    chief's directory, so that neither's files or cleanup meet."""
    task_id = getattr(getattr(strategy, "cluster_resolver", None), "task_id", 0)
    return os.path.normpath(directory) + f"_workertemp_{task_id}"


class Checkpoints(StepCallback):
    """Saves the training state on intervals and resumes from the latest.

    TF-Slim's `Supervisor` services for `model.fit`, on
    `tf.train.Checkpoint` and `tf.train.CheckpointManager`:

    - saves the model's variables and the optimizer's (slots, the global
      step `iterations`) as `model.ckpt-<global step>` in `directory`, so
      `tf.train.latest_checkpoint(directory)` finds the newest, every
      `every_n_secs` seconds and/or `every_n_steps` steps, and once more
      when training ends;
    - at train begin, restores the newest checkpoint of `directory`, so a
      rerun continues where the last one stopped. A newest checkpoint that
      cannot be read (truncated) is skipped, with a warning, for the one
      before it;
    - never writes a state with a non-finite variable: a step whose loss
      was not finite and was applied leaves no checkpoint behind;
    - only the chief writes. Other workers of a `MultiWorkerMirroredStrategy`
      save into a sibling temporary directory (`<directory>_workertemp_<task
      id>`) that is deleted at once, the pattern of TensorFlow's
      multi-worker tutorial for savers that every worker must run.

    The directory is created and test-written when training begins, before
    the first step. Keras's own `epochs` count starts again on a rerun: use
    `keras_slim.callbacks.StopAtStep(last_step=...)` or `keras_slim.train`
    to train up to a global step. With `steps_per_execution > 1` a save
    happens at the first execution boundary at or past its interval.

    Args:
        directory: Path of the checkpoint directory (created if needed).
        every_n_secs: Positive number or `None`: save when this many
            seconds passed since the last save.
            Defaults to `600`.
        every_n_steps: Positive integer or `None`: save at global steps that
            are multiples of it.
            Defaults to `None`.
        max_to_keep: Positive integer or `None` (keep all): how many recent
            checkpoints to keep.
            Defaults to `5`.
        keep_checkpoint_every_n_hours: Positive number or `None`: also keep
            one checkpoint per this many hours.
            Defaults to `None`.
        restore: Whether to restore the latest checkpoint at train begin.
            Defaults to `True`.

    Raises:
        ValueError: for an interval, `max_to_keep` or
            `keep_checkpoint_every_n_hours` that is not positive, or an
            empty `directory`. At train begin, for a directory that cannot
            be created or written.

    Example:
    ```python
    saver = keras_slim.callbacks.Checkpoints("/tmp/run", every_n_steps=500)
    model.fit(dataset, epochs=10, callbacks=[saver])
    ```
    """

    def __init__(
        self,
        directory,
        *,
        every_n_secs=600,
        every_n_steps=None,
        max_to_keep=5,
        keep_checkpoint_every_n_hours=None,
        restore=True,
    ):
        super().__init__()
        self.directory = _validation.path("directory", directory)
        self._trigger = IntervalTrigger(
            every_n_steps=every_n_steps, every_n_secs=every_n_secs
        )
        self.max_to_keep = _validation.positive_int_or_none(
            "max_to_keep", max_to_keep
        )
        self.keep_checkpoint_every_n_hours = (
            _validation.positive_number_or_none(
                "keep_checkpoint_every_n_hours", keep_checkpoint_every_n_hours
            )
        )
        self.restore = _validation.boolean("restore", restore)
        self.restored_path = None
        self._manager = None

    def step_multiples(self, model):
        # The step of the checkpoint a restore will start from, too, so
        # that StopAtStep's target stays a call boundary after it.
        multiples = []
        if self._trigger.every_n_steps:
            multiples.append(self._trigger.every_n_steps)
        latest = self.restore and tf.train.latest_checkpoint(self.directory)
        if latest:
            step = int(latest.rsplit("-", 1)[1])
            if step > 0:
                multiples.append(step)
        return multiples

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        strategy = self.model.distribute_strategy
        self._chief = self.run.is_chief
        write_dir = (
            self.directory
            if self._chief
            else _worker_directory(self.directory, strategy)
        )
        check_writable(
            "directory",
            self.directory if self._chief else write_dir,
            what="checkpoints",
            create=True,
        )
        self._checkpoint = checkpoints_lib.training_checkpoint(self.model)
        self._manager = self._make_manager(self.directory)
        self._write_manager = (
            self._manager if self._chief else self._make_manager(write_dir)
        )
        if self.restore:
            self.restored_path = checkpoints_lib.restore_latest(
                self._checkpoint, self._manager
            )
            if self.restored_path:
                logger.info("Restored %s", self.restored_path)
        self.run.resumed_from = self.restored_path
        step = self.counter.sync()
        self._trigger.reset(step)
        self._saved_step = step if self.restored_path else None

    def _make_manager(self, directory):
        return tf.train.CheckpointManager(
            self._checkpoint,
            directory,
            max_to_keep=self.max_to_keep,
            keep_checkpoint_every_n_hours=self.keep_checkpoint_every_n_hours,
            checkpoint_name=checkpoints_lib.CHECKPOINT_NAME,
        )

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self._trigger.enabled and self._trigger(self.counter.step):
            self.save()

    def on_train_end(self, logs=None):
        # The resume concerns this fit only (WarmStart reads it).
        self.run.resumed_from = None
        if self.counter.sync() != self._saved_step:
            self.save()

    def save(self):
        """Saves the training state now, unless a variable is not finite.

        Returns:
            The path written, or `None` when nothing was written (a
            non-finite state, or a worker that is not the chief).
        """
        step = self.counter.sync()
        if not checkpoints_lib.all_finite(self.model):
            logger.warning(
                "Not saving a checkpoint at global step %d: a variable is "
                "not finite.",
                step,
            )
            return None
        path = self._write_manager.save(checkpoint_number=step)
        self._saved_step = step
        if not self._chief:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            return None
        logger.info("Saved checkpoint %s", path)
        return path
