"""The data feed of one `fit`: what Keras iterates, what the loop reads."""

import math

import keras
import numpy as np

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf
from keras_slim._fit import blocks as blocks_lib
from keras_slim._fit import input_options
from keras_slim._fit import worker_input
from keras_slim._fit.position import InputPosition


class Feed:
    """Keras's own feed: `fit` iterates the data as given.

    The train function reads Keras's iterators. The position in the data
    cannot be saved; after a resume, the first call skips the batches the
    interrupted run had consumed in its epoch (`InputPosition.skips`),
    which gives the same data only if the input yields the same batches
    each time it is made. For a `keras.utils.PyDataset` (`by_index`) the
    saved epoch and step are its position: the index of the next batch.

    Args:
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.
        position: The run's `InputPosition`.
        why: Why the position cannot be saved, for the warning a
            `Checkpoints` callback logs. Defaults to `None`.

    Attributes:
        by_index: Whether Keras reads `x` by batch index (a
            `keras.utils.PyDataset`).
    """

    reads_host = False
    reads_blocks = False

    def __init__(self, x, y, kwargs, *, position, why=None):
        self.x = x
        self.y = y
        self.kwargs = kwargs
        self.why = why
        self.position = position
        self.by_index = isinstance(x, keras.utils.PyDataset)

    def end(self):
        """Called when the `fit` ends, even on an error (nothing here)."""

    def keras_data(self):
        """`(x, y)` as Keras's `fit` is to iterate them."""
        return self.x, self.y

    def check_checkpointable(self):
        """Why the input's state cannot all be saved, or `None`."""
        return self.why

    def skip(self, iterator):
        """Consumes the batches a resume skips from Keras's iterator."""
        skips, self.position.skips = self.position.skips, 0
        for _ in range(skips):
            next(iterator)


class HostFeed(Feed):
    """The run reads the data from a host iterator it owns.

    Its run's `InputPosition` holds the host iterators and says which one
    a call reads (`source`).

    Args:
        dataset: A function of the shuffle seed returning the batched
            `tf.data.Dataset` to read.
        cardinality: The dataset's number of batches (or
            `tf.data.INFINITE_CARDINALITY`, `UNKNOWN_CARDINALITY`).
        element_spec: The dataset's element spec.
        kwargs: `fit`'s other keyword arguments, for Keras.
        position: The run's `InputPosition`.
        blocks: Batches per block, or `None` to read one batch per step.
        stateless: Whether the pipeline is known to hold no stateful op
            (one keras_slim made from arrays).
        given: The `tf.data.Dataset` given to `fit`, whose preparation
            `cache` keeps, or `None` (arrays: a new pipeline each fit).
        cache: The model's `InputCache`, or `None`.
        share: A function of the prepared dataset returning the part this
            worker reads (`worker_input.share`, under
            `MultiWorkerMirroredStrategy`), or `None` to read it all.
    """

    reads_host = True

    def __init__(
        self,
        dataset,
        cardinality,
        element_spec,
        kwargs,
        *,
        position,
        blocks,
        stateless=False,
        given=None,
        cache=None,
        share=None,
    ):
        # The host pipeline shuffles; Keras's data is never read.
        super().__init__(
            None, None, dict(kwargs, shuffle=False), position=position
        )
        self._make = dataset
        self.blocks = blocks
        self.reads_blocks = blocks is not None
        self.element_spec = element_spec
        self._cardinality = int(cardinality)
        self._host = None
        self._stateless = stateless
        self._options = None
        self._given = given
        self._cache = cache
        self._share = share
        position.reads_host(self._new_iterator, per_read=blocks or 1)

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
        # Keras counts the batches of what it iterates; the train function
        # reads the host feed, not Keras's iterator.
        return _keras.UnreadDataset(self.element_spec, self._cardinality), None

    def _dataset(self):
        key = ("host", self.blocks, self._options is not None)
        return self._prepared(key, self._prepare)

    def _prepare(self):
        dataset = self._make(self.position.seed)
        if self._options is not None:
            dataset = dataset.with_options(self._options)
        dataset = input_options.for_fit(dataset)
        if self._share is not None:
            dataset = self._share(dataset)
        if self.blocks is None:
            return dataset
        return blocks_lib.of(dataset, self.blocks)

    def _new_iterator(self):
        if self._host is None:
            self._host = self._dataset()
        return iter(self._host)

    def source(self, keras_iterator):
        """The host iterator for the pass Keras's iterator stands for
        (`InputPosition.iterator`). The first pass of a `fit` that does
        not resume reads the passes an earlier `fit` on the same dataset
        left unread (`end`), so successive fits read successive passes.

        Args:
            keras_iterator: The iterator Keras handed the train function.

        Returns:
            The host iterator (of batches, or of blocks).
        """
        return self.position.iterator(
            keras_iterator, lambda: self._swap_leftover(None)
        )

    def end(self):
        """Leaves the passes this `fit` did not read to the next `fit` on
        the same dataset (called when the `fit` ends, even on an error)."""
        unread = self.position.left_over()
        if unread is not None:
            self._swap_leftover(unread)

    def _swap_leftover(self, iterators):
        """Swaps the unread iterators kept for the next `fit` with
        `iterators`; returns the ones kept (or `None`)."""
        if self._given is None or self._cache is None:
            return None
        key = ("leftover", self.blocks, self._options is not None)
        return self._cache.swap(self._given, key, iterators)


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
    if kwargs.get("class_weight"):
        return "`class_weight` is applied by Keras's own input pipeline"
    if kwargs.get("validation_split"):
        return "`validation_split` is applied by Keras's own input pipeline"
    if kwargs.get("shuffle") == "batch":
        return "`shuffle='batch'` is Keras's own"
    if keras.distribution.distribution() is not None:
        return "a Keras distribution is set"
    return None


def make(model, x, y, kwargs, steps, cache=None, *, mode):
    """The feed of one `fit` call.

    Args:
        model: The `SlimModel`.
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.
        steps: The steps per call this `fit` runs, or `None` when they are
            not chosen by the model.
        cache: The model's `InputCache`, or `None`.
        mode: The run's deployment `Mode` (`Run.mode`).

    Returns:
        A `HostFeed` or a `Feed` (see the module docstring), with its
        new `InputPosition` (`position`), which the run holds.
    """
    arrays = _arrays(x, y, kwargs)
    why = _why_not_host(model, kwargs)
    if why is None and arrays is None and not isinstance(x, tf.data.Dataset):
        why = f"the input is a {type(x).__name__}, not a tf.data.Dataset"
    strategy = model.distribute_strategy
    several = mode.reads_worker_shares
    if why is None and several:
        why = (
            worker_input.why_not(x, strategy)
            if arrays is None
            else "under the multi worker strategy each worker shuffles "
            "its own copy of arrays; pass a tf.data.Dataset"
        )
    if why is not None:
        return Feed(x, y, kwargs, why=why, position=InputPosition())
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
    position = InputPosition(
        seed=seed, epoch_is_pass=kwargs.get("steps_per_epoch") is None
    )
    return HostFeed(
        dataset,
        cardinality,
        spec,
        kwargs,
        position=position,
        blocks=blocks,
        stateless=arrays is not None,
        given=x if arrays is None else None,
        cache=cache,
        share=worker_input.share(strategy) if several else None,
    )
