"""Feeding the batches of several steps with one read of the data.

A read of a `tf.data` iterator (`IteratorGetNext`) costs about 50 us on
the 2-core CPU of bench/step_floor.py, a third of the small MLP's step;
TF-Slim's benchmark peer read `tf.constant` tensors and paid nothing. When
`SlimModel.fit` runs `k > 1` steps per call on a `tf.data.Dataset`, it
reads blocks of `k` batches instead (`dataset.batch(k)`, or
`ragged_batch(k)` where the batch dimension varies, e.g. a short last
batch) and the train function slices batch `i` out of the block in the
graph: one read per call instead of `k` (bench/step_floor.py: 174 -> 143
us per step of the MLP in fit's call).

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
    if model._distribute_strategy is not None or tf.distribute.has_strategy():
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


class Feeder:
    """The blocks of `steps` batches of `dataset`, one pass per Keras pass.

    Args:
        dataset: A dataset `eligible` accepted.
        steps: The steps per call (`k`).

    Example:
    ```python
    feeder = Feeder(dataset, steps=30)
    model.fit(feeder.stand_in, ...)  # the train function calls:
    blocks = feeder.blocks_for(keras_iterator)
    ```
    """

    def __init__(self, dataset, steps):
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
        stand_in._keras_slim_feeder = self
        self.stand_in = stand_in
        self._passes = []

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


_STAND_IN_CLASSES = {}


def _stand_in_class(dataset_class):
    """`dataset_class`, telling its `Feeder` of each iterator made over it."""
    if dataset_class not in _STAND_IN_CLASSES:

        def __iter__(self):
            iterator = dataset_class.__iter__(self)
            self._keras_slim_feeder._new_pass(iterator)
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
