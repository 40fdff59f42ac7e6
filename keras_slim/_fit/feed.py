"""The data feed of one `fit`: what Keras iterates, what the loop reads.

`make` picks the feed of a `SlimModel.fit`, which its run holds
(`Run.feed`): a `HostFeed`, whose host iterator the run owns (datasets
and arrays under the default and mirrored strategies: the input position
is then part of every checkpoint, and Keras iterates a stand-in of the
data's length), or a `Feed`, where Keras iterates the data as given (a
resumed run skips what the interrupted epoch consumed). docs/design.md
("Training services") says which inputs get which, and why.
"""

import logging
import math

import keras
import numpy as np
import tensorflow as tf

from keras_slim import _keras
from keras_slim import _strategy
from keras_slim._fit import blocks as blocks_lib
from keras_slim._fit import input_options

logger = logging.getLogger("keras_slim")


def _zeros(spec, one):
    shape = [one if d is None else d for d in spec.shape]
    return tf.zeros(tf.stack(shape), spec.dtype)


class Feed:
    """Keras's own feed: `fit` iterates the data as given.

    The train function reads Keras's iterators. The position in the data
    cannot be saved; after a resume, the first call skips the batches the
    interrupted run had consumed in its epoch (`resume_skips`), which
    gives the same data only if the input yields the same batches each
    time it is made.

    Args:
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.
        why: Why the position cannot be saved, for the warning a
            `Checkpoints` callback logs. Defaults to `None`.
    """

    reads_host = False
    reads_blocks = False
    #: Whether Keras's epoch loop runs the steps (not so for the
    #: parameter-server loop).
    follows_keras = True

    def __init__(self, x, y, kwargs, *, why=None, seed=0):
        self.x = x
        self.y = y
        self.kwargs = kwargs
        self.why = why
        self._seed = seed
        self._state = None
        self.resume_skips = 0
        # Keras's epoch and the steps run in it, counted on the host
        # (`keras_slim/_fit/position.py`), written to `state` on save.
        self.epoch = 0
        self.step = 0
        self.finished = False
        # The restored `(epoch, step)` while catching up with it.
        self.resume_at = None

    @property
    def state(self):
        """The input position a checkpoint holds (`DataState`), made on
        first use: a `fit` that neither saves nor restores one makes no
        variables for it."""
        if self._state is None:
            self._state = DataState(self._seed)
            self._attach(self._state)
        return self._state

    def _attach(self, state):
        """Gives a new `state` what the feed already made (nothing here)."""

    def end(self):
        """Called when the `fit` ends, even on an error (nothing here)."""

    def save_position(self):
        """Writes the host's count of the position into `state`."""
        self.state.epoch.assign(self.epoch)
        self.state.step.assign(self.step)
        self.state.finished.assign(self.finished)

    def resume(self, model):
        """Goes on from the restored `state`: Keras's loop starts at the
        restored epoch, and its first `step` steps run no step.

        Args:
            model: The model being fitted.
        """
        if not self.follows_keras:
            return
        epoch = int(self.state.epoch.numpy())
        step = int(self.state.step.numpy())
        _keras.set_initial_epoch(model, epoch)
        self.resume_at = (epoch, step)
        self._positioned()

    def _positioned(self):
        # Keras's iterator is read from the first step after the resume
        # point: skip what the interrupted run consumed of the epoch.
        self.resume_skips = self.resume_at[1]

    def keras_data(self):
        """`(x, y)` as Keras's `fit` is to iterate them."""
        return self.x, self.y

    def check_checkpointable(self):
        """Why the input's state cannot all be saved, or `None`."""
        return self.why

    def skip(self, iterator):
        """Consumes the batches a resume skips from Keras's iterator."""
        skips, self.resume_skips = self.resume_skips, 0
        for _ in range(skips):
            next(iterator)


class DataState(tf.Module):
    """The input position a checkpoint holds under `data/`.

    `epoch` is Keras's epoch and `step` the steps run in it (what Keras's
    epoch loop needs to go on where the run stopped); `finished` whether
    that `fit` ended (a new `fit` then starts its own schedule and reads
    its data afresh, as before); `iterator` the host iterator of the
    current pass (a `HostFeed`'s; absent otherwise); `seed` the shuffle
    seed of array input.
    """

    def __init__(self, seed=0):
        super().__init__(name="data")
        with tf.init_scope():
            self.epoch = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.step = tf.Variable(0, dtype=tf.int64, trainable=False)
            self.finished = tf.Variable(False, trainable=False)
            self.seed = tf.Variable(seed, dtype=tf.int64, trainable=False)


