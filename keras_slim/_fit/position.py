"""The input position of a `fit`: one owner makes, saves, restores and
advances it. docs/how_it_works.md ("The input position") draws it.
"""

import collections
import enum
import functools
import logging
import math

import keras

from keras_slim import _backend
from keras_slim import _keras
from keras_slim._backend import tensorflow as tf

logger = logging.getLogger("keras_slim")

_KEY = "data/{}/.ATTRIBUTES/VARIABLE_VALUE"


class Applies(enum.Enum):
    """Whether a checkpoint's input position applies to a `fit`
    (`InputPosition.applies`).

    Attributes:
        NO: The `fit` runs its own schedule and reads its data afresh.
        YES: The `fit` goes on from the position, with its saved
            iterators.
        WITHOUT_ITERATORS: The `fit` goes on from the position's counts
            with new iterators (`InputPosition.resume_without_iterators`).
    """

    NO = "no"
    YES = "yes"
    WITHOUT_ITERATORS = "without iterators"


@functools.cache
def _data_state():
    """Defines `DataState` (a `tf.Module`) on first use."""

    class DataState(tf.Module):
        """The input position a checkpoint holds under `data/`.

        `epoch` is Keras's epoch and `step` the steps run in it (what Keras's
        epoch loop needs to go on where the run stopped; `(epoch + 1, 0)` once
        an epoch ran to its end); `finished` whether that `fit` ended;
        `iterator` and `next_iterator` the host iterators of the current and
        the next pass (a `HostFeed`'s; absent otherwise); `seed` the shuffle
        seed of array input; `steps_per_read` the batches one read of those
        iterators gives (a block's: `keras_slim/_fit/blocks.py`).

        Args:
            seed: The shuffle seed of array input. Defaults to `0`.
        """

        def __init__(self, seed=0):
            super().__init__(name="data")
            with tf.init_scope():
                self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
                self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
                self.finished = tf.Variable(False, trainable=False)
                self.seed = tf.Variable(seed, dtype=tf.int64, trainable=False)
                self.steps_per_read = tf.Variable(
                    1, dtype=tf.int64, trainable=False
                )

    DataState.__qualname__ = "DataState"
    return DataState


class Saved(
    collections.namedtuple("Saved", "epoch step finished seed steps_per_read")
):
    """The input position a checkpoint holds, read without restoring it."""


def saved(path):
    """The input position a checkpoint holds, or `None` if none.

    Args:
        path: A checkpoint prefix.

    Returns:
        A `Saved`, or `None`.
    """
    reader = tf.train.load_checkpoint(path)
    if not all(reader.has_tensor(_KEY.format(n)) for n in Saved._fields):
        return None
    values = [reader.get_tensor(_KEY.format(n)) for n in Saved._fields]
    epoch, step, finished, seed, per_read = values
    return Saved(
        int(epoch), int(step), bool(finished), int(seed), int(per_read)
    )


