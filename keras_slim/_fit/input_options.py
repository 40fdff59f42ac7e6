"""The input's tf.data threading, chosen by the fit that reads it.

tf.data runs a pipeline on threads of its own: a private pool as large as
the machine's cores, autotune's optimization thread, prefetch threads.
For an input that costs nothing to produce (tensors in memory, sliced,
shuffled, batched, repeated, gathered) those threads have no work worth
what they cost: starting them with each iterator (autotune's model
especially) made a one-step `fit` of a small MLP cost 7.6 ms instead of
4.0, with calls of 25 ms now and then, and a 300-step fit run 12% fewer
steps/s (bench/fit_call.py). Such an input here gets one thread
(`threading.private_threadpool_size = 1`, `max_intra_op_parallelism =
1`) and no autotune; an input that reads files, decodes images, calls
Python or maps in parallel keeps tf.data's defaults, where those threads
do the work. Options the user set on the dataset are kept.
"""

import tensorflow as tf

#: Dataset ops that only move tensors already in memory.
CHEAP_DATASETS = frozenset(
    {
        "BatchDataset",
        "BatchDatasetV2",
        "CacheDataset",
        "CacheDatasetV2",
        "ConcatenateDataset",
        "FilterDataset",
        "FinalizeDataset",
        "MapDataset",
        "ModelDataset",
        "OptionsDataset",
        "PrefetchDataset",
        "RangeDataset",
        "RepeatDataset",
        "ShuffleAndRepeatDatasetV2",
        "ShuffleDataset",
        "ShuffleDatasetV2",
        "ShuffleDatasetV3",
        "SkipDataset",
        "TakeDataset",
        "TensorDataset",
        "TensorSliceDataset",
        "ZipDataset",
    }
)

# Ops inside a map or filter function that make it real work.
_WORK = ("Decode", "Encode", "ReadFile", "PyFunc", "Resize", "Crop", "Random")


def is_cheap(dataset):
    """Whether `dataset` only moves tensors already in memory.

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        `True` when every dataset op is one of `CHEAP_DATASETS` and no
        function it runs decodes, reads files, calls Python, resizes,
        crops or draws random numbers; `False` otherwise, or when the
        pipeline cannot be serialized (a generator).
    """
    try:
        graph = tf.compat.v1.GraphDef.FromString(
            dataset._as_serialized_graph().numpy()
        )
    except (tf.errors.OpError, ValueError, TypeError):
        return False
    ops = {node.op for node in graph.node if "Dataset" in node.op}
    if not ops <= CHEAP_DATASETS:
        return False
    for function in graph.library.function:
        for node in function.node_def:
            if any(word in node.op for word in _WORK):
                return False
    return True


# The attribute holding what `for_fit` gave for a dataset: a second `fit`
# on the same (immutable) dataset does not serialize it again. (A cycle
# through the chosen dataset's input, which the garbage collector frees.)
_CHOSEN = "_keras_slim_for_fit"


def for_fit(dataset):
    """`dataset`, with one thread and no autotune when it is cheap.

    Args:
        dataset: A `tf.data.Dataset` a fit reads on the host.

    Returns:
        The dataset, with options for a cheap input (those the user left
        unset), or unchanged; the same for the same dataset.
    """
    chosen = getattr(dataset, _CHOSEN, None)
    if chosen is None:
        chosen = _choose(dataset)
        try:
            setattr(dataset, _CHOSEN, chosen)
        except AttributeError:  # a dataset that takes no attribute
            pass
    return chosen


def _choose(dataset):
    if not is_cheap(dataset):
        return dataset
    return _one_thread(dataset)


def _one_thread(dataset):
    """`dataset` with one thread and no autotune, where the user left
    those options unset."""
    current = dataset.options()
    options = tf.data.Options()
    changed = False
    if current.threading.private_threadpool_size is None:
        options.threading.private_threadpool_size = 1
        changed = True
    if current.threading.max_intra_op_parallelism is None:
        options.threading.max_intra_op_parallelism = 1
        changed = True
    if current.autotune.enabled is None:
        options.autotune.enabled = False
        changed = True
    return dataset.with_options(options) if changed else dataset