class HostFeed(Feed):
    """The run reads the data from a host iterator it owns.

    Args:
        dataset: A function of the shuffle seed returning the batched
            `tf.data.Dataset` to read.
        cardinality: The dataset's number of batches (or
            `tf.data.INFINITE_CARDINALITY`, `UNKNOWN_CARDINALITY`).
        element_spec: The dataset's element spec.
        kwargs: `fit`'s other keyword arguments, for Keras.
        blocks: Batches per block, or `None` to read one batch per step.
        seed: The shuffle seed (array input).
        stateless: Whether the pipeline is known to hold no stateful op
            (one keras_slim made from arrays).
        given: The `tf.data.Dataset` given to `fit`, whose preparation
            `cache` keeps, or `None` (arrays: a new pipeline each fit).
        cache: The model's `InputCache`, or `None`.
    """

    reads_host = True

    def __init__(
        self,
        dataset,
        cardinality,
        element_spec,
        kwargs,
        *,
        blocks,
        seed,
        stateless=False,
        given=None,
        cache=None,
    ):
        # The host pipeline shuffles; Keras's stand-in is never read.
        super().__init__(None, None, dict(kwargs, shuffle=False), seed=seed)
        self._make = dataset
        self.blocks = blocks
        self.reads_blocks = blocks is not None
        self.stand_in = _stand_in(int(cardinality), element_spec)
        self._keras_iterator = None
        self._host = None
        # The host iterators of the current and the next pass.
        self._iterators = {"iterator": None, "next_iterator": None}
        self._stateless = stateless
        self._options = None
        self._given = given
        self._cache = cache

    def _prepared(self, key, make):
        if self._given is None or self._cache is None:
            return make()
        return self._cache.get(self._given, key, make)

    def check_checkpointable(self):
        """Why the input's state cannot all be saved, or `None`.

        A pipeline with stateful ops (`tf.random.uniform`, `tf.image.
        random_*`, `tf.py_function`) cannot be serialized as it is; it is
        then read with `ExternalStatePolicy.IGNORE`, so the checkpoint
        still holds its position, buffers and reshuffle seeds, while those
        ops' own state starts again on resume.

        Returns:
            The reason (TensorFlow's message naming the op), or `None`.
        """
        if self._stateless:
            return None
        reason = self._prepared(
            "external state",
            lambda: _keras.dataset_external_state(self._make(0)),
        )
        if reason is not None:
            self._options = tf.data.Options()
            self._options.experimental_external_state_policy = (
                tf.data.experimental.ExternalStatePolicy.IGNORE
            )
        return reason

    def keras_data(self):
        return self.stand_in, None

    def _positioned(self):
        pass  # the restored host iterator is already positioned

    def _dataset(self):
        key = ("host", self.blocks, self._options is not None)
        return self._prepared(key, self._prepare)

    def _prepare(self):
        seed = self._seed if self._state is None else self._state.seed.numpy()
        dataset = self._make(int(seed))
        if self._options is not None:
            dataset = dataset.with_options(self._options)
        dataset = input_options.for_fit(dataset)
        if self.blocks is None:
            return dataset
        return blocks_lib.of(dataset, self.blocks)

    def source(self, keras_iterator):
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
        depend on when checkpoints are written. The next pass's iterator
        a `fit` leaves unread is the first pass's of the model's next
        `fit` on the same dataset (`end`), so successive fits read
        successive passes.

        Args:
            keras_iterator: The iterator Keras handed the train function.

        Returns:
            The host iterator (of batches, or of blocks).
        """
        if keras_iterator is not self._keras_iterator:
            self._keras_iterator = keras_iterator
            if self._host is None:
                self._host = self._dataset()
                current = None if self.resume_at else self._leftover(None)
            else:
                current = self._iterators["next_iterator"]
            # Tracked, so a checkpoint holds them; a restore deferred
            # until now applies here, the next pass's last.
            restored = self._track("iterator", current)
            self._track("next_iterator", None)
            if not restored:
                self._skip_consumed()
        return self._iterators["iterator"]

    def end(self):
        """Leaves the unread next pass's iterator to the next `fit` on the
        same dataset (called when the `fit` ends, even on an error)."""
        unread = self._iterators["next_iterator"]
        if unread is not None:
            self._leftover(unread)

    def _leftover(self, iterator):
        """Swaps the fresh iterator kept for the next `fit` with
        `iterator`; returns the one kept (or `None`)."""
        if self._given is None or self._cache is None:
            return None
        key = ("leftover", self.blocks, self._options is not None)
        return self._cache.swap(self._given, key, iterator)

    def _attach(self, state):
        for name, iterator in self._iterators.items():
            if iterator is not None:
                setattr(state, name, iterator)

    def _track(self, name, iterator):
        """Makes `iterator` (or a new one) the feed's `name`, tracked by
        `state` if made, applying a deferred restore; returns whether it
        applied (or none was due), and warns if the saved iterator is of
        another pipeline (the steps per call, so the blocks, changed)."""
        iterator = iterator or iter(self._host)
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
            iterator = iter(self._host)
            self._iterators[name] = iterator
            setattr(self._state, name, iterator)
            return False

    def _skip_consumed(self):
        skip = self.resume_at[1] if self.resume_at else 0
        iterator = self._iterators["iterator"]
        for _ in range(math.ceil(skip / (self.blocks or 1))):
            if next(iterator, None) is None:
                break


# Stand-ins made, by (cardinality, repr(spec)): a dataset is immutable, and
# making one traces its map function, a third of a short `fit` call's cost.
_STAND_INS = {}
_MAX_STAND_INS = 64


def _stand_in(cardinality, spec):
    """Zeros of `spec`'s structure, `cardinality` long, for Keras to count.

    The same cardinality and spec give the same (immutable) dataset: a
    second `fit` on the same kind of input reuses the first's.
    """
    key = (cardinality, repr(spec))
    if key not in _STAND_INS:
        if len(_STAND_INS) >= _MAX_STAND_INS:
            _STAND_INS.pop(next(iter(_STAND_INS)))
        _STAND_INS[key] = _make_stand_in(cardinality, spec)
    return _STAND_INS[key]


def _make_stand_in(cardinality, spec):
    endless = cardinality == tf.data.INFINITE_CARDINALITY
    unknown = cardinality < 0 and not endless
    count = 1 if endless or unknown else cardinality
    stand_in = _one_element(spec)
    if stand_in is None:
        indices = tf.data.Dataset.range(count)

        def zeros(i):
            # A dynamic 1 keeps the unknown dimensions unknown, as in `spec`.
            one = tf.cast(i * 0 + 1, tf.int32)
            return tf.nest.map_structure(lambda s: _zeros(s, one), spec)

        stand_in = indices.map(zeros)
    else:
        stand_in = stand_in.repeat(count)
    if endless:
        return stand_in.repeat()
    if unknown:
        # Ended by the host data running out, never by the stand-in.
        return stand_in.repeat().filter(lambda *_: True)
    return stand_in


def _one_element(spec):
    """One element of zeros of `spec`, made without a dataset function
    (whose instantiation made each `fit`'s iterator cost milliseconds),
    or `None` where only a map gives the spec exactly: dense tensors whose
    shapes are known, or unknown in the batch dimension alone of each."""
    specs = tf.nest.flatten(spec)
    if not all(isinstance(s, tf.TensorSpec) for s in specs):
        return None
    shapes = [s.shape for s in specs]
    if any(s.rank is None or None in s[1:] for s in shapes):
        return None
    batch_unknown = [s.rank > 0 and s[0] is None for s in shapes]
    if not any(batch_unknown):
        zeros = [tf.zeros(s.shape, s.dtype) for s in specs]
        return tf.data.Dataset.from_tensors(
            tf.nest.pack_sequence_as(spec, zeros)
        )
    if not all(batch_unknown):
        return None
    zeros = [tf.zeros([1, *s.shape[1:]], s.dtype) for s in specs]
    element = tf.nest.pack_sequence_as(spec, zeros)
    # unbatch + batch(1): the batch dimension unknown, as in `spec`.
    return tf.data.Dataset.from_tensors(element).unbatch().batch(1)


def _array_dataset(arrays, batch_size, shuffle):
    """The batches of `arrays`, reshuffled each pass with a seed."""
    tensors = tf.nest.map_structure(tf.convert_to_tensor, arrays)
    count = int(tf.nest.flatten(arrays)[0].shape[0])

    def make(seed):
        indices = tf.data.Dataset.range(count)
        if shuffle:
            indices = indices.shuffle(
                count, seed=seed, reshuffle_each_iteration=True
            )
        indices = indices.batch(batch_size)
        return indices.map(
            lambda i: tf.nest.map_structure(lambda t: tf.gather(t, i), tensors)
        )

    return make, math.ceil(count / batch_size)


def _arrays(x, y, kwargs):
    """`(x, y, sample_weight)` as one structure, or `None` if not arrays."""

    def is_array(value):
        return isinstance(value, np.ndarray) or (
            isinstance(value, (list, tuple, dict))
            and value
            and all(isinstance(v, np.ndarray) for v in tf.nest.flatten(value))
        )

    if not is_array(x) or (y is not None and not is_array(y)):
        return None
    weights = kwargs.get("sample_weight")
    if weights is not None and not isinstance(weights, np.ndarray):
        return None
    lengths = {
        len(a) for a in tf.nest.flatten((x, y, weights)) if a is not None
    }
    if len(lengths) != 1:
        return None  # Keras names the mismatch
    parts = [x] + ([y] if y is not None else [])
    if weights is not None:
        parts.append(weights)
    return tuple(parts)


def _why_not_host(model, kwargs):
    """Why `fit` cannot read a host feed whatever the input, or `None`."""
    if model.run_eagerly:
        return "the model runs eagerly"
    kind = _strategy.kind(model.distribute_strategy)
    if kind in (_strategy.MULTI_WORKER, _strategy.PARAMETER_SERVER):
        return f"the {kind.replace('_', ' ')} strategy reads its own input"
    if kwargs.get("class_weight"):
        return "`class_weight` is applied by Keras's own input pipeline"
    if kwargs.get("validation_split"):
        return "`validation_split` is applied by Keras's own input pipeline"
    if kwargs.get("shuffle") == "batch":
        return "`shuffle='batch'` is Keras's own"
    if keras.distribution.distribution() is not None:
        return "a Keras distribution is set"
    return None


def make(model, x, y, kwargs, steps, cache=None):
    """The feed of one `fit` call.

    Args:
        model: The `SlimModel`.
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.
        steps: The steps per call this `fit` runs, or `None` when they are
            not chosen by the model.
        cache: The model's `InputCache`, or `None`.

    Returns:
        A `HostFeed` or a `Feed` (see the module docstring).
    """
    arrays = _arrays(x, y, kwargs)
    why = _why_not_host(model, kwargs)
    if why is None and arrays is None and not isinstance(x, tf.data.Dataset):
        why = f"the input is a {type(x).__name__}, not a tf.data.Dataset"
    if why is not None:
        return Feed(x, y, kwargs, why=why)
    kwargs = dict(kwargs)
    if arrays is not None:
        batch_size = kwargs.pop("batch_size", None) or 32
        shuffle = kwargs.pop("shuffle", True)
        kwargs.pop("sample_weight", None)
        dataset, cardinality = _array_dataset(arrays, batch_size, shuffle)
        spec = dataset(0).element_spec
        # The shuffle seed (Keras's global seed sets NumPy's); a resumed
        # run restores the interrupted one's from the checkpoint.
        seed = int(np.random.randint(2**31 - 1))
        blocks = (
            steps
            if steps is not None
            and steps > 1
            and blocks_lib.eligible(model, dataset(0), kwargs, steps)
            else None
        )
    else:
        kwargs.pop("shuffle", None)  # means nothing for a dataset
        dataset = lambda seed, x=x: x  # noqa: E731
        cardinality = int(x.cardinality().numpy())
        spec = x.element_spec
        seed = 0
        blocks = (
            steps
            if steps is not None
            and steps > 1
            and blocks_lib.eligible(model, x, kwargs, steps)
            else None
        )
    return HostFeed(
        dataset,
        cardinality,
        spec,
        kwargs,
        blocks=blocks,
        seed=seed,
        stateless=arrays is not None,
        given=x if arrays is None else None,
        cache=cache,
    )
