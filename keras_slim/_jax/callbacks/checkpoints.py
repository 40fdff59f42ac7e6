"""`Checkpoints` on JAX: save on intervals through orbax-checkpoint,
resume exactly from the newest."""

import importlib.metadata
import logging
import random
import re

import jax
import numpy as np

from keras_slim import _checkpoint_dir
from keras_slim import _keras_optimizer
from keras_slim import checks
from keras_slim._jax import checkpoint_store
from keras_slim._jax import run as run_lib
from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks._files import check_writable
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.errors import TrainingPreemptedError

logger = logging.getLogger("keras_slim")

_FORMAT = 1


class Checkpoints(RunCallback):
    """Saves the training state on intervals and resumes from the latest.

    `keras_slim.callbacks.Checkpoints` on JAX, with its arguments and
    guarantees, on orbax-checkpoint (what Keras's own `OrbaxCheckpoint`
    uses) rather than `tf.train.Checkpoint`:

    - saves `model.ckpt-<global step>` (a directory) in `directory` every
      `every_n_secs` seconds and/or `every_n_steps` steps, and once more
      when training ends; keeps the newest `max_to_keep` and one per
      `keep_checkpoint_every_n_hours`;
    - a checkpoint holds everything a run needs to go on exactly as if
      uninterrupted: the weights, the optimizer's variables (slots,
      `iterations`, the loss scale, moving averages, gradient
      accumulators mid-step), the metrics' state, the layers' seed
      generators (dropout), the step's skipped-step counters, and the
      input position: the epoch, the batch in it, and NumPy's and
      Python's random states at the epoch's start (Keras shuffles arrays
      with NumPy's). At train begin the newest is restored and the run
      continues where it stopped, after a `kill -9` too; a `fit` that
      continues a finished one past its last epoch goes on exactly, and
      one whose `epochs` does not go past it runs its own schedule on its
      data afresh;
    - the position is exact for arrays and for a `keras.utils.PyDataset`
      whose batches depend only on their index and the random states
      above; a Python generator or a `tf.data.Dataset` is read from its
      start again and its first batches passed over, with a warning
      before the first step. A dataset is also iterated once per epoch
      already trained (Keras makes an iterator each epoch, and each one
      advances a seeded `shuffle`'s reshuffle): exact for a dataset
      whose order depends only on seeds. Under `steps_per_epoch` Keras
      keeps one iterator across epochs, whose position is not held: a
      warning says so before the first step;
    - a save is atomic (orbax writes into a temporary directory, renamed
      when complete): one that fails (a full disk, a file-size limit)
      loses no complete checkpoint, leaves nothing partly written, and
      stops training with `keras_slim.CheckpointSaveError`; a checkpoint
      that cannot be read is moved aside (`.unreadable-<time>`), named in
      a warning, and the one before it restored;
    - on SIGTERM or SIGINT, the call in flight finishes, the state is
      saved and `keras_slim.TrainingPreemptedError` stops training;
    - one training at a time holds the directory (`.keras_slim.lock`);
    - a step that failed the numeric check is never saved: the verdict is
      read before each save.

    A TensorFlow run's checkpoint does not continue here (another
    format): start a JAX run from it with `WarmStart`.

    Args:
        directory: Path of the checkpoint directory (created if needed).
        every_n_secs: Positive number or `None`: save when this many
            seconds passed since the last save.
            Defaults to `600`.
        every_n_steps: Positive integer or `None`: save at global steps
            that are multiples of it.
            Defaults to `None`.
        max_to_keep: Non-negative integer or `None`: how many recent
            checkpoints to keep; `0` or `None` keeps every one.
            Defaults to `5`.
        keep_checkpoint_every_n_hours: Positive number or `None`: also keep
            one checkpoint per this many hours.
            Defaults to `None`.
        restore: Whether to restore the latest checkpoint at train begin.
            Defaults to `True`.

    Raises:
        ValueError: for an interval, `max_to_keep` or
            `keep_checkpoint_every_n_hours` that is not valid, or an empty
            `directory`. At train begin: a directory that cannot be created
            or written, a checkpoint of another model, a model that is not
            a `keras_slim.SlimModel`.
        RuntimeError: at train begin, when another process trains in the
            directory, or when no checkpoint in it can be read.
        keras_slim.CheckpointSaveError: when a checkpoint cannot be written.

    Example:
    ```python
    saver = keras_slim.callbacks.Checkpoints("/tmp/run", every_n_steps=500)
    model.fit(x, y, epochs=10, callbacks=[saver])
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
        self._store = None
        self._lock = None

    # Train begin: lock, restore, position.

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        run = self.run
        check_writable(
            "directory", self.directory, what="checkpoints", create=True
        )
        self._lock = _checkpoint_dir.lock(self.directory)
        run.at_end(self._close)
        self._store = checkpoint_store.Store(
            self.directory,
            max_to_keep=self.max_to_keep or None,
            keep_hours=self.keep_checkpoint_every_n_hours,
        )
        self._warn_about_input()
        self._pending_metrics = None
        self._epoch_random = None
        self._resume_random = None
        self.restored_path = None
        self._saved_step = None
        if self.restore:
            self._resume()
        run.checkpoints = self
        run.resumed_from = self.restored_path
        self._keep_training_weights()
        run.signals.catch()
        self._trigger.reset(run.step)

    def _resume(self):
        model = self._model
        found = self._store.restore_newest(
            like=_by_name(self.run.state()), check=self._check_meta
        )
        if found is None:
            return
        step, state, meta = found
        _assign(model, state, metrics=False)
        self._pending_metrics = state["metrics"]
        self.run.counters_from(meta["counters"])
        self.run.batches = None  # read again: the restored `iterations`
        self.restored_path = self._store.path(step)
        self._saved_step = step
        self._position(meta)
        logger.info(
            "Resumed from %s (global step %d).", self.restored_path, step
        )

    def _position(self, meta):
        """Where the restored run's data stands: Keras's epoch to start
        at, the batches to pass over in it, the random states to set at
        its start."""
        epoch, batch = meta["epoch"], meta["batch_in_epoch"]
        epochs = self.params.get("epochs") if self.params else None
        if epochs is not None and epoch >= epochs:
            # A finished run's schedule is over: this fit runs its own.
            self._pending_metrics = None
            return
        self._model._initial_epoch = epoch
        self.run.skip_batches = batch
        if epoch and self.run.input_kind == run_lib.TF_DATA:
            _replay_epochs(self.run.input, epoch)
        if batch == 0:
            self._pending_metrics = None  # Keras resets them each epoch
        self._resume_random = (epoch, meta["random"])

    def _check_meta(self, meta):
        if meta.get("format") != _FORMAT:
            raise ValueError(
                f"Invalid checkpoint in {self.directory!r}: format "
                f"{meta.get('format')!r}, expected {_FORMAT} (a keras_slim "
                "checkpoint of a JAX run)."
            )
        names = _names(self._model)
        saved = meta["variables"]
        for name in checkpoint_store.LISTS:
            here, there = _unnumbered(names[name]), _unnumbered(saved[name])
            if here != there:
                missing = sorted(set(here) - set(there))
                extra = sorted(set(there) - set(here))
                raise ValueError(
                    f"The checkpoints in {self.directory!r} are of another "
                    f"model: its {name} variables differ (this model's not "
                    f"there: {missing[:5]}; there, not in this model: "
                    f"{extra[:5]}). Use another directory, or WarmStart "
                    "to start from them."
                )

    def _warn_about_input(self):
        kind = self.run.input_kind
        if self.run.steps_per_epoch is not None:
            logger.warning(
                "Checkpoints: with steps_per_epoch=%s Keras reads the input "
                "with one iterator across epochs, whose position a "
                "checkpoint does not hold: a resumed run reads the input "
                "from its start again and passes over only the resumed "
                "epoch's batches. Leave "
                "steps_per_epoch unset (an epoch is one pass over the "
                "input) for an exact resume.",
                self.run.steps_per_epoch,
            )
            return
        if kind in ("arrays", "py_dataset"):
            return
        if kind == run_lib.TF_DATA:
            logger.warning(
                "Checkpoints: a resumed run reads this fit's tf.data.Dataset "
                "from its start again, making one iterator for each epoch "
                "already trained (as the run did: a seeded shuffle "
                "reshuffles alike) and passing over the batches already "
                "trained on. The position is exact when the dataset's order "
                "depends only on seeds; a shuffle or a random op without a "
                "seed reads other batches."
            )
            return
        logger.warning(
            "Checkpoints: the input position of this fit (%s) cannot be "
            "saved exactly; a resumed run reads it from its start again and "
            "passes over the batches already trained on.",
            kind,
        )

    def _keep_training_weights(self):
        """With `use_ema`, Keras writes the averages into the weights
        before `on_train_end`: the training weights are kept first, for
        the last save."""
        self._training_weights = None
        optimizer = self._model.optimizer
        if not getattr(optimizer, "use_ema", False):
            return

        def keep(variables):
            del variables
            self._training_weights = list(self.run.state()[0])

        forget = _keras_optimizer.before_averages_replace_weights(
            optimizer, keep
        )
        self.run.at_end(forget)

    # During training.

    def on_epoch_begin(self, epoch, logs=None):
        if self._resume_random is not None:
            saved_epoch, states = self._resume_random
            self._resume_random = None
            if saved_epoch == epoch:
                _set_random(states)
        if self._pending_metrics is not None:
            metrics, self._pending_metrics = self._pending_metrics, None
            for variable, value in zip(self._model.metrics_variables, metrics):
                variable.assign(value)
        # The random states this epoch's shuffle starts from.
        self._epoch_random = _get_random()

    def after_call(self):
        run = self.run
        if run.no_step:
            return
        step = run.step
        if run.signals.received is not None:
            path = self._save(step, run.state())
            run.signals.release()
            raise TrainingPreemptedError(step, path, run.signals.received)
        if self._trigger(step):
            self._save(step, run.state())

    def on_train_end(self, logs=None):
        step = self.run.step
        state = self.run.state()
        if self._training_weights is not None:
            state = (self._training_weights, *state[1:])
        self._save(step, state)

    def _save(self, step, state):
        """Writes the checkpoint of `step` (once per step), unless a step
        failed the numeric check (which this raises)."""
        run = self.run
        run.check()
        if step == self._saved_step:
            return self._store.path(step)
        if not _finite(state):
            logger.warning(
                "Checkpoints: a variable is not finite at global step %d; "
                "not saved.",
                step,
            )
            return None
        with run.signals.saving():
            path = self._store.save(
                step, dict(zip(checkpoint_store.LISTS, state)),
                self._meta(),
            )  # fmt: skip
        self._saved_step = step
        return path

    def _meta(self):
        run = self.run
        steps = self.params.get("steps") if self.params else None
        epoch, batch = run.epoch, run.batch_in_epoch
        if run.epoch_ended or (steps is not None and batch >= steps):
            epoch, batch = epoch + 1, 0
            random_states = _get_random()
        else:
            random_states = self._epoch_random or _get_random()
        return {
            "format": _FORMAT,
            "keras_slim": _version(),
            "global_step": run.step,
            "epoch": epoch,
            "batch_in_epoch": batch,
            "random": random_states,
            "counters": run.counters_to_json(),
            "variables": _names(self._model),
        }

    def _close(self):
        if self._store is not None:
            self._store.close()
            self._store = None
        _checkpoint_dir.unlock(self._lock)
        self._lock = None


def _version():
    """keras_slim's installed version (the package imports this module)."""
    try:
        return importlib.metadata.version("keras_slim")
    except importlib.metadata.PackageNotFoundError:
        return None


