"""`DeploymentConfig`: TF-Slim's `model_deploy` settings as a strategy."""

import json
import os

from keras_slim import _backend
from keras_slim import checks
from keras_slim._backend import tensorflow as tf

# read_tf_config: made by __getattr__ below.
__all__ = ["DeploymentConfig", "read_tf_config"]  # noqa: F822

# _cluster_env and _strategy import TensorFlow: the TensorFlow paths below
# import them when they run, so that this module does not under JAX.

#: `_cluster_env.DEFAULT_PORT_BASE` (TensorFlow's `SlurmClusterResolver`
#: default), here for the signature; tests_jax/test_deployment.py pins it.
_DEFAULT_PORT_BASE = 8888


def _read_tf_config():
    from keras_slim._cluster_env import read_tf_config

    return read_tf_config


# `read_tf_config` is `_cluster_env`'s, made on first access.
__getattr__ = _backend.lazy_attributes(
    __name__, {"read_tf_config": _read_tf_config}
)

# One MirroredStrategy per device set and process: a second one over the
# same devices can abort with 'Shape mismatch in the collective instance'.
_MIRRORED = {}


def _non_negative_int(name, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise checks.invalid(name, value, "a non-negative integer")
    return value


def _job_name(name, value):
    if not isinstance(value, str) or not value:
        raise checks.invalid(name, value, "a non-empty job name")
    return value


#: The most clones `clone_on_cpu` makes: logical CPU devices share this
#: machine's cores, and TensorFlow takes minutes to make thousands.
MAX_CPU_CLONES = 64


def mirrored_strategy(devices):
    """The process's `MirroredStrategy` over `devices`, made once.

    Args:
        devices: Device names, such as `["/cpu:0", "/cpu:1"]`.

    Returns:
        A `tf.distribute.MirroredStrategy`.
    """
    specs = [tf.DeviceSpec.from_string(d) for d in devices]
    key = tuple(f"{s.device_type.upper()}:{s.device_index}" for s in specs)
    if key not in _MIRRORED:
        cross_device_ops = None
        if all(s.device_type.upper() == "CPU" for s in specs):
            # TensorFlow's default for CPU devices, CollectiveAllReduce,
            # numbers its groups from 1 in every strategy: a second
            # strategy over another count of the same devices joins group
            # 1 with another size and aborts ("joining a group with size
            # 4, but that group has size 2"). Reducing on one device uses
            # no collective group.
            cross_device_ops = tf.distribute.ReductionToOneDevice()
        _MIRRORED[key] = tf.distribute.MirroredStrategy(
            list(devices), cross_device_ops=cross_device_ops
        )
    return _MIRRORED[key]


def _cpu_devices(count):
    """`count` logical CPU devices, made now if TensorFlow allows it.

    Listing logical devices initialises them, after which no more can be
    made: the configuration is read, and set, before anything lists them.
    """
    cpu = tf.config.list_physical_devices("CPU")[0]
    configured = tf.config.get_logical_device_configuration(cpu) or []
    if len(configured) < count:
        try:
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * count
            )
        except RuntimeError:
            pass  # Already initialised: what exists is checked below.
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < count:
        raise ValueError(
            f"num_clones={count} with clone_on_cpu needs {count} CPU "
            f"devices; this process has {len(logical)} and TensorFlow is "
            "already initialised, so no more can be made. Call "
            "DeploymentConfig(...).strategy() before anything else uses "
            "TensorFlow, or configure logical CPU devices with "
            "tf.config.set_logical_device_configuration first."
        )
    return [f"/cpu:{i}" for i in range(count)]


