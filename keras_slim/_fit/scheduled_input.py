"""What each call scheduled on a parameter-server worker reads.

Two ways, chosen per `fit` (`parameter_server.why_workers_read`):

- `CoordinatorReads`: the coordinator reads the batches of each call from
  the run's host iterator of the `tf.data.Dataset` given to `fit` (its
  position is part of every checkpoint, `keras_slim/_fit/position.py`),
  stacks them into a block and passes the block as the call's argument.
  The batches a call reads are fixed when it is scheduled, so a call run
  again (a lost worker's) reads the same ones, and the batches of the
  steps that completed are exactly the ones read before the position a
  save writes (saves wait for the calls in flight first);
- `WorkerReads`: each worker reads its own iterator of a dataset function
  (TensorFlow's `create_per_worker_dataset`); nothing on the coordinator
  knows which batches ran, so no position is saved.

docs/how_it_works.md ("Parameter servers: no batch lost or repeated") gives the
guarantee.
"""

import tensorflow as tf


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
