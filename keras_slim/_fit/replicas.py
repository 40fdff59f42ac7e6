"""A global batch split across the replicas of one process."""

from keras_slim._backend import tensorflow as tf


def split(batch, strategy, *, mode):
    """A global batch as per-replica batches, as `tf.distribute` splits it.

    Each replica gets `ceil(b / n)` consecutive examples of a batch of `b`
    (the last ones fewer, or none), as `experimental_distribute_dataset`
    rebatches. Outside a strategy with several replicas, and under
    `MultiWorkerMirroredStrategy` (a worker's batch is its replica's),
    `batch` itself.

    Args:
        batch: A structure of tensors with the batch dimension first.
        strategy: The model's strategy.
        mode: The run's deployment `Mode` (`Run.mode`).

    Returns:
        Per-replica values, or `batch`.
    """
    count = mode.replicas_in_sync
    if count == 1 or mode.reads_worker_shares:
        return batch
    first = tf.nest.flatten(batch)[0]
    size = tf.shape(first, out_type=tf.int64)[0]
    local = (size + count - 1) // count

    def part(context):
        replica = tf.cast(context.replica_id_in_sync_group, tf.int64)
        begin = tf.minimum(replica * local, size)
        end = tf.minimum(begin + local, size)
        return tf.nest.map_structure(lambda t: t[begin:end], batch)

    return strategy.experimental_distribute_values_from_function(part)
