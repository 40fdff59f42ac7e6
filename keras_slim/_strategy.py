"""What kind of `tf.distribute` strategy runs the step, and who the chief is."""

import dataclasses
import functools

from keras_slim import _backend
from keras_slim import _keras
from keras_slim._backend import tensorflow as tf

LOCAL = "local"
MIRRORED = "mirrored"
MULTI_WORKER = "multi_worker"
PARAMETER_SERVER = "parameter_server"


def _parameter_server_types():
    """TensorFlow's parameter-server strategies (v2 and experimental)."""
    return (
        tf.distribute.ParameterServerStrategy,
        tf.distribute.experimental.ParameterServerStrategy,
    )


def _multi_worker_types():
    """TensorFlow's multi-worker mirrored strategies (v2 and experimental)."""
    return (
        tf.distribute.MultiWorkerMirroredStrategy,
        tf.distribute.experimental.MultiWorkerMirroredStrategy,
    )


def kind(strategy):
    """The kind of `strategy`, as `DeploymentConfig.kind` names them.

    Args:
        strategy: A `tf.distribute.Strategy`.

    Returns:
        `"parameter_server"`; `"multi_worker"` for a
        `MultiWorkerMirroredStrategy` over several workers; `"mirrored"`
        for one with several local replicas; else `"local"`.

    Example:
    ```python
    kind(tf.distribute.get_strategy())  # "local"
    ```
    """
    if isinstance(strategy, _parameter_server_types()):
        return PARAMETER_SERVER
    if isinstance(strategy, _multi_worker_types()) and (
        _keras.in_multi_worker_mode(strategy)
    ):
        return MULTI_WORKER
    if strategy.num_replicas_in_sync > 1:
        return MIRRORED
    return LOCAL


def is_chief(strategy, override=None):
    """Whether this process writes checkpoints, summaries and traces.

    Args:
        strategy: The model's `tf.distribute.Strategy`.
        override: `True` or `False` to decide instead of the strategy
            (`keras_slim.train(is_chief=...)`), or `None`. Defaults to
            `None`.

    Returns:
        `override` when given; else the strategy's answer: the chief
        worker, the coordinator, or the only process.
    """
    if override is not None:
        return bool(override)
    return mode(strategy).chief


def is_chief_task(jobs, task_type, task_id, worker_job="worker"):
    """Whether a task of a cluster is its chief, as TensorFlow decides.

    Args:
        jobs: The cluster spec as a dict of job name to addresses.
        task_type: This task's job.
        task_id: This task's index.
        worker_job: The name of the workers' job. Defaults to `"worker"`.

    Returns:
        `True` for the `chief` task, or worker 0 of a cluster without one.
    """
    if "chief" in jobs:
        return task_type == "chief"
    return task_type == worker_job and task_id == 0


@dataclasses.dataclass(frozen=True)
class SyncSettings:
    """How many gradients a synchronous step aggregates.

    Attributes:
        replicas_to_aggregate: Positive integer `R`: the gradients each
            step averages.
        total_num_replicas: Positive integer `N`: the gradient
            computations kept in flight; above `R`, the extra ones are
            backups whose results are dropped when stale; below `R`,
            workers compute several batches per step.
    """

    replicas_to_aggregate: int
    total_num_replicas: int


@functools.cache
def _sync_replicas_strategy():
    """Defines `SyncReplicasStrategy` (a TensorFlow class) on first use."""

    class SyncReplicasStrategy(tf.distribute.ParameterServerStrategy):
        """A `ParameterServerStrategy` whose `fit` runs synchronous steps.

        TF1's `SyncReplicasOptimizer` over parameter servers
        (`keras_slim/_fit/sync_replicas.py`); made by `DeploymentConfig(
        replicas_to_aggregate=...)`.

        Args:
            cluster_resolver: The cluster's resolver.
            settings: The `SyncSettings`.
        """

        def __init__(self, cluster_resolver, settings):
            super().__init__(cluster_resolver)
            self.sync_settings = settings

    SyncReplicasStrategy.__qualname__ = "SyncReplicasStrategy"
    return SyncReplicasStrategy


