"""Helpers for testing training code on real local clusters."""

import contextlib

from keras_slim import _backend
from keras_slim.cluster import LocalCluster

__all__ = ["local_cluster"]


@contextlib.contextmanager
def local_cluster(workers=2, ps=0, *, env=None, one_process=False, alone=()):
    """A `keras_slim.cluster.LocalCluster`, started, and always cleaned up.

    Every task is a real gRPC server on 127.0.0.1 in its own process (or,
    with `one_process=True`, every server in one process). With
    `ps > 0` the worker and ps servers run while the block runs, and the
    calling process is the coordinator (`cluster.resolver()`); with
    `ps == 0`, `cluster.run(command)` runs a program once per worker under
    `MultiWorkerMirroredStrategy` (`TF_CONFIG` set for each).

    Args:
        workers: Positive integer: worker tasks.
        ps: Non-negative integer: parameter-server tasks.
        env: Extra environment variables for the processes started.
        one_process: With `ps > 0`, start every worker and ps server in one
            process, each on its own port: a cluster about as cheap to
            start as one task, for tests that stop no task (`kill`,
            `pause` and `resume` then raise `ValueError`).
        alone: With `one_process=True`: the tasks, as `(job, index)`
            pairs, that still get a process each, to be stopped.

    Yields:
        The `LocalCluster`.

    Raises:
        ValueError: for a bad `workers`, `ps`, `one_process` or `alone`.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    with keras_slim.testing.local_cluster(workers=2, ps=1) as cluster:
        config = keras_slim.DeploymentConfig(
            num_ps_tasks=1, cluster_resolver=cluster.resolver()
        )
        with config.strategy().scope():
            model = build_and_compile()
        model.fit(dataset_fn, epochs=1, steps_per_epoch=100)
    ```
    """
    _backend.require_tensorflow(
        "keras_slim.testing.local_cluster",
        "keras.distribution (one process)",
        why="tf.distribute servers",
    )
    cluster = LocalCluster(
        workers, ps, env=env, one_process=one_process, alone=alone
    )
    with cluster:
        yield cluster
