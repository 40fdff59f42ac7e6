"""`Checkpoints`: save on intervals, restore the latest at train begin."""

import logging
import math
import os
import shutil

import numpy as np

from keras_slim import _backend
from keras_slim import _checkpoint_dir
from keras_slim import _keras_optimizer
from keras_slim import _stop_agreement
from keras_slim import checks
from keras_slim import training_state
from keras_slim._backend import tensorflow as tf
from keras_slim.callbacks import _resume
from keras_slim.callbacks import _worker_positions
from keras_slim.callbacks._files import check_writable
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.callbacks.step_callback import StepCallback
from keras_slim.errors import TrainingPreemptedError

logger = logging.getLogger("keras_slim")


def _worker_directory(directory, strategy):
    """Where a non-chief worker writes (then deletes): a sibling of the
    chief's directory, so that neither's files or cleanup meet."""
    task_id = getattr(getattr(strategy, "cluster_resolver", None), "task_id", 0)
    return os.path.normpath(directory) + f"_workertemp_{task_id}"


def _metrics(model):
    """The metrics' state (Keras's running loss among it), which a
    training checkpoint does not hold, as numpy values."""
    return [np.array(v.numpy()) for v in model.metrics_variables]


def _restore_metrics(model, values):
    for variable, value in zip(model.metrics_variables, values):
        variable.assign(value)


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
    - never writes a state with a non-finite variable, nor one after a
      step with a non-finite loss was applied (a model without
      keras_slim's gate: no save while Keras's loss of the epoch is not
      finite), whatever the order of the callbacks;
    - only the chief writes the weights. Other workers of a
      `MultiWorkerMirroredStrategy` save them into a sibling temporary
      directory (`<directory>_workertemp_<task id>`) that is deleted at
      once, the pattern of TensorFlow's multi-worker tutorial for savers
      that every worker must run; each saves its own input position (the
      share of the data it reads) at the same step in
      `<directory>/input_worker_<task id>/`, and a rerun of all workers
      restores the newest step every worker saved. Every worker saves at
      the same steps: a save on time is the chief's clock, shared at the
      workers' next agreement (about once a second);
    - for a `SlimModel`, a checkpoint also holds the input position
      (Keras's epoch, the step in it, the data iterator): a rerun of a
      `fit` that did not finish goes on where it stopped, and ends with
      the weights of an uninterrupted run; so does a `fit` that continues
      a finished one past its last epoch (`fit(epochs=4)` after
      `fit(epochs=2)`; `keras_slim.train` or `keras-slim-train` with a
      higher step target). A `fit` whose `epochs` does not go past the
      finished one's runs its own schedule on its data afresh. Under
      `ParameterServerStrategy` the position is saved for a
      `tf.data.Dataset` (the coordinator reads it), not for a dataset
      function (the workers read it);
    - on SIGTERM or SIGINT, the call in flight finishes, the state is
      saved and `keras_slim.TrainingPreemptedError` stops training; under
      `MultiWorkerMirroredStrategy` a signal to any worker stops every
      worker at the same step (they agree about once a second);
    - checkpoints are found by their files, whatever the `checkpoint`
      state file says; an unreadable one is moved aside, never deleted;
      one training at a time holds the directory (`.keras_slim.lock`);
    - a save that fails (a full disk, a file-size limit, no permission)
      loses no complete checkpoint, leaves none partly written, and stops
      training with `keras_slim.CheckpointSaveError`, naming the directory
      and the last complete checkpoint, from which a rerun resumes.

    The directory is created and test-written when training begins, before
    the first step. docs/tutorials/training_services.md says what resume
    guarantees for each kind of input. With `steps_per_execution > 1` a save
    happens at the first execution boundary at or past its interval.

    Args:
        directory: Path of the checkpoint directory (created if needed).
        every_n_secs: Positive number or `None`: save when this many
            seconds passed since the last save.
            Defaults to `600`.
        every_n_steps: Positive integer or `None`: save at global steps that
            are multiples of it.
            Defaults to `None`.
        max_to_keep: Non-negative integer or `None`: how many recent
            checkpoints to keep; `0` or `None` keeps every one (TF1's
            `Saver`).
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
            be created or written, or a checkpoint of another model.
        RuntimeError: at train begin, when another process trains in the
            directory, or when no checkpoint in it can be read.
        keras_slim.CheckpointSaveError: during training, when a
            checkpoint cannot be written.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

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
        _backend.require_tensorflow(
            "keras_slim.callbacks.Checkpoints",
            "keras.callbacks.BackupAndRestore or "
            "keras.callbacks.OrbaxCheckpoint",
            why="tf.train.Checkpoint",
        )
        super().__init__()
        self.directory = checks.path("directory", directory)
        self._trigger = IntervalTrigger(
            every_n_steps=every_n_steps, every_n_secs=every_n_secs
        )
        self.max_to_keep = checks.checkpoints_to_keep(
            "max_to_keep", max_to_keep
        )
        self.keep_checkpoint_every_n_hours = checks.positive_number_or_none(
            "keep_checkpoint_every_n_hours", keep_checkpoint_every_n_hours
        )
        self.restore = checks.boolean("restore", restore)
        self.restored_path = None
        self._manager = None
        self._lock = None
        self._agree = bool
        self._loss_finite = True
        self._training_weights = None
        self._forget = None
        self._positions = None
        self._metrics_saved = None
        self._due, self._clock = self._trigger, None

    def step_multiples(self, model):
        # The step of the checkpoint a restore will start from, too, so
        # that StopAtStep's target stays a call boundary after it.
        multiples = []
        if self._trigger.every_n_steps:
            multiples.append(self._trigger.every_n_steps)
        if self.restore and os.path.isdir(self.directory):
            found = _checkpoint_dir.checkpoint_files(
                self.directory, training_state.CHECKPOINT_NAME
            )
            if found and found[-1][0] > 0:
                multiples.append(found[-1][0])
        return multiples

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._loss_finite = True
        self._metrics_saved = None
        strategy = self.model.distribute_strategy
        self._chief = self._run.is_chief
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
        self._warn_about_input(self._run.feed)
        position = self._run.position
        data = None if position is None else position.state
        if self._chief:
            # Before anything is read or written: one training at a time.
            self._lock = _checkpoint_dir.lock(self.directory)
            self._run.at_end(self._unlock)
            _checkpoint_dir.repair(
                self.directory,
                training_state.CHECKPOINT_NAME,
                keep_hours=self.keep_checkpoint_every_n_hours is not None,
            )
        self._positions = self._worker_positions(strategy, data)
        if self.restore:
            self.restored_path = self._resume().newest()
            if self.restored_path:
                logger.info(
                    "Resumed from %s (global step %d).",
                    self.restored_path,
                    self.counter.sync(),
                )
        self._checkpoint = training_state.training_checkpoint(
            # A worker's own position is saved apart.
            self.model,
            data=data if self._positions is None or self._chief else None,
        )
        self._manager = self._make_manager(self.directory)
        self._write_manager = (
            self._manager if self._chief else self._make_manager(write_dir)
        )
        self._run.resumed(self.restored_path)
        self._run.checkpoints = self
        self._keep_training_weights()
        # Under several workers, they all stop at the same call, and save
        # at the same steps: on time, when the chief says so.
        self._agree = _stop_agreement.StopAgreement(strategy)
        self._due, self._clock = self._trigger, None
        lockstep = self._run.mode.workers_in_lockstep
        if lockstep and self._trigger.every_n_secs:
            self._due = IntervalTrigger(
                every_n_steps=self._trigger.every_n_steps
            )
            self._clock = IntervalTrigger(
                every_n_secs=self._trigger.every_n_secs
            )
        self._run.signals.catch()
        step = self.counter.sync()
        for trigger in (self._due, self._clock or self._due):
            trigger.reset(step)
        self._start_step = step
        self._saved_step = step if self.restored_path else None

    def _worker_positions(self, strategy, data):
        """Each worker's own input position, under several workers that
        read their own shares on the host; else `None`."""
        feed = self._run.feed
        if not self._run.mode.reads_worker_shares or not (
            feed is not None and feed.reads_host
        ):
            return None
        positions = _worker_positions.WorkerPositions(
            self.directory,
            strategy,
            chief=self._chief,
            data=data,
            max_to_keep=self.max_to_keep,
            keep_checkpoint_every_n_hours=self.keep_checkpoint_every_n_hours,
        )
        positions.open()
        return positions

    def _keep_training_weights(self):
        """With an optimizer's moving averages (`use_ema`), Keras's `fit`
        writes the averages into the weights before `on_train_end`; the
        training weights are kept first, so the last save holds them as
        the weights and the averages apart."""
        self._training_weights = None
        self._forget = None
        optimizer = self.model.optimizer
        if not getattr(optimizer, "use_ema", False):
            return

        def keep(variables):
            self._training_weights = [(v, v.numpy()) for v in variables]

        self._forget = _keras_optimizer.before_averages_replace_weights(
            optimizer, keep
        )
        self._run.at_end(self._forget_training_weights)

    def _forget_training_weights(self):
        forget, self._forget = self._forget, None
        if forget is not None:
            forget()

    def _unlock(self):
        _checkpoint_dir.unlock(getattr(self, "_lock", None))
        self._lock = None

    def _warn_about_input(self, feed):
        """One warning, before the first step, when resume cannot be exact
        for the input of this fit."""
        if feed is None:
            logger.warning(
                "Checkpoints: the input position is saved for a "
                "keras_slim.SlimModel only; a rerun of this %s starts its "
                "data from the beginning.",
                type(self.model).__name__,
            )
            return
        if feed.why is not None and not feed.position.follows_keras:
            logger.warning(
                "Checkpoints: the input position of this fit cannot be "
                "saved (%s). A resumed run reads its data from the "
                "beginning again.",
                feed.why,
            )
            return
        if feed.by_index:
            logger.warning(
                "Checkpoints: the input is a keras.utils.PyDataset; "
                "checkpoints save its position as Keras's epoch and the "
                "batch index in it, not its own state. A resumed run reads "
                "the saved epoch's batches from index 0, drops those before "
                "the saved index and goes on, which gives the same data if "
                "__getitem__ returns the same batch for an index each time "
                "(and on_epoch_end changes nothing the rerun does not)."
            )
            return
        if feed.why is not None:
            logger.warning(
                "Checkpoints: the input position of this fit cannot be "
                "saved (%s). A resumed run restores the weights and the "
                "global step, and skips the batches the interrupted one "
                "had consumed in its epoch: it reads as many from the "
                "input it is given, drops them, and trains on the ones "
                "after. That gives the same data only if the input yields "
                "the same batches each time it is made.",
                feed.why,
            )
            return
        reason = feed.check_checkpointable()
        if reason is not None:
            logger.warning(
                "Checkpoints: the input pipeline holds stateful ops (%s). "
                "Checkpoints save its position, buffers and reshuffle "
                "seeds, but those ops' random streams start again on "
                "resume. For an exact resume, use stateless random ops "
                "(tf.random.stateless_*, tf.image.stateless_random_*) "
                "with seeds from tf.data.Dataset.random.",
                reason.strip(),
            )

    def _make_manager(self, directory):
        return tf.train.CheckpointManager(
            self._checkpoint,
            directory,
            max_to_keep=self.max_to_keep,
            keep_checkpoint_every_n_hours=self.keep_checkpoint_every_n_hours,
            checkpoint_name=training_state.CHECKPOINT_NAME,
        )

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        # Keras's mean loss of the epoch so far: not finite once a step
        # with a non-finite loss was applied (a model without keras_slim's
        # gate); the gate's skipped steps do not count in it.
        loss = (logs or {}).get("loss")
        self._loss_finite = loss is None or math.isfinite(float(loss))
        step = self.counter.step
        due = self._due.enabled and self._due(step)
        stop, asked = self._agree.decide(
            self._run.signals.received is not None,
            save=self._clock is not None
            and self._chief
            and self._clock.would_fire(step),
        )
        if due or asked:
            self.save()
        if stop:
            self._stop_on_signal()

    def _stop_on_signal(self):
        """Saves at this step (unless just saved) and stops training.

        Every worker of a multi-worker run comes here at the same call,
        whichever of them received the signal.
        """
        step = self.counter.sync()
        path = None
        if self._saved_step != step:
            path = self.save()
        elif self._chief:
            path = self._manager.latest_checkpoint
        self._run.signals.release()
        raise TrainingPreemptedError(
            step,
            path,
            self._run.signals.received or "a signal to another worker",
        )

    def on_train_end(self, logs=None):
        self._run.signals.release()
        # The resume concerns this fit only (WarmStart reads it).
        self._run.resumed_from = None
        position = self._run.position
        kept = self._training_weights
        if kept is not None:
            # Keras wrote the moving averages into the weights: save the
            # training weights (the averages are the optimizer's), then
            # leave the averages in the model, as Keras does.
            averages = [(v, v.numpy()) for v, _ in kept]
            for variable, value in kept:
                variable.assign(value)
        try:
            step = self.counter.sync()
            ran = step != self._start_step or self.restored_path is not None
            # A fit that ran no step from scratch (empty data) leaves no
            # untrained checkpoint behind.
            if ran and (step != self._saved_step or position is not None):
                self.save()
        finally:
            for variable, value in averages if kept is not None else ():
                variable.assign(value)
            self._forget_training_weights()
            self._unlock()

    def restore_with_position(self, path):
        """Restores checkpoint `path` with this worker's input position of
        its step, and the metrics' state of that step (a rollback:
        `keras_slim/_fit/rollback.py`).

        The metrics (the epoch's running loss among them) are not in the
        checkpoint: this fit kept their state at its last save, and a
        checkpoint it did not write is the one it started from, before
        the epoch's first step, when Keras's metrics were reset.

        Args:
            path: A checkpoint this run wrote or restored.
        """
        self._resume().with_position(path)
        step = _resume.step_of(path)
        if self._metrics_saved is not None and self._metrics_saved[0] == step:
            _restore_metrics(self.model, self._metrics_saved[1])
        else:
            self.model.reset_metrics()

    def _resume(self):
        return _resume.Resume(
            self.model,
            self.directory,
            chief=self._chief,
            position=self._run.position,
            positions=self._positions,
            epochs=self.params.get("epochs"),
            keep_hours=self.keep_checkpoint_every_n_hours is not None,
        )

    @property
    def latest_checkpoint(self):
        """The newest checkpoint of the directory (written or restored by
        this run, or found at its begin), or `None`."""
        if self._manager is None:
            return None
        return self._manager.latest_checkpoint

    def save(self):
        """Saves the training state now, unless a variable is not finite.

        A save that fails loses no complete checkpoint: the ones before
        stay whole, what it wrote part way is removed, and the
        `checkpoint` state file lists only complete checkpoints.

        Returns:
            The path written, or `None` when nothing was written (a
            non-finite state, or a worker that is not the chief).

        Raises:
            keras_slim.CheckpointSaveError: when the checkpoint cannot be
                written (a full disk, a file-size limit, no permission),
                naming the directory and its last complete checkpoint.
        """
        step = self.counter.sync()
        if not self._loss_finite:
            logger.warning(
                "Not saving a checkpoint at global step %d: a step with a "
                "non-finite loss was applied in this epoch (the model has "
                "no update gate; a keras_slim.SlimModel skips such steps).",
                step,
            )
            return None
        if not training_state.all_finite(self.model):
            logger.warning(
                "Not saving a checkpoint at global step %d: a variable is "
                "not finite.",
                step,
            )
            return None
        if self._run.position is not None:
            self._run.position.save()
        with self._run.signals.saving():
            path = _checkpoint_dir.save(
                self._write_manager,
                step,
                name=training_state.CHECKPOINT_NAME,
                preserve=self.keep_checkpoint_every_n_hours is not None,
            )
            if self._positions is not None:
                self._positions.save(step)
        self._saved_step = step
        if self._run.rollback is not None:
            # What a rollback to this step puts back beside the checkpoint.
            self._metrics_saved = (step, _metrics(self.model))
        if self._clock is not None:
            self._clock.reset(step)
        if not self._chief:
            shutil.rmtree(os.path.dirname(path), ignore_errors=True)
            return None
        logger.info("Saved checkpoint %s", path)
        return path
