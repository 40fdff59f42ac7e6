"""The data feed of one `fit`: what Keras iterates, what the loop reads.

Every `SlimModel.fit` has a feed, held by its run (`Run.feed`). `make`
picks it: a `Feed` hands Keras the data as given and the train function
reads Keras's iterators (arrays, generators, datasets at one step per
call); a `BlockFeed` reads a dataset a block of batches at a time.

Blocks: feeding the batches of several steps with one read of the data.

A read of a `tf.data` iterator (`IteratorGetNext`) is a fixed cost per
step, much of a small model's step (bench/step_floor.py measures it);
TF-Slim's benchmark peer read `tf.constant` tensors and paid nothing. When
`SlimModel.fit` runs `k > 1` steps per call on a `tf.data.Dataset`, it
reads blocks of `k` batches instead (`dataset.batch(k)`, or
`ragged_batch(k)` where the batch dimension varies, e.g. a short last
batch) and the train function slices batch `i` out of the block in the
graph: one read per call instead of `k` (figures in docs/benchmarks.md).

Keras's `fit` still runs its own epoch loop, which counts steps and makes
an iterator for each pass over the data (and one more at each epoch's
end, which the next epoch replaces). It is handed a stand-in dataset of
the same length and structure, made of zeros it never reads (under the
default strategy Keras builds nothing from the data), whose `__iter__`
starts a pass over the real blocks each time Keras makes an iterator. So
the real dataset is iterated as many times as Keras would have iterated
it, and a dataset reshuffled with a seed sees the same orders (tested
against one step per call).

Used only where it changes nothing but speed: `steps_per_execution`
chosen by the model ("auto"), the default strategy (no `MirroredStrategy`
or multi-worker: their iterators are distributed), a dataset of known or
infinite length with dense components whose only unknown dimension is the
batch one, and no `class_weight` (Keras would transform the dataset).
A block holds `k` batches in memory at once, so only small inputs, where a
read is much of a step, are read in blocks: a block of at most 64 MiB
where the batch size is known; at most 4 KiB per example where it is not
(32 batches of 256 examples: at most 32 MiB).
"""

import keras
import tensorflow as tf

from keras_slim import _keras

# Blocks pay where a read costs much of a step, i.e. for small inputs: at
# most this many bytes per block (batch size known), or per example
# (batch size unknown).
MAX_BLOCK_BYTES = 64 << 20
MAX_EXAMPLE_BYTES = 4 << 10


def _dense_spec(spec):
    if type(spec) is not tf.TensorSpec or spec.shape.rank in (None, 0):
        return False
    if spec.dtype in (tf.string, tf.variant, tf.resource):
        return False
    return spec.shape[1:].is_fully_defined()


def _small(specs, steps):
    """Whether a block of `steps` batches stays small (see above)."""
    if all(s.shape[0] is not None for s in specs):
        size = sum(s.shape.num_elements() * s.dtype.size for s in specs)
        return size * steps <= MAX_BLOCK_BYTES
    example = sum(s.shape[1:].num_elements() * s.dtype.size for s in specs)
    return example <= MAX_EXAMPLE_BYTES


def eligible(model, x, kwargs, steps):
    """Whether `fit(x, **kwargs)` on `model` may read blocks of batches.

    Args:
        model: The `SlimModel`.
        x: `fit`'s data argument.
        kwargs: `fit`'s other keyword arguments.
        steps: The steps per call (`k`), the batches of a block.

    Returns:
        A boolean.
    """
    if not isinstance(x, tf.data.Dataset) or kwargs.get("class_weight"):
        return False
    if _keras.distribute_strategy_if_set(model) is not None or (
        tf.distribute.has_strategy()
    ):
        return False
    if keras.distribution.distribution() is not None:
        return False
    cardinality = int(x.cardinality().numpy())
    if cardinality < 0 and cardinality != tf.data.INFINITE_CARDINALITY:
        return False
    specs = tf.nest.flatten(x.element_spec)
    if not specs or not all(_dense_spec(s) for s in specs):
        return False
    return _small(specs, steps)


def _zeros(spec, one):
    shape = [one if d is None else d for d in spec.shape]
    return tf.zeros(tf.stack(shape), spec.dtype)


