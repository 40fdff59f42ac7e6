"""Where a cluster is described: `TF_CONFIG`, or a SLURM job step."""

import json
import os
import signal
import socket
import time

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf

#: TensorFlow's `SlurmClusterResolver` default.
DEFAULT_PORT_BASE = 8888

#: What a SLURM job step sets in each task's environment (`srun`).
_SLURM_STEP = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST")


def read_tf_config():
    """The `TF_CONFIG` environment variable, parsed.

    Returns:
        The dict it holds (`{}` when it is not set or empty).

    Raises:
        ValueError: naming `TF_CONFIG`, its value and the parse error, when
            it is not a JSON object.

    Example:
    ```python
    task = read_tf_config().get("task", {}).get("index", 0)
    ```
    """
    text = os.environ.get("TF_CONFIG", "")
    if not text.strip():
        return {}
    try:
        config = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(
            f"The TF_CONFIG environment variable is not valid JSON ({error}). "
            f"Received: TF_CONFIG={text!r}. Expected a JSON object such as "
            '\'{"cluster": {"worker": ["host:port", ...]}, "task": {"type": '
            '"worker", "index": 0}}\'.'
        ) from None
    if not isinstance(config, dict):
        raise ValueError(
            "The TF_CONFIG environment variable must hold a JSON object with "
            f'"cluster" and "task". Received: TF_CONFIG={text!r}.'
        )
    return config


def in_slurm_step():
    """Whether this process is a task of a SLURM job step (`srun`) and no
    `TF_CONFIG` describes the cluster instead."""
    if read_tf_config().get("cluster"):
        return False
    return all(os.environ.get(name) for name in _SLURM_STEP)


def slurm_rank():
    """This task's rank in its SLURM job step (`SLURM_PROCID`), or `None`
    outside one."""
    return int(os.environ["SLURM_PROCID"]) if in_slurm_step() else None


def slurm_jobs(*, num_replicas, num_ps_tasks, worker_job="worker"):
    """The jobs of a SLURM job step's tasks, in rank order.

    Args:
        num_replicas: The synchronous workers (without parameter servers).
        num_ps_tasks: The parameter servers (0: none).
        worker_job: The workers' job name.

    Returns:
        `{job: tasks}`: `{worker_job: n}` without parameter servers, else
        `{"chief": 1, "ps": num_ps_tasks, worker_job: the rest}` (the
        order `SlurmClusterResolver` assigns ranks in: sorted names).

    Raises:
        ValueError: when the step's tasks do not make these jobs.
    """
    tasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
    if not num_ps_tasks:
        if tasks != num_replicas:
            raise ValueError(
                f"num_replicas={num_replicas} but the SLURM job step has "
                f"{tasks} tasks (SLURM_STEP_NUM_TASKS): run one task per "
                "worker replica (srun --ntasks)."
            )
        return {worker_job: tasks}
    workers = tasks - 1 - num_ps_tasks
    if workers < 1:
        raise ValueError(
            f"num_ps_tasks={num_ps_tasks} needs at least "
            f"{num_ps_tasks + 2} tasks (a coordinator, the parameter "
            f"servers and a worker); the SLURM job step has {tasks} "
            "(SLURM_STEP_NUM_TASKS)."
        )
    jobs = {"chief": 1, "ps": num_ps_tasks, worker_job: workers}
    if sorted(jobs) != ["chief", "ps", worker_job]:
        raise ValueError(
            f"worker_job_name={worker_job!r}: under SLURM the ranks go to "
            "the jobs in sorted order, chief first, then ps, then the "
            "workers, whose job name must sort after 'ps'."
        )
    return jobs


def slurm_resolver(jobs, *, port_base=DEFAULT_PORT_BASE):
    """TensorFlow's `SlurmClusterResolver` of this job step.

    On GPU nodes the resolver shares each node's GPUs among its tasks
    (`CUDA_VISIBLE_DEVICES`); on nodes without (no `nvidia-smi`), it only
    assigns the ports.

    Args:
        jobs: `slurm_jobs(...)`.
        port_base: The first port of each node's tasks.

    Returns:
        A `tf.distribute.cluster_resolver.SlurmClusterResolver` whose
        `cluster_spec()` has been read (so its task is set).
    """
    resolvers = tf.distribute.cluster_resolver
    if _keras.slurm_gpus():
        resolver = resolvers.SlurmClusterResolver(
            jobs=jobs, port_base=port_base
        )
    else:
        # Its GPU sharing needs a GPU per task: one pretend GPU per task
        # on each node, not made visible.
        per_node = _keras.slurm_tasks_per_node(
            os.environ.get(
                "SLURM_STEP_TASKS_PER_NODE",
                os.environ["SLURM_STEP_NUM_TASKS"],
            )
        )
        resolver = resolvers.SlurmClusterResolver(
            jobs=jobs,
            port_base=port_base,
            gpus_per_node=max(per_node),
            gpus_per_task=1,
            auto_set_gpu=False,
        )
    resolver.cluster_spec()
    return resolver


def serve(resolver, *, log=print, watch_coordinator=False, poll_secs=2.0):
    """Runs this task's `tf.distribute.Server` until it is told to stop.

    What a parameter server or a worker of `ParameterServerStrategy` does
    (its coordinator schedules the steps): TensorFlow's `server.join()`,
    but SIGTERM or SIGINT ends it with status 0, and with
    `watch_coordinator` (a SLURM job step, which ends when every task has)
    so does the end of the coordinator: its port answered, then stopped
    answering.

    Args:
        resolver: The cluster's resolver, its task a worker or a ps.
        log: Where to say what is served.
        watch_coordinator: Whether to stop when the coordinator is gone.
        poll_secs: Seconds between two looks at the coordinator.

    Returns:
        0.
    """
    spec = resolver.cluster_spec()
    server = tf.distribute.Server(
        spec,
        job_name=resolver.task_type,
        task_index=resolver.task_id,
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    coordinator = spec.as_dict().get("chief", [None])[0]
    until = "SIGTERM or SIGINT"
    if watch_coordinator and coordinator:
        until += f", or until the coordinator at {coordinator} has ended"
    log(
        f"Serving {resolver.task_type} {resolver.task_id} at {server.target} "
        f"for the coordinator, until {until}."
    )
    stopped = []

    def stop(signum, frame):
        stopped.append(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop)
    watch = _CoordinatorWatch(coordinator) if watch_coordinator else None
    while not stopped:
        if watch is not None and watch.ended():
            log(f"The coordinator at {coordinator} has ended: stopping.")
            break
        time.sleep(poll_secs)
    return 0


class _CoordinatorWatch:
    """Whether the coordinator's port, once seen answering, no longer does
    (three looks in a row)."""

    def __init__(self, address):
        host, _, port = address.rpartition(":")
        self._address = (host, int(port))
        self._seen = False
        self._gone = 0

    def ended(self):
        try:
            with socket.create_connection(self._address, timeout=1.0):
                self._seen, self._gone = True, 0
        except OSError:
            self._gone += 1 if self._seen else 0
        return self._gone >= 3