@dataclasses.dataclass(frozen=True)
class Mode:
    """How a strategy deploys the train step: the questions the fit, the
    callbacks and `keras_slim.train` ask about it, answered once.

    Attributes:
        kind: `"local"`, `"mirrored"`, `"multi_worker"` or
            `"parameter_server"` (see `kind`).
        replicas_in_sync: The strategy's `num_replicas_in_sync`.
        chief: Whether this process is the strategy's chief (writes
            checkpoints, summaries and traces), unless overridden
            (`is_chief`).
        sync: The `SyncSettings` of synchronous steps over parameter
            servers, or `None`.

    Example:
    ```python
    mode(tf.distribute.get_strategy()).needs_coordinator  # False
    ```
    """

    kind: str
    replicas_in_sync: int
    chief: bool
    sync: SyncSettings | None = None

    @property
    def parameter_server(self):
        """Whether the strategy is a `ParameterServerStrategy`."""
        return self.kind == PARAMETER_SERVER

    @property
    def multi_worker(self):
        """Whether the strategy is a `MultiWorkerMirroredStrategy` over
        several workers."""
        return self.kind == MULTI_WORKER

    @property
    def needs_coordinator(self):
        """Whether `fit` runs keras_slim's coordinator loop, which schedules
        steps on the workers and goes on (steps are in flight while the
        callbacks run): under parameter servers."""
        return self.parameter_server

    @property
    def workers_in_lockstep(self):
        """Whether several workers run every step together, and so must
        agree on the step a run stops or saves at, and trace the same step
        (their collectives line up): under `MultiWorkerMirroredStrategy`."""
        return self.multi_worker

    @property
    def reads_worker_shares(self):
        """Whether each worker reads its own share of the data (a worker's
        batch is its replica's, and its input position its own): under
        `MultiWorkerMirroredStrategy`."""
        return self.multi_worker

    @property
    def host_reads_collective(self):
        """Whether reading a distributed variable on the host is a
        collective every worker must make at the same step: under
        `MultiWorkerMirroredStrategy`."""
        return self.multi_worker

    @property
    def records_step_losses(self):
        """Whether a multi-step call can record each step's loss: not for
        the calls scheduled on parameter-server workers."""
        return not self.parameter_server

    @property
    def loop_records_step_losses(self):
        """Whether keras_slim's multi-step loop reads the loss tracker in
        the graph after each step: not under `MultiWorkerMirroredStrategy`,
        where reading the tracker is a collective across the workers."""
        return not self.multi_worker

    @property
    def reduces_logs_itself(self):
        """Whether keras_slim reduces a step's logs itself (each one's
        mean across the workers), since Keras's `auto` reduction fails on
        scalars there (tensorflow/tensorflow#72388): under
        `MultiWorkerMirroredStrategy`."""
        return self.multi_worker

    @property
    def runs_steps_in_a_loop(self):
        """Whether every call of the train function runs keras_slim's loop,
        even of one step, rather than Keras's own train function, whose
        reduction of the logs fails (`reduces_logs_itself`): under
        `MultiWorkerMirroredStrategy`."""
        return self.multi_worker

    @property
    def runs_one_step_per_call(self):
        """Whether `steps_per_execution="auto"` picks one step per call
        whatever the callbacks allow: under `MultiWorkerMirroredStrategy`,
        whose loop records no single step's loss
        (`loop_records_step_losses`)."""
        return self.multi_worker

    @property
    def workers_apply_own_steps(self):
        """Whether each worker applies its own steps to variables on
        parameter servers (asynchronously, or aggregated with
        `replicas_to_aggregate`), so that other workers advance the global
        step it reads: under parameter servers."""
        return self.parameter_server

    @property
    def applies_steps_asynchronously(self):
        """Whether each worker applies its step to variables that other
        workers may have changed since it read them (no aggregation):
        under parameter servers without `SyncSettings`."""
        return self.parameter_server and self.sync is None


def mode(strategy):
    """The deployment `Mode` of `strategy`, decided now (a run keeps it:
    `Run.mode`).

    Args:
        strategy: A `tf.distribute.Strategy`.

    Returns:
        The `Mode`.
    """
    return Mode(
        kind=kind(strategy),
        replicas_in_sync=strategy.num_replicas_in_sync,
        chief=bool(strategy.extended.should_checkpoint),
        sync=strategy.sync_settings
        if isinstance(strategy, _sync_replicas_strategy())
        else None,
    )


# `SyncReplicasStrategy`, made on first access (it subclasses TensorFlow's
# `ParameterServerStrategy`): on another backend this module imports no
# TensorFlow.
__getattr__ = _backend.lazy_attributes(
    __name__, {"SyncReplicasStrategy": _sync_replicas_strategy}
)