class Feed:
    """Keras's own feed: `fit` iterates the data as given.

    Args:
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.

    Example:
    ```python
    feed = Feed(x, y, kwargs)
    model.fit(*feed.keras_data(), **feed.kwargs)
    ```
    """

    reads_blocks = False

    def __init__(self, x, y, kwargs):
        self.x = x
        self.y = y
        self.kwargs = kwargs

    def keras_data(self):
        """`(x, y)` as Keras's `fit` is to iterate them."""
        return self.x, self.y


class BlockFeed(Feed):
    """The blocks of `steps` batches of a dataset, one pass per Keras pass.

    Args:
        dataset: A dataset `eligible` accepted.
        steps: The steps per call (`k`).
        kwargs: `fit`'s other keyword arguments.

    Example:
    ```python
    feed = BlockFeed(dataset, 30, kwargs)
    model.fit(*feed.keras_data(), ...)  # the train function calls:
    blocks = feed.blocks_for(keras_iterator)
    ```
    """

    reads_blocks = True

    def __init__(self, dataset, steps, kwargs):
        super().__init__(dataset, None, kwargs)
        self.steps = steps
        spec = dataset.element_spec
        static = all(s.shape.is_fully_defined() for s in tf.nest.flatten(spec))
        self.blocks = (
            dataset.batch(steps) if static else dataset.ragged_batch(steps)
        )
        cardinality = int(dataset.cardinality().numpy())
        endless = cardinality == tf.data.INFINITE_CARDINALITY
        indices = tf.data.Dataset.range(1 if endless else cardinality)

        def zeros(i):
            # A dynamic 1 keeps the batch dimension unknown, as in `spec`.
            one = tf.cast(i * 0 + 1, tf.int32)
            return tf.nest.map_structure(lambda s: _zeros(s, one), spec)

        stand_in = indices.map(zeros)
        stand_in = stand_in.repeat() if endless else stand_in
        stand_in.__class__ = _stand_in_class(type(stand_in))
        stand_in._feed = self
        self.stand_in = stand_in
        self._passes = []

    def keras_data(self):
        return self.stand_in, None

    def _new_pass(self, keras_iterator):
        # Keras made an iterator: a pass over the real data starts too, so
        # passes are counted as Keras counts them (a seeded reshuffle
        # draws its order when an iterator is made, used or not).
        self._passes.append((keras_iterator, iter(self.blocks)))

    def blocks_for(self, keras_iterator):
        """The iterator of blocks for the pass Keras's iterator stands for."""
        for index, (made_for, blocks) in enumerate(self._passes):
            if made_for is keras_iterator:
                del self._passes[:index]  # passes Keras left unused
                return blocks
        self._new_pass(keras_iterator)
        return self.blocks_for(keras_iterator)


def make(model, x, y, kwargs, steps):
    """The feed of one `fit` call.

    Args:
        model: The `SlimModel`.
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.
        steps: The steps per call this `fit` runs, or `None` when they are
            not chosen by the model.

    Returns:
        A `BlockFeed` where blocks change nothing but speed (see the
        module docstring), else a `Feed`.
    """
    if (
        steps is not None
        and steps > 1
        and y is None
        and eligible(model, x, kwargs, steps)
    ):
        return BlockFeed(x, steps, kwargs)
    return Feed(x, y, kwargs)


_STAND_IN_CLASSES = {}


def _stand_in_class(dataset_class):
    """`dataset_class`, telling its `BlockFeed` of each iterator made."""
    if dataset_class not in _STAND_IN_CLASSES:

        def __iter__(self):
            iterator = dataset_class.__iter__(self)
            self._feed._new_pass(iterator)
            return iterator

        _STAND_IN_CLASSES[dataset_class] = type(
            "StandIn" + dataset_class.__name__,
            (dataset_class,),
            {"__iter__": __iter__},
        )
    return _STAND_IN_CLASSES[dataset_class]


def block_size(block):
    """The number of batches in `block` (a scalar int32 tensor)."""
    first = tf.nest.flatten(block, expand_composites=False)[0]
    if isinstance(first, tf.RaggedTensor):
        return tf.cast(first.nrows(), tf.int32)
    return tf.shape(first)[0]


def batch(block, i):
    """Batch `i` of `block`, as the dataset's iterator would have given it."""
    return tf.nest.map_structure(lambda t: t[i], block)