class InputPosition:
    """Where one `fit` stands in its data (see the module docstring).

    Args:
        seed: The shuffle seed of array input (a restore replaces it).
            Defaults to `0`.
        follows_keras: Whether Keras's epoch loop runs the steps (not so
            for the parameter-server loop, which saves no position).
            Defaults to `True`.
        epoch_is_pass: Whether Keras reads a new pass of the data each
            epoch (`fit` without `steps_per_epoch`). Defaults to `True`.

    Attributes:
        epoch: Keras's epoch, counted on the host.
        step: The steps run in it.
        finished: Whether the `fit` ended.
        resume_at: The restored `(epoch, step)` while catching up with it,
            else `None`.
        skips: The batches Keras's own iterator skips at the next call
            (a `Feed` that is not the run's: its position is not saved).

    Example:
    ```python
    position = InputPosition(seed=seed)
    checkpoint = training_checkpoint(model, data=position.state)
    ```
    """

    def __init__(self, *, seed=0, follows_keras=True, epoch_is_pass=True):
        self.epoch = 0
        self.step = 0
        self.finished = False
        self.resume_at = None
        self.skips = 0
        self.follows_keras = follows_keras
        self._epoch_is_pass = epoch_is_pass
        self._seed = seed
        self._state = None
        # The host iterators of the current and the next pass.
        self._iterators = {"iterator": None, "next_iterator": None}
        self._keras_iterator = None
        self._rotated = False
        self._make = None
        self._per_read = 1
        self._skip_new = False

    @property
    def state(self):
        """The `DataState` a checkpoint holds, made on first use: a `fit`
        that neither saves nor restores one makes no variables for it."""
        if self._state is None:
            self._state = _data_state()(self._seed)
            for name, iterator in self._iterators.items():
                if iterator is not None:
                    setattr(self._state, name, iterator)
        return self._state

    @property
    def seed(self):
        """The shuffle seed of array input (the restored one after a
        restore)."""
        if self._state is None:
            return self._seed
        return int(self._state.seed.numpy())

    # Keras's epoch loop (the `Position` callback).

    def epoch_begins(self, epoch):
        """Keras starts `epoch`."""
        self.epoch = epoch
        self.step = 0

    def batch_begins(self, batch):
        """Whether Keras's call at `batch` of the epoch runs no step: it
        falls before the restored step."""
        if self.resume_at is None:
            return False
        epoch, step = self.resume_at
        if self.epoch == epoch and batch < step:
            return True
        if self.epoch != epoch:
            # The restored epoch ended at its step (a stop at its last
            # batch): Keras's iterator of the next one has nothing to skip.
            self.skips = 0
        self.resume_at = None
        return False

    def batch_ends(self, batch):
        """Keras's call whose last step is `batch` of the epoch ended."""
        self.step = batch + 1

    def epoch_ends(self, epoch, *, stopped):
        """Keras's `epoch` ended; unless training was stopped in it, the
        position is the next epoch's start, and where each epoch reads a
        new pass, the next pass becomes current now (the iterator a
        straight run would make when the next epoch starts is made here,
        so a checkpoint of a finished `fit` holds the next epoch's start).

        Args:
            epoch: Keras's epoch.
            stopped: Whether training was stopped during it.
        """
        if stopped:
            return
        self.epoch, self.step = epoch + 1, 0
        if self._epoch_is_pass and self._make is not None:
            self._next_pass()
            self._rotated = True

    def finish(self):
        """The `fit` ended (not on an error): checkpoints say so."""
        self.finished = True

    # Checkpoints.

    def applies(self, path, epochs):
        """Whether a `fit` of `epochs` epochs goes on from the position
        `path` holds, with its saved iterators.

        A position of a `fit` that did not finish always applies (its
        rerun goes on where it stopped). One of a finished `fit` applies
        when `epochs` goes past its epoch (the run is continued: the same
        command with a higher target); else the new `fit` runs its own
        schedule and reads its data afresh. A position whose iterators
        read blocks of another size than this `fit`'s (the steps per call
        chosen by the model changed: a restored iterator keeps the
        pipeline it was saved with) applies without them: see
        `resume_without_iterators`.

        Args:
            path: A checkpoint prefix.
            epochs: The `fit`'s `epochs` (Keras's index of the last epoch
                plus one), or `None` if unknown.

        Returns:
            An `Applies`: `YES` (restore the position), `NO` (do not), or
            `WITHOUT_ITERATORS`.
        """
        if not self.follows_keras:
            return Applies.NO
        position = saved(path)
        if position is None:
            return Applies.NO
        if position.finished and epochs is not None:
            if position.epoch >= epochs:
                return Applies.NO
        if self._make is not None and position.steps_per_read != self._per_read:
            return Applies.WITHOUT_ITERATORS
        return Applies.YES

    def resume_without_iterators(self, path, model):
        """Goes on from the counts `path` holds with new iterators: the
        current pass's skips the batches the saved one had read.

        The saved iterators read blocks of another size; restoring them
        would bring back that size (a restored iterator keeps the pipeline
        it was saved with), so a warning says the data goes on from new
        passes, whose shuffle order may differ from an uninterrupted run.

        Args:
            path: A checkpoint prefix holding a position (`applies`).
            model: The model being fitted.
        """
        position = saved(path)
        logger.warning(
            "The saved input position was read in blocks of %d batches, "
            "this fit reads %d (the steps per call chosen by the model "
            "changed). The data goes on from a new pass, skipping the "
            "%d batches the saved epoch had read; the shuffle order may "
            "differ from an uninterrupted run. For an exact resume, keep "
            "the steps per call: set steps_per_execution, or intervals "
            "and step targets with the same common divisors.",
            position.steps_per_read,
            self._per_read,
            position.step,
        )
        state = self.state
        state.epoch.assign(position.epoch)
        state.step.assign(position.step)
        state.seed.assign(position.seed)
        self._skip_new = True
        self.resume(model)

    def save(self):
        """Writes the host's count of the position into `state`, before a
        checkpoint is written."""
        state = self.state
        state.epoch.assign(self.epoch)
        state.step.assign(self.step)
        state.finished.assign(self.finished)
        state.steps_per_read.assign(self._per_read)

    def resume(self, model):
        """Goes on from the restored `state`: Keras's loop starts at the
        restored epoch, and its first `step` calls run no step.

        Args:
            model: The model being fitted.
        """
        if not self.follows_keras:
            return
        epoch = int(self.state.epoch.numpy())
        step = int(self.state.step.numpy())
        self.finished = False
        _keras.set_initial_epoch(model, epoch)
        self.resume_at = (epoch, step)
        if self._make is None:
            # Keras's own iterator is read from the first step after the
            # resume point: it skips what the run consumed of the epoch.
            self.skips = step

    # The host iterators (a `HostFeed`).

    def reads_host(self, make, *, per_read=1):
        """The run reads host iterators that `make()` makes.

        Args:
            make: A function of no argument returning a new host iterator
                of the data (the next pass's).
            per_read: The batches one read of such an iterator gives (a
                block's). Defaults to `1`.
        """
        self._make = make
        self._per_read = per_read

    def iterator(self, keras_iterator, take_leftover=None):
        """The host iterator for the pass Keras's iterator stands for.

        Each pass reads an iterator made when the pass before started (the
        first pass makes two), so a checkpoint holds the next pass's
        iterator too, fresh: its reshuffle seeds are saved as drawn.
        (TensorFlow restores the reshuffle state of an iterator whose input
        has run out one pass ahead; with the next pass's own iterator
        saved, a resumed run does not depend on it.) Both are made before
        the pass reads anything: a pipeline that reshuffles inside a
        `repeat()` draws its seeds from one generator shared by its
        iterators, so the order of their making and reading must not
        depend on when checkpoints are written.

        Args:
            keras_iterator: The iterator Keras handed the train function.
            take_leftover: A function of no argument returning the
                `(iterator, next_iterator)` an earlier `fit` on the same
                data left unread (`left_over`), or `None`; called for a
                first pass that does not resume. Defaults to `None`.

        Returns:
            The host iterator (of batches, or of blocks).
        """
        if keras_iterator is self._keras_iterator:
            return self._iterators["iterator"]
        first = self._keras_iterator is None
        self._keras_iterator = keras_iterator
        if self._rotated:
            self._rotated = False  # the epoch's end made the pass current
        elif first:
            current, following = None, None  # new, or the restored ones
            if self.resume_at is None and take_leftover is not None:
                current, following = take_leftover() or (None, None)
            # Tracked, so a checkpoint holds them; a restore deferred
            # until now applies here.
            restored = self._track("iterator", current)
            restored = self._track("next_iterator", following) and restored
            if not restored or self._skip_new:
                self._skip_consumed()
        else:
            self._next_pass()
        return self._iterators["iterator"]

    def left_over(self):
        """What this `fit` leaves unread for the next one on the same
        data: the current pass and the next if the current one is unread
        (an epoch just ended), else the next pass; `(iterator,
        next_iterator)` or `None`."""
        iterators = self._iterators
        if iterators["next_iterator"] is None:
            return None
        if self._rotated:
            return iterators["iterator"], iterators["next_iterator"]
        return iterators["next_iterator"], None

    def drop_batch(self):
        """Reads one batch of the current pass and drops it (a rollback's
        batch that diverged). Checkpoints after hold the iterator past it;
        Keras's count of the epoch does not count it."""
        next(self._iterators["iterator"])

    def _next_pass(self):
        self._track("iterator", self._iterators["next_iterator"])
        self._track("next_iterator", None)

    def _track(self, name, iterator):
        """Makes `iterator` (or a new one) the position's `name`, tracked
        by `state` if made, applying a deferred restore; returns whether
        it applied (or none was due), and warns if the saved iterator is
        of another pipeline (the steps per call, so the blocks, changed)."""
        iterator = iterator or self._make()
        self._iterators[name] = iterator
        if self._state is None:
            return True
        try:
            setattr(self._state, name, iterator)
            return True
        except tf.errors.OpError as error:
            logger.warning(
                "The saved input position is for another input pipeline "
                "(%s: the steps per call changed?). The data goes on from "
                "a new pass, skipping the batches the interrupted epoch had "
                "read; the shuffle order may differ from an uninterrupted "
                "run.",
                type(error).__name__,
            )
            # The failed restore cancelled that iterator, and was consumed.
            iterator = self._make()
            self._iterators[name] = iterator
            setattr(self._state, name, iterator)
            return False

    def _skip_consumed(self):
        skip = self.resume_at[1] if self.resume_at else 0
        iterator = self._iterators["iterator"]
        for _ in range(math.ceil(skip / self._per_read)):
            if next(iterator, None) is None:
                break


class Position(keras.callbacks.Callback):
    """Reports Keras's epoch loop to the run's `InputPosition`.

    Args:
        run: The fit's `Run`, whose position is advanced.

    Example:
    ```python
    model.fit(data, callbacks=[Position(run), *callbacks])  # by _fit.fit
    ```
    """

    def __init__(self, run):
        super().__init__()
        self._run = run

    def on_epoch_begin(self, epoch, logs=None):
        self._run.position.epoch_begins(epoch)

    def on_train_batch_begin(self, batch, logs=None):
        if self._run.position.batch_begins(batch):
            self._run.no_step = True

    def on_train_batch_end(self, batch, logs=None):
        # Keras's index of the call's last step, in the epoch.
        self._run.position.batch_ends(batch)

    def on_epoch_end(self, epoch, logs=None):
        # First in the list: only a stop inside the epoch is seen here.
        self._run.position.epoch_ends(epoch, stopped=self.model.stop_training)

    def on_train_end(self, logs=None):
        self._run.position.finish()


# `DataState`, made on first access (a `tf.Module`): on another backend
# this module imports no TensorFlow.
__getattr__ = _backend.lazy_attributes(__name__, {"DataState": _data_state})
