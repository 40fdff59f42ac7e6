"""The share of the data one worker reads under MultiWorkerMirroredStrategy.

Under `MultiWorkerMirroredStrategy`, each worker of a `SlimModel.fit` reads
its own share of the `tf.data.Dataset` on the host (a `feed.HostFeed`), so
its input position can be saved beside the weights like any other host
iterator's. The share holds the batches Keras's own `fit` would have fed
that worker: `strategy.experimental_distribute_dataset`'s rebatch into one
batch per replica of the cluster, then its auto-shard by the dataset's
`AutoShardPolicy` (`_keras.worker_share`). A worker then runs each step on
its own batch: its one replica's (`keras_slim/_fit/replicas.py`).

Every worker must read as many batches as the others, or one would wait
for the others in an all-reduce after its data ran out (Keras's
distributed iterator agrees about that with one more all-reduce per
step). That holds for a repeated dataset and for one sharded by data (one
batch per global batch on each worker), not for one whose files are
shared out, so that input is read by Keras as before (`why_not`).
"""

import tensorflow as tf

from keras_slim import _keras
from keras_slim._fit import input_options

_POLICY = tf.data.experimental.AutoShardPolicy
# Dataset kinds and ops that read files (what AutoShardPolicy.AUTO shards
# by file when it finds them).
_FILE_READERS = ("RecordDataset", "TextLineDataset", "ListFiles", "Matching")


def why_not(dataset, strategy):
    """Why a worker cannot read its share of `dataset` on the host, or
    `None`.

    Args:
        dataset: The `tf.data.Dataset` given to `fit`.
        strategy: The model's `MultiWorkerMirroredStrategy`, over several
            workers.

    Returns:
        A reason for the checkpoints' warning, or `None`.
    """
    context = _keras.worker_input_context(strategy)
    if context.num_replicas_in_sync != context.num_input_pipelines:
        return (
            "each worker of the multi worker strategy has "
            f"{context.num_replicas_in_sync // context.num_input_pipelines} "
            "replicas; a saved position needs one per worker"
        )
    if int(dataset.cardinality().numpy()) == tf.data.INFINITE_CARDINALITY:
        return None
    policy = dataset.options().experimental_distribute.auto_shard_policy
    if policy in (_POLICY.DATA, _POLICY.OFF):
        return None
    if policy == _POLICY.AUTO and not reads_files(dataset):
        return None
    return (
        "the multi worker strategy shares the files of this finite "
        f"dataset out to the workers (AutoShardPolicy.{policy.name}), "
        "whose numbers of batches may then differ; repeat() it, or set "
        "AutoShardPolicy.DATA, for an exact resume"
    )


def share(strategy):
    """The function that makes this worker's share of a dataset.

    Args:
        strategy: The model's `MultiWorkerMirroredStrategy`, over several
            workers, with one replica per worker (`why_not`).

    Returns:
        A function of the batched `tf.data.Dataset` given to `fit`
        returning the worker's: one batch per global batch, its part.
    """
    context = _keras.worker_input_context(strategy)
    return lambda dataset: _keras.worker_share(dataset, context)


def reads_files(dataset):
    """Whether `dataset`'s pipeline reads files, as far as can be seen.

    The pipeline is walked through its Python objects (tf.data's
    `_inputs()`) and the functions its datasets run.

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        `True` when a dataset or a function in the pipeline reads or
        lists files, or when the pipeline cannot be walked; else `False`.
    """
    pipeline = input_options.walk(dataset)
    if pipeline is None:
        return True
    return any(
        any(word in type(current).__name__ for word in _FILE_READERS)
        or any(_function_reads(function) for function in functions)
        for current, functions in pipeline
    )


def _function_reads(function):
    """Whether a dataset function's ops, or those of the functions it
    calls (a reader's own `flat_map`), read files."""
    graph = function.graph.as_graph_def()
    ops = [node.op for node in graph.node]
    for nested in graph.library.function:
        ops.extend(node.op for node in nested.node_def)
    return any(word in op for op in ops for word in _FILE_READERS)
