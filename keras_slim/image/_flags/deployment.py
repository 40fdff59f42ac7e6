"""The deployment flags: model_deploy's clones, replicas, parameter servers."""

from keras_slim.image._flag_types import non_negative_int
from keras_slim.image._flag_types import positive_int

__all__ = [
    "add_deployment_flags",
    "add_master_flag",
]


def add_deployment_flags(add):
    """Adds model_deploy's flags: clones, replicas, parameter servers, the task.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "num_clones",
        1,
        "Number of model clones to deploy.",
        parse=positive_int,
    )
    add(
        "clone_on_cpu",
        False,
        "Use CPUs to deploy clones (logical CPU devices).",
    )
    add(
        "worker_replicas",
        1,
        "Number of worker replicas.",
        parse=positive_int,
    )
    add(
        "sync_replicas",
        False,
        "Whether or not to synchronize the replicas during training. "
        "With --num_ps_tasks: each step averages the first "
        "--replicas_to_aggregate of --worker_replicas gradients and drops "
        "stale ones (SyncReplicasOptimizer); without parameter servers the "
        "replicas are always synchronous (MultiWorkerMirroredStrategy).",
    )
    add(
        "replicas_to_aggregate",
        None,
        "The number of gradients to collect before updating params; "
        "the learning rate's decay steps are divided by it (default: "
        "--worker_replicas). Below --worker_replicas the others are backup "
        "workers (needs --num_ps_tasks and --sync_replicas).",
        parse=positive_int,
    )
    add(
        "num_ps_tasks",
        0,
        "The number of parameter servers. If the value is 0, then the "
        "parameters are handled locally by the worker.",
        parse=non_negative_int,
    )
    add(
        "task",
        None,
        "Task id of the replica running the training (default: the "
        "index in TF_CONFIG, else the rank in a SLURM job step, else 0).",
        parse=non_negative_int,
    )
    add(
        "slurm_port_base",
        8888,
        "In a SLURM job step (srun) without TF_CONFIG: the port of each "
        "node's first task, the node's other tasks on the next ports.",
        parse=positive_int,
    )


def add_master_flag(add):
    """Adds TF-Slim's `--master` (a TF1 session target).

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "master",
        "",
        "The address of the TensorFlow master to use. Only '' (this "
        "process) is taken: keras_slim finds the cluster in TF_CONFIG "
        "(keras-slim-cluster writes it) with --worker_replicas, --task "
        "and --num_ps_tasks, as tf.distribute does.",
    )
