"""Blocks: the batches of several steps, fed with one read of the data.
docs/design.md ("Blocks of batches") says how and why.
"""

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf

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
    cardinality = int(x.cardinality().numpy())
    if cardinality < 0 and cardinality != tf.data.INFINITE_CARDINALITY:
        return False
    specs = tf.nest.flatten(x.element_spec)
    if not specs or not all(_dense_spec(s) for s in specs):
        return False
    return _small(specs, steps)


def of(dataset, steps):
    """`dataset`'s batches in blocks of `steps` (ragged where the batch
    dimension varies, e.g. a short last batch).

    Args:
        dataset: A batched `tf.data.Dataset`.
        steps: Batches per block.

    Returns:
        The `tf.data.Dataset` of blocks.
    """
    static = all(
        s.shape.is_fully_defined()
        for s in tf.nest.flatten(dataset.element_spec)
    )
    return dataset.batch(steps) if static else dataset.ragged_batch(steps)


def block_size(block):
    """The number of batches in `block` (a scalar int32 tensor)."""
    first = tf.nest.flatten(block, expand_composites=False)[0]
    if isinstance(first, tf.RaggedTensor):
        return tf.cast(first.nrows(), tf.int32)
    return tf.shape(first)[0]


def batch(block, i):
    """Batch `i` of `block`, as the dataset's iterator would have given it."""
    return tf.nest.map_structure(lambda t: t[i], block)
