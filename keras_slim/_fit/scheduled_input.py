"""What each call scheduled on a parameter-server worker reads.
docs/how_it_works.md ("Parameter servers: no batch lost or repeated")
gives the guarantee.
"""

from keras_slim import _strategy
from keras_slim import checks
from keras_slim._backend import tensorflow as tf


def dense(element_spec):
    """Whether every component of `element_spec` is a dense tensor (what a
    block stacks).

    Args:
        element_spec: A dataset's element spec.

    Returns:
        A boolean.
    """
    specs = tf.nest.flatten(element_spec)
    return bool(specs) and all(type(s) is tf.TensorSpec for s in specs)


def _stack(*tensors):
    return tf.stack(tensors)


def blocks(batches):
    """`batches` as blocks of consecutive batches of the same shapes.

    Args:
        batches: A list of batches (nests of dense tensors).

    Returns:
        A list of `(block, count)`: each tensor of `block` stacks `count`
        batches' along a new leading axis.
    """
    groups = []
    for batch in batches:
        shapes = [tuple(t.shape) for t in tf.nest.flatten(batch)]
        if groups and groups[-1][0] == shapes:
            groups[-1][1].append(batch)
        else:
            groups.append((shapes, [batch]))
    return [
        (tf.nest.map_structure(_stack, *group), len(group))
        for _, group in groups
    ]


class CoordinatorReads:
    """The coordinator reads each call's batches and sends them.

    Args:
        iterator: The run's host iterator of batches (`HostFeed.source`).

    Example:
    ```python
    reads = CoordinatorReads(run.feed.source(token))
    calls, read = reads.calls(10)  # [(block, 10)], 10
    for args in calls:
        coord.schedule(loops.fed_steps_function(model), args=args)
    ```
    """

    def __init__(self, iterator):
        self._iterator = iterator

    def calls(self, steps):
        """The arguments of the calls that run the next `steps` steps.

        Args:
            steps: Positive integer: the steps to run.

        Returns:
            `(calls, read)`: a list of `(block, count)` argument tuples
            (one, unless the batches' shapes change, e.g. at a short last
            batch) and the batches read: fewer than `steps` when the data
            ran out.
        """
        batches = []
        for _ in range(steps):
            batch = next(self._iterator, None)
            if batch is None:
                break
            batches.append(batch)
        return blocks(batches), len(batches)


class WorkerReads:
    """Each worker reads its own iterator (a dataset function's).

    Args:
        iterator: The per-worker iterator (`create_per_worker_dataset`).

    Example:
    ```python
    reads = WorkerReads(iter(coord.create_per_worker_dataset(dataset_fn)))
    calls, read = reads.calls(10)  # [(iterator, 10)], 10
    ```
    """

    def __init__(self, iterator):
        self.iterator = iterator

    def calls(self, steps):
        """The arguments of the call that runs the next `steps` steps.

        Args:
            steps: Positive integer: the steps to run.

        Returns:
            `([(iterator, steps)], steps)`: the workers' datasets are
            repeated, they do not run out.
        """
        return [(self.iterator, steps)], steps


def why_workers_read(model, x):
    """Why the workers read `x` themselves, or `None` when the coordinator
    reads it and sends each call its batches (`scheduled_input.py`): a
    `tf.data.Dataset` of dense batches, with asynchronous steps.

    Args:
        model: The `SlimModel`, under `ParameterServerStrategy`.
        x: `fit`'s data argument.

    Returns:
        A reason (for the warning of `Checkpoints`: the position is then
        not saved), or `None`.
    """
    if not isinstance(x, tf.data.Dataset):
        return (
            "parameter-server workers read their own data from a dataset "
            "function; pass a tf.data.Dataset for the coordinator to read "
            "and save its position"
        )
    if _strategy.mode(model.distribute_strategy).sync is not None:
        return (
            "synchronous steps over parameter servers read the dataset on "
            "the workers"
        )
    if not dense(x.element_spec):
        return (
            "the dataset has components that are not dense tensors, which "
            "parameter-server workers read on their own"
        )
    return None


def per_worker_dataset(x, batch_size, strategy):
    """What `create_per_worker_dataset` takes, and one batch for building.

    Args:
        x: `fit`'s data argument: a `tf.data.Dataset`, or a dataset
            function (`input_context -> tf.data.Dataset`).
        batch_size: `fit`'s `batch_size` (`None` with a dataset).
        strategy: The `ParameterServerStrategy`.

    Returns:
        `(dataset_fn, sample)`: the dataset or the function each worker
        calls, and one batch of it.

    Raises:
        ValueError: for a `batch_size` with a dataset, a function that
            does not return a dataset, or another kind of `x`.
    """
    if isinstance(x, tf.data.Dataset):
        checks.no_batch_size_for_dataset(batch_size)
        return x, next(iter(x))
    if callable(x):
        sample = x(tf.distribute.InputContext())
        if not isinstance(sample, tf.data.Dataset):
            raise checks.invalid(
                "x", x, "a dataset function returning a tf.data.Dataset"
            )
        # TF's pattern: each worker calls the function with its context.
        return (
            lambda: strategy.distribute_datasets_from_function(x),
            next(iter(sample)),
        )
    raise checks.invalid(
        "x",
        type(x).__name__,
        "a tf.data.Dataset or a dataset function (input_context -> "
        "tf.data.Dataset) under ParameterServerStrategy",
    )
