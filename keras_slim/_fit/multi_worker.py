"""Building a model for `fit` under `MultiWorkerMirroredStrategy`."""

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf


def _one_replica(strategy, value):
    if isinstance(value, tf.distribute.DistributedValues):
        return strategy.experimental_local_results(value)[0]
    return value


def build_on_one_replica(model, iterator=None, data_batch=None):
    """`Trainer._maybe_symbolic_build`, on one replica's batch.

    Args:
        model: The model, made under a strategy (else nothing is done, as
            in Keras).
        iterator: Keras's epoch iterator, or `None`.
        data_batch: A batch, when there is no iterator.
    """
    if _keras.distribute_strategy_if_set(model) is None:
        return
    strategy = model.distribute_strategy
    if iterator is not None:
        for _, _, it in iterator:
            if isinstance(it, _keras.UnreadIterator):
                data_batch = it.element_spec  # a host feed's
                break
            batch = next(it)
            data_batch = tf.nest.map_structure(
                lambda v: _one_replica(strategy, v), batch
            )
            break
    with strategy.scope():
        _keras.symbolic_build(model, data_batch)