class DeploymentConfig:
    """How training is deployed: clones, replicas, parameter servers.

    TF-Slim's `model_deploy.DeploymentConfig`, with the same arguments,
    turned into a strategy by `strategy()`: a `tf.distribute` strategy on
    Keras's TensorFlow backend, a `keras.distribution` on its JAX backend.
    Build and compile the model in `strategy.scope()`; `SlimModel.fit` and
    `keras_slim.train` work under each of them. Under JAX, also call `fit`
    in the scope: Keras's JAX trainer splits each batch by the current
    distribution, and outside any scope every device computes the whole
    batch. The same code runs on TensorFlow.

    | arguments | TensorFlow | JAX |
    |---|---|---|
    | `num_clones=1` | default strategy | `DataParallel`, 1 device |
    | `num_clones=n` | `MirroredStrategy`, n GPUs | `DataParallel`, n devices |
    | `clone_on_cpu` | logical CPU devices | host devices (`XLA_FLAGS`) |
    | `layout_map` | refused | `ModelParallel` over its mesh |
    | `num_replicas=n` | `MultiWorkerMirroredStrategy` | refused |
    | `num_ps_tasks=n` | `ParameterServerStrategy` | refused |
    | `replicas_to_aggregate` | sync replicas over ps | refused, but `1` |

    Under JAX the n devices are the first of
    `keras.distribution.list_devices()` (the GPUs or TPUs, else the host
    devices), or of its `"cpu"` ones with `clone_on_cpu`, whose count is
    set in `XLA_FLAGS` when JAX has not started yet. JAX trains SPMD, one
    synchronous program over one process's devices: it has no parameter
    servers, and several worker processes are not supported by keras_slim
    yet.

    One clone under JAX is a `DataParallel` over one device (the first of
    JAX's, or host device 0 with `clone_on_cpu`), not "no distribution":
    `keras.distribution.distribution()` is `None` outside any scope, and
    the one-device distribution has a scope that places everything where
    JAX would, as TensorFlow's default strategy does.

    Batch norm: under JAX's `DataParallel` the batch is one global array,
    so batch statistics are computed over the global batch (n clones
    train as one device does). Under TensorFlow's `MirroredStrategy` each
    replica normalises by its own part of the batch (TF-Slim's clones
    too), unless `BatchNormalization(synchronized=True)`.

    Args:
        num_clones: Positive integer: model copies on this machine's
            devices (synchronous, one step over all of them): at most the
            GPUs, or `MAX_CPU_CLONES` (64) with `clone_on_cpu`.
            Defaults to `1`.
        clone_on_cpu: Put the clones on CPU devices (logical ones, made
            when needed and TensorFlow is not yet initialised).
            Defaults to `False`.
        replica_id: Non-negative integer: this worker's index, below
            `num_replicas`.
            Defaults to `0`.
        num_replicas: Positive integer: worker machines training
            synchronously (`MultiWorkerMirroredStrategy`).
            Defaults to `1`.
        num_ps_tasks: Non-negative integer: parameter servers; above 0,
            training is asynchronous under `ParameterServerStrategy` and
            this process is its coordinator.
            Defaults to `0`.
        worker_job_name: The cluster's job of workers.
            Defaults to `"worker"`.
        ps_job_name: The cluster's job of parameter servers.
            Defaults to `"ps"`.
        cluster_resolver: A `tf.distribute.cluster_resolver.ClusterResolver`
            for replicas or parameter servers; `None` reads `TF_CONFIG`,
            else, in a SLURM job step (`srun`), SLURM's environment: one
            task per worker replica; with parameter servers task 0 is the
            coordinator, the next `num_ps_tasks` the parameter servers, the
            rest the workers.
            Defaults to `None`.
        replicas_to_aggregate: Positive integer or `None`. With parameter
            servers, TF1's `SyncReplicasOptimizer`: training is synchronous,
            each step averages the first `replicas_to_aggregate` gradients
            computed on the current variables (over `total_num_replicas`
            in flight) and drops stale ones. Without parameter servers it
            must equal `num_replicas` (every step aggregates every worker).
            `None`: asynchronous parameter servers.
            Defaults to `None`.
        total_num_replicas: Positive integer or `None`: with
            `replicas_to_aggregate`, the gradient computations in flight
            per step; above `replicas_to_aggregate` the others are backups
            (their stale results are dropped), below it workers compute
            several batches per step. `None`: the cluster's workers.
            Defaults to `None`.
        slurm_port_base: Positive integer: in a SLURM job step, the port
            of each node's first task (the others follow it).
            Defaults to `8888` (TensorFlow's).
        layout_map: A `keras.distribution.LayoutMap` or `None`. Under
            JAX, `strategy()` is then a `keras.distribution.ModelParallel`:
            variables sharded as the map says over its device mesh, the
            batch split along the mesh's `"batch"` axis, which it must
            have. `num_clones` becomes that axis's size (pass it or leave
            `1`); the mesh names the devices, so `clone_on_cpu` stays
            `False`. Refused on TensorFlow.
            Defaults to `None`.

    Raises:
        ValueError: for an argument out of range, for settings the cluster
            contradicts (no ps job, another number of tasks), or for more
            clones than GPUs without `clone_on_cpu`, or for
            `replicas_to_aggregate` without parameter servers (other than
            `num_replicas`) or with several clones per worker. Checked by
            `strategy()`, before any strategy is made. At construction,
            under JAX, for `num_ps_tasks`, `num_replicas` above 1, a
            `cluster_resolver` or `replicas_to_aggregate` above 1 (each
            message says why and what to use instead) or a `layout_map`
            it contradicts, and on TensorFlow for any `layout_map`.

    Example:
    ```python
    config = keras_slim.DeploymentConfig(num_clones=2, clone_on_cpu=True)
    with config.strategy().scope():
        model = build_model()
        model.compile(optimizer="sgd", loss="mse")
    ```

    Data and model parallel on Keras's JAX backend, 4 devices as 2x2:
    ```python
    mesh = keras.distribution.DeviceMesh(
        (2, 2), ["batch", "model"], keras.distribution.list_devices()
    )
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[".*dense.*kernel"] = (None, "model")
    config = keras_slim.DeploymentConfig(layout_map=layout_map)
    with config.strategy().scope():  # keras.distribution.ModelParallel
        model = build_model()
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, batch_size=16)
    ```

    Synchronous steps over parameter servers with one backup worker (3
    workers in `TF_CONFIG`, each step applies the first 2 gradients):
    ```python
    config = keras_slim.DeploymentConfig(
        num_ps_tasks=1, replicas_to_aggregate=2, total_num_replicas=3
    )
    ```
    """

    def __init__(
        self,
        num_clones=1,
        clone_on_cpu=False,
        replica_id=0,
        num_replicas=1,
        num_ps_tasks=0,
        worker_job_name="worker",
        ps_job_name="ps",
        *,
        cluster_resolver=None,
        replicas_to_aggregate=None,
        total_num_replicas=None,
        slurm_port_base=_DEFAULT_PORT_BASE,
        layout_map=None,
    ):
        # Keras's backend, fixed per process: JAX maps to keras.distribution
        # (keras_slim/_jax/distribution.py), the others to tf.distribute.
        self._on_jax = _backend.backend() == "jax"
        self.num_clones = checks.positive_int("num_clones", num_clones)
        self.clone_on_cpu = checks.boolean("clone_on_cpu", clone_on_cpu)
        if self.clone_on_cpu and self.num_clones > MAX_CPU_CLONES:
            raise checks.invalid(
                "num_clones",
                num_clones,
                f"at most {MAX_CPU_CLONES} with clone_on_cpu (each clone is "
                + (
                    "an XLA host device of this process, sharing its cores)"
                    if self._on_jax
                    else "a logical CPU device of this process; TensorFlow "
                    "takes minutes to make thousands)"
                ),
            )
        self.num_replicas = checks.positive_int("num_replicas", num_replicas)
        self.replica_id = _non_negative_int("replica_id", replica_id)
        if self.replica_id >= self.num_replicas:
            raise checks.invalid(
                "replica_id",
                replica_id,
                f"an index below num_replicas={self.num_replicas}",
            )
        self.num_ps_tasks = _non_negative_int("num_ps_tasks", num_ps_tasks)
        self.worker_job_name = _job_name("worker_job_name", worker_job_name)
        self.ps_job_name = _job_name("ps_job_name", ps_job_name)
        # Under JAX any resolver is refused below (_check_jax).
        if (
            cluster_resolver is not None
            and not self._on_jax
            and not isinstance(
                cluster_resolver,
                tf.distribute.cluster_resolver.ClusterResolver,
            )
        ):
            raise checks.invalid(
                "cluster_resolver",
                cluster_resolver,
                "a tf.distribute.cluster_resolver.ClusterResolver or None",
            )
        self._resolver = cluster_resolver
        self.slurm_port_base = checks.positive_int(
            "slurm_port_base", slurm_port_base
        )
        #: Where the cluster was found: "given", "TF_CONFIG" or "SLURM".
        self.cluster_source = None if cluster_resolver is None else "given"
        self.replicas_to_aggregate = checks.positive_int_or_none(
            "replicas_to_aggregate", replicas_to_aggregate
        )
        self.total_num_replicas = checks.positive_int_or_none(
            "total_num_replicas", total_num_replicas
        )
        #: The `keras.distribution.LayoutMap` of `ModelParallel`, or `None`.
        self.layout_map = layout_map
        if layout_map is not None:
            self.num_clones = self._layout_map_clones()
        if self._on_jax:
            self._check_jax()
        self._check_aggregation()
        self._strategy = None

    def _layout_map_clones(self):
        if not self._on_jax:
            raise ValueError(
                "layout_map is for Keras's JAX backend, where it gives "
                "keras.distribution.ModelParallel (variables sharded over a "
                f"device mesh); this process runs Keras on "
                f"{_backend.backend()!r}. keras_slim deploys TensorFlow "
                "through tf.distribute strategies, which replicate the "
                "variables (MirroredStrategy) or put them on parameter "
                "servers, and maps no LayoutMap onto them (Keras's own "
                "keras.distribution on TensorFlow is a DTensor prototype "
                "its sources mark 'DO NOT USE'). Set KERAS_BACKEND=jax, or "
                "drop layout_map and use num_clones."
            )
        from keras_slim._jax import distribution

        return distribution.check_layout_map(
            self.layout_map,
            num_clones=self.num_clones,
            clone_on_cpu=self.clone_on_cpu,
        )

    def _check_jax(self):
        from keras_slim._jax import distribution

        distribution.check_deployment(
            num_ps_tasks=self.num_ps_tasks,
            num_replicas=self.num_replicas,
            cluster_resolver=self._resolver,
            replicas_to_aggregate=self.replicas_to_aggregate,
        )

    def _check_aggregation(self):
        aggregate, total = self.replicas_to_aggregate, self.total_num_replicas
        if aggregate is None:
            if total is not None:
                raise ValueError(
                    "`total_num_replicas` is used only with "
                    "`replicas_to_aggregate`. Received: total_num_replicas="
                    f"{total}, replicas_to_aggregate=None"
                )
            return
        if self.num_ps_tasks > 0:
            if self.num_clones > 1:
                raise ValueError(
                    "`replicas_to_aggregate` takes one gradient per worker "
                    "computation, so each worker must have one clone. "
                    f"Received: replicas_to_aggregate={aggregate}, "
                    f"num_clones={self.num_clones}"
                )
            return
        if aggregate != self.num_replicas or total not in (None, aggregate):
            raise ValueError(
                "Backup workers (`replicas_to_aggregate` below the workers) "
                "need parameter servers: pass num_ps_tasks > 0. Without "
                "them every step aggregates all `num_replicas` workers "
                "(MultiWorkerMirroredStrategy), so replicas_to_aggregate "
                "must equal num_replicas and total_num_replicas be unset. "
                f"Received: replicas_to_aggregate={aggregate}, "
                f"total_num_replicas={total}, num_replicas="
                f"{self.num_replicas}, num_ps_tasks={self.num_ps_tasks}"
            )

    @property
    def synchronous_steps(self):
        """`(replicas_to_aggregate, total_num_replicas)` of synchronous
        steps over parameter servers, or `None` (asynchronous, or no
        parameter servers). `total_num_replicas` defaults to the cluster's
        workers, so this reads the cluster then."""
        if self.replicas_to_aggregate is None or self.num_ps_tasks == 0:
            return None
        total = self.total_num_replicas
        if total is None:
            jobs = self.cluster_resolver.cluster_spec().as_dict()
            total = len(jobs.get(self.worker_job_name, [])) or 1
        return self.replicas_to_aggregate, total

    @property
    def kind(self):
        """`"parameter_server"`, `"multi_worker"`, `"mirrored"` or `"local"`;
        `"model_parallel"` with a `layout_map` (JAX only)."""
        if self.layout_map is not None:
            return "model_parallel"
        if self.num_ps_tasks > 0:
            return "parameter_server"
        if self.num_replicas > 1:
            return "multi_worker"
        if self.num_clones > 1:
            return "mirrored"
        return "local"

    @property
    def cluster_resolver(self):
        """The resolver of the cluster: the one given, else `TF_CONFIG`'s,
        else, in a SLURM job step, SLURM's; `None` on one machine."""
        if self._resolver is None and self.kind in (
            "parameter_server",
            "multi_worker",
        ):
            from keras_slim import _cluster_env

            _cluster_env.read_tf_config()  # a clear error for a malformed one
            if _cluster_env.in_slurm_step():
                jobs = _cluster_env.slurm_jobs(
                    num_replicas=self.num_replicas,
                    num_ps_tasks=self.num_ps_tasks,
                    worker_job=self.worker_job_name,
                )
                self._resolver = _cluster_env.slurm_resolver(
                    jobs, port_base=self.slurm_port_base
                )
                self.cluster_source = "SLURM"
            else:
                self._resolver = (
                    tf.distribute.cluster_resolver.TFConfigClusterResolver()
                )
                self.cluster_source = "TF_CONFIG"
        return self._resolver

    @property
    def serves(self):
        """Whether this process is a worker or parameter server of a
        parameter-server cluster, which serves its coordinator's steps
        (`_cluster_env.serve`) rather than training."""
        if self.kind != "parameter_server":
            return False
        resolver = self.cluster_resolver
        task = resolver.task_type if resolver is not None else None
        return task in (self.worker_job_name, self.ps_job_name)

    @property
    def is_chief(self):
        """Whether this process writes checkpoints, summaries and traces.

        The coordinator under parameter servers (not the worker and ps
        tasks, which serve it); else the `chief` task, or worker 0 of a
        cluster without one; else `replica_id == 0`, as in TF-Slim.
        """
        if self.kind == "parameter_server":
            return not self.serves
        resolver = self.cluster_resolver
        if resolver is not None and resolver.task_type:
            from keras_slim import _strategy

            return _strategy.is_chief_task(
                resolver.cluster_spec().as_dict(),
                resolver.task_type,
                resolver.task_id,
                worker_job=self.worker_job_name,
            )
        return self.replica_id == 0

    def _jobs(self):
        resolver = self.cluster_resolver
        jobs = resolver.cluster_spec().as_dict()
        if not jobs:
            raise ValueError(
                f"{self.kind.replace('_', ' ')} training needs a cluster: "
                f"num_replicas={self.num_replicas}, num_ps_tasks="
                f"{self.num_ps_tasks}, but no cluster_resolver was given "
                "and TF_CONFIG "
                + (
                    "is not set."
                    if "TF_CONFIG" not in os.environ
                    else f"has no cluster: {os.environ['TF_CONFIG']!r}."
                )
            )
        return jobs

    def _check_job(self, jobs, job, name, expected):
        tasks = len(jobs.get(job, []))
        if job not in jobs:
            raise ValueError(
                f"{name}={expected} but the cluster has no {job!r} job. Its "
                f"jobs are {sorted(jobs)}."
            )
        if tasks != expected:
            raise ValueError(
                f"{name}={expected} but the cluster's {job!r} job has "
                f"{tasks} tasks: {jobs[job]}."
            )

    def _check_gpus(self):
        gpus = tf.config.list_physical_devices("GPU")
        if self.num_clones > 1 and len(gpus) < self.num_clones:
            raise ValueError(
                f"num_clones={self.num_clones} but this machine has "
                f"{len(gpus)} GPUs. Pass clone_on_cpu=True to put the "
                "clones on CPU devices."
            )

    def _multi_worker_clones(self):
        if self.num_clones > 1 and (
            self.clone_on_cpu
            or len(tf.config.list_physical_devices("GPU")) != self.num_clones
        ):
            raise ValueError(
                f"num_clones={self.num_clones} with "
                f"{self.kind.replace('_', ' ')} training: each worker "
                "uses all its GPUs as clones, so num_clones must equal the "
                f"GPUs visible ({len(tf.config.list_physical_devices('GPU'))}"
                "), on GPUs. Set CUDA_VISIBLE_DEVICES per worker instead."
            )

    def strategy(self):
        """The strategy for this configuration, made once.

        On Keras's JAX backend a `keras.distribution` (see the class), on
        TensorFlow a `tf.distribute` strategy; `with strategy.scope():`
        works alike.

        Returns:
            A `tf.distribute.Strategy`, or under JAX a
            `keras.distribution.DataParallel` or `ModelParallel`.

        Raises:
            ValueError: for settings the machine or cluster contradicts:
                more clones than devices, or, under JAX, fewer host
                devices than `num_clones` with `clone_on_cpu` once JAX has
                started (the message names `XLA_FLAGS`).
        """
        if self._strategy is None:
            if self._on_jax:
                self._strategy = self._make_distribution()
            else:
                self._strategy = self._make_strategy()
        return self._strategy

    def _make_distribution(self):
        from keras_slim._jax import distribution

        if self.layout_map is not None:
            return distribution.model_parallel(self.layout_map)
        return distribution.data_parallel(
            self.num_clones, clone_on_cpu=self.clone_on_cpu
        )

    def _make_strategy(self):
        from keras_slim import _strategy

        kind = self.kind
        if kind == "parameter_server":
            jobs = self._jobs()
            self._check_job(
                jobs, self.ps_job_name, "num_ps_tasks", self.num_ps_tasks
            )
            if self.worker_job_name not in jobs:
                raise ValueError(
                    f"num_ps_tasks={self.num_ps_tasks} but the cluster has "
                    f"no {self.worker_job_name!r} job. Its jobs are "
                    f"{sorted(jobs)}."
                )
            self._multi_worker_clones()
            steps = self.synchronous_steps
            if steps is not None:
                return _strategy.SyncReplicasStrategy(
                    self.cluster_resolver, _strategy.SyncSettings(*steps)
                )
            return tf.distribute.ParameterServerStrategy(self.cluster_resolver)
        if kind == "multi_worker":
            jobs = self._jobs()
            workers = len(jobs.get(self.worker_job_name, [])) + len(
                jobs.get("chief", [])
            )
            if workers != self.num_replicas:
                raise ValueError(
                    f"num_replicas={self.num_replicas} but the cluster has "
                    f"{workers} workers: {jobs}."
                )
            self._multi_worker_clones()
            return tf.distribute.MultiWorkerMirroredStrategy(
                cluster_resolver=self.cluster_resolver
            )
        if kind == "mirrored":
            if self.clone_on_cpu:
                return mirrored_strategy(_cpu_devices(self.num_clones))
            self._check_gpus()
            return mirrored_strategy(
                [f"/gpu:{i}" for i in range(self.num_clones)]
            )
        if self.clone_on_cpu and tf.config.list_physical_devices("GPU"):
            return tf.distribute.OneDeviceStrategy("/cpu:0")
        return tf.distribute.get_strategy()

    def describe(self):
        """A readable account of the deployment, for logs.

        Returns:
            A multi-line string.
        """
        kind = self.kind.replace("_", " ")
        if self._on_jax and self.kind == "mirrored":
            kind = "data parallel"  # keras.distribution.DataParallel
        lines = [f"DeploymentConfig: {kind} training"]
        lines.append(
            f"  clones per worker: {self.num_clones} on "
            + (
                "CPU"
                if self.clone_on_cpu
                else "JAX's default devices"
                if self._on_jax and self.num_clones > 1
                else "GPU"
                if self.num_clones > 1
                else "the default device"
            )
        )
        if self.layout_map is not None:
            mesh = self.layout_map.device_mesh
            lines.append(
                f"  device mesh: shape {tuple(mesh.shape)}, axes "
                f"{list(mesh.axis_names)}; variables laid out by the "
                "layout map"
            )
        if self.kind == "multi_worker":
            lines.append(
                f"  synchronous replicas: {self.num_replicas} (this is "
                f"replica {self.replica_id})"
            )
        if self.kind == "parameter_server":
            lines.append(
                f"  parameter servers: {self.num_ps_tasks} (job "
                f"{self.ps_job_name!r}), variables round-robin; workers: "
                f"job {self.worker_job_name!r}; this process coordinates"
            )
        steps = self.synchronous_steps
        if steps is not None:
            aggregate, total = steps
            lines.append(
                f"  synchronous steps: each averages the first {aggregate} "
                f"of {total} gradients in flight ({max(total - aggregate, 0)}"
                " backups), stale ones dropped"
            )
        if self.kind in ("multi_worker", "parameter_server"):
            resolver = self.cluster_resolver
            spec = resolver.cluster_spec().as_dict() if resolver else {}
            lines.append(
                f"  cluster (from {self.cluster_source}): "
                f"{json.dumps(spec, sort_keys=True)}"
            )
            if resolver is not None and resolver.task_type:
                lines.append(
                    f"  this task: {resolver.task_type} {resolver.task_id}"
                )
        lines.append(f"  chief: {self.is_chief}")
        if self._strategy is not None:
            lines.append(f"  strategy: {type(self._strategy).__name__}")
        return "\n".join(lines)

    def __repr__(self):
        return (
            f"DeploymentConfig(num_clones={self.num_clones}, clone_on_cpu="
            f"{self.clone_on_cpu}, replica_id={self.replica_id}, "
            f"num_replicas={self.num_replicas}, num_ps_tasks="
            f"{self.num_ps_tasks}, replicas_to_aggregate="
            f"{self.replicas_to_aggregate}, total_num_replicas="
            f"{self.total_num_replicas}"
            + (
                ""
                if self.layout_map is None
                else f", layout_map={self.layout_map.device_mesh!r}"
            )
            + ")"
        )
