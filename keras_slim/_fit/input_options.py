"""The input's tf.data threading, chosen by the fit that reads it.
docs/design.md ("A fit call's fixed cost, and the input's threads") says
how and why.
"""

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf

#: Dataset kinds (tf.data's classes, without their leading `_`) that only
#: move tensors already in memory.
CHEAP_DATASETS = frozenset(
    {
        "BatchDataset",
        "CacheDataset",
        "ConcatenateDataset",
        "FilterDataset",
        "MapDataset",
        "OptionsDataset",
        "PrefetchDataset",
        "RangeDataset",
        "RepeatDataset",
        "RestructuredDataset",
        "ShuffleDataset",
        "SkipDataset",
        "TakeDataset",
        "TensorDataset",
        "TensorSliceDataset",
        "UnbatchDataset",
        "ZipDataset",
    }
)

# Ops inside a map or filter function that make it real work (or may: a
# call of another function, whose ops are not looked into).
_WORK = (
    "Decode",
    "Encode",
    "ReadFile",
    "PyFunc",
    "Resize",
    "Crop",
    "Random",
    "PartitionedCall",
)


def walk(dataset):
    """Every dataset of `dataset`'s pipeline, once, with the functions it
    runs, walked through its Python objects (`_keras.dataset_inputs`).

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        A list of `(dataset, functions)` (`functions`: the concrete
        functions of its map or filter), or `None` when a dataset's inputs
        cannot be listed.
    """
    found, stack, seen = [], [dataset], set()
    while stack:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        found.append((current, _keras.dataset_functions(current)))
        inputs = _keras.dataset_inputs(current)
        if inputs is None:
            return None
        stack.extend(inputs)
    return found


def is_cheap(dataset):
    """Whether `dataset` only moves tensors already in memory.

    The pipeline is walked through its Python objects (`walk`), not
    serialized: serializing would copy the tensors of an
    in-memory dataset at every `fit`.

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        `True` when every dataset in the pipeline is one of
        `CHEAP_DATASETS` and no function it runs decodes, reads files,
        calls Python, resizes, crops or draws random numbers; `False`
        otherwise (a parallel map, files, a generator, a function that
        calls another, a pipeline whose inputs cannot be listed).
    """
    pipeline = walk(dataset)
    if pipeline is None:
        return False
    for current, functions in pipeline:
        if _keras.dataset_kind(current) not in CHEAP_DATASETS:
            return False
        if any(_works(function) for function in functions):
            return False
    return True


def _works(function):
    """Whether a dataset function's graph does real work (`_WORK`)."""
    ops = function.graph.get_operations()
    return any(word in op.type for op in ops for word in _WORK)


def for_fit(dataset):
    """`dataset`, with one thread and no autotune when it is cheap.

    Args:
        dataset: A `tf.data.Dataset` a fit reads on the host.

    Returns:
        The dataset, with options for a cheap input (those the user left
        unset), or unchanged.
    """
    return _choose(dataset)


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