def _names(model):
    """The variables' paths of the four lists, as saved (the optimizer's
    without its own name, which Keras numbers in a process: `adam_1`)."""
    return {
        "trainable": [v.path for v in model.trainable_variables],
        "non_trainable": [v.path for v in model.non_trainable_variables],
        "optimizer": [
            v.path.split("/", 1)[-1] for v in model.optimizer.variables
        ],
        "metrics": [v.path for v in model.metrics_variables],
    }


def _unnumbered(paths):
    """The paths without Keras's automatic numbering (`dense_3/kernel` is
    `dense/kernel`): the same model built again in one process (a
    notebook cell run twice) has other numbers, and its checkpoints are
    its own. The lists are restored by position."""
    return [re.sub(r"_\d+(?=/|$)", "", path) for path in paths]


def _by_name(state):
    return dict(zip(checkpoint_store.LISTS, state))


def _assign(model, state, *, metrics):
    lists = [
        (model.trainable_variables, state["trainable"]),
        (model.non_trainable_variables, state["non_trainable"]),
        (model.optimizer.variables, state["optimizer"]),
    ]
    if metrics:
        lists.append((model.metrics_variables, state["metrics"]))
    for variables, values in lists:
        for variable, value in zip(variables, values):
            variable.assign(value)


def _finite(state):
    """Whether every floating variable is finite (one compiled reduction,
    one read)."""
    leaves = [
        v
        for v in jax.tree_util.tree_leaves(state)
        if jax.numpy.issubdtype(v.dtype, jax.numpy.inexact)
    ]
    return not leaves or bool(_all_finite(leaves))


@jax.jit
def _all_finite(leaves):
    return jax.numpy.all(
        jax.numpy.stack([jax.numpy.all(jax.numpy.isfinite(v)) for v in leaves])
    )


def _get_random():
    """NumPy's and Python's global random states, as JSON."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    version, internal, gauss_next = random.getstate()
    return {
        "numpy": [kind, keys.tolist(), pos, has_gauss, gauss],
        "python": [version, list(internal), gauss_next],
    }


def _set_random(states):
    kind, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state(
        (kind, np.array(keys, dtype=np.uint32), pos, has_gauss, gauss)
    )
    version, internal, gauss_next = states["python"]
    random.setstate((version, tuple(internal), gauss_next))


def _replay_epochs(dataset, epochs):
    """Makes and drops one iterator of `dataset` per epoch already
    trained. Keras reads a `tf.data.Dataset` epoch by epoch, one iterator
    each, and each new iterator advances the seeds of a reshuffling
    `shuffle(seed=...)`: so the resumed epoch reads that epoch's order,
    not the first's."""
    for _ in range(epochs):
        iter(dataset)
