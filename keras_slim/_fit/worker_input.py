"""The share of the data one worker reads under MultiWorkerMirroredStrategy."""

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf
from keras_slim._fit import input_options

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
    shard = tf.data.experimental.AutoShardPolicy
    if policy in (shard.DATA, shard.OFF):
        return None
    if policy == shard.AUTO and not reads_files(dataset):
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
