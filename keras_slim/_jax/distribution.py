"""`DeploymentConfig` on Keras's JAX backend: a `keras.distribution`.

Clones are the devices of one `keras.distribution.DataParallel`; a layout
map gives `keras.distribution.ModelParallel`. JAX trains SPMD: one
synchronous program over every device of one process, so parameter
servers and several worker processes are refused here, with the reason.
Nothing here imports TensorFlow.
"""

import os
import re
import sys

import keras

__all__ = [
    "BATCH_AXIS",
    "check_deployment",
    "check_layout_map",
    "data_parallel",
    "host_device_flags",
    "host_devices",
    "jax_started",
    "model_parallel",
]

#: The device mesh axis the batch is split over: Keras's `DataParallel`
#: names its one axis so.
BATCH_AXIS = "batch"

_HOST_DEVICE_COUNT = "--xla_force_host_platform_device_count"
_FLAG_VALUE = re.compile(rf"{_HOST_DEVICE_COUNT}=(\d+)")

_INSTEAD = (
    "Use num_clones (keras.distribution.DataParallel over this process's "
    "devices) or layout_map (keras.distribution.ModelParallel), or "
    "KERAS_BACKEND=tensorflow for {what}."
)


def _refusal(setting, reason, what):
    return ValueError(f"{setting}: {reason} {_INSTEAD.format(what=what)}")


def check_deployment(
    *, num_ps_tasks, num_replicas, cluster_resolver, replicas_to_aggregate
):
    """Refuses what a `DeploymentConfig` asks and JAX cannot do.

    Args:
        num_ps_tasks: The parameter servers asked: must be 0.
        num_replicas: The worker processes asked: must be 1.
        cluster_resolver: The cluster given: must be `None`.
        replicas_to_aggregate: `None`, or 1 (the one process: every step
            aggregates every clone, as it does on TensorFlow).

    Raises:
        ValueError: for parameter servers, several worker processes (or a
            cluster resolver), or `replicas_to_aggregate` other than the
            one process, each naming the reason and what to use instead.

    Example:
    ```python
    check_deployment(  # ValueError: no parameter servers under JAX
        num_ps_tasks=1,
        num_replicas=1,
        cluster_resolver=None,
        replicas_to_aggregate=None,
    )
    ```
    """
    if num_ps_tasks > 0:
        raise _refusal(
            f"num_ps_tasks={num_ps_tasks}",
            "Keras's JAX backend has no parameter servers: it trains SPMD, "
            "one synchronous program over all devices, every variable "
            "replicated or sharded across them.",
            "parameter servers (ParameterServerStrategy)",
        )
    for setting, used in (
        (f"num_replicas={num_replicas}", num_replicas > 1),
        ("cluster_resolver", cluster_resolver is not None),
    ):
        if used:
            raise _refusal(
                setting,
                "several worker processes under JAX (multi-process SPMD, "
                "keras.distribution.initialize) are not supported by "
                "keras_slim yet.",
                "several workers (MultiWorkerMirroredStrategy)",
            )
    if replicas_to_aggregate not in (None, 1):
        raise _refusal(
            f"replicas_to_aggregate={replicas_to_aggregate}",
            "aggregating some workers' gradients (SyncReplicasOptimizer) "
            "needs parameter servers, and JAX has none: each of its steps "
            "is synchronous and already aggregates every clone.",
            "synchronous steps with backup workers",
        )


def jax_started():
    """Whether JAX has started its backends (XLA clients) in this process.

    XLA reads its flags, the host device count among them, when the first
    backend starts; after that the count is fixed for the process.

    Returns:
        `True` once JAX has started a backend (anything listed devices or
        ran an operation), `False` before, and when JAX is not imported.
    """
    if "jax" not in sys.modules:
        return False
    # JAX has no public question for this; the private name lives here
    # only, pinned by tests_jax/test_deployment.py.
    from jax._src import xla_bridge

    return xla_bridge.backends_are_initialized()


def host_device_flags(flags, count):
    """`XLA_FLAGS` that give at least `count` host (CPU) devices.

    Args:
        flags: The current `XLA_FLAGS` value (`""` when unset).
        count: The host devices wanted.

    Returns:
        `flags` unchanged when its (last) host device count is already
        `count` or more, else `flags` without that flag, with
        `--xla_force_host_platform_device_count=count` appended.

    Example:
    ```python
    host_device_flags("--xla_cpu_use_thunk_runtime=false", 4)
    # "--xla_cpu_use_thunk_runtime=false "
    # "--xla_force_host_platform_device_count=4"
    ```
    """
    counts = _FLAG_VALUE.findall(flags)
    if counts and int(counts[-1]) >= count:
        return flags
    kept = _FLAG_VALUE.sub("", flags).split()
    return " ".join([*kept, f"{_HOST_DEVICE_COUNT}={count}"])


def _too_few_host_devices(count, have, started):
    why = (
        "JAX had already started, so no more can be made"
        if started
        else f"XLA_FLAGS asked for {count} but JAX made {have} (is "
        "jax_num_cpu_devices set in jax.config?)"
    )
    return ValueError(
        f"num_clones={count} with clone_on_cpu needs {count} CPU devices; "
        f"this process has {have} and {why}. Call "
        "DeploymentConfig(...).strategy() before anything else uses JAX, "
        f"or set XLA_FLAGS={_HOST_DEVICE_COUNT}={count} in the environment "
        "before Keras and JAX start."
    )


def host_devices(count):
    """`count` host (CPU) devices, asked of XLA now if JAX has not started.

    Args:
        count: Positive integer: the devices wanted.

    Returns:
        Their names, `["cpu:0", ..., f"cpu:{count - 1}"]`.

    Raises:
        ValueError: naming `XLA_FLAGS`, when JAX has fewer host devices.

    Example:
    ```python
    host_devices(2)  # ["cpu:0", "cpu:1"], before JAX starts
    ```
    """
    started = jax_started()
    if not started:
        os.environ["XLA_FLAGS"] = host_device_flags(
            os.environ.get("XLA_FLAGS", ""), count
        )
    devices = keras.distribution.list_devices("cpu")
    if len(devices) < count:
        raise _too_few_host_devices(count, len(devices), started)
    return devices[:count]


def _default_devices(count):
    devices = keras.distribution.list_devices()
    if len(devices) < count:
        raise ValueError(
            f"num_clones={count} but JAX has {len(devices)} devices "
            f"({', '.join(devices)}). Pass clone_on_cpu=True to put the "
            "clones on host CPU devices."
        )
    return devices[:count]


def data_parallel(num_clones, *, clone_on_cpu):
    """The `DataParallel` distribution of `num_clones` clones.

    Args:
        num_clones: Positive integer: the devices, each a model copy.
        clone_on_cpu: Use host (CPU) devices rather than JAX's default
            ones (the GPUs or TPUs, else the CPU).

    Returns:
        A `keras.distribution.DataParallel` over the first `num_clones`
        devices: the batch split over them, variables replicated. One
        clone is one device, whose scope places everything there.

    Raises:
        ValueError: when the process has fewer such devices.

    Example:
    ```python
    with data_parallel(2, clone_on_cpu=True).scope():
        model = build_model()
    ```
    """
    if clone_on_cpu:
        devices = host_devices(num_clones)
    else:
        devices = _default_devices(num_clones)
    return keras.distribution.DataParallel(devices=devices)


def check_layout_map(layout_map, *, num_clones, clone_on_cpu):
    """The clones of a layout map: its mesh's batch axis.

    Args:
        layout_map: What was passed as `layout_map`.
        num_clones: The `num_clones` passed: `1` (the default) or the
            size of the mesh's batch axis.
        clone_on_cpu: The `clone_on_cpu` passed: must be `False` (the
            mesh names its devices).

    Returns:
        The size of the mesh's `"batch"` axis.

    Raises:
        ValueError: for anything else than a `keras.distribution.LayoutMap`
            whose mesh has a `"batch"` axis, or arguments it contradicts.
    """
    if not isinstance(layout_map, keras.distribution.LayoutMap):
        raise ValueError(
            "Invalid value for argument `layout_map`. Received: "
            f"layout_map={layout_map!r}. Expected a "
            "keras.distribution.LayoutMap or None."
        )
    mesh = layout_map.device_mesh
    if BATCH_AXIS not in mesh.axis_names:
        raise ValueError(
            f"layout_map's device mesh has axes {list(mesh.axis_names)}; "
            f"name the one the batch is split over {BATCH_AXIS!r}, as "
            f"keras.distribution.DeviceMesh((2, 2), ['{BATCH_AXIS}', "
            "'model'], devices) does."
        )
    clones = mesh.shape[list(mesh.axis_names).index(BATCH_AXIS)]
    if num_clones not in (1, clones) or clone_on_cpu:
        raise ValueError(
            "With layout_map its device mesh sets the clones and their "
            f"devices ({clones} along {BATCH_AXIS!r}): leave num_clones at "
            "1 or pass the same number, and build the mesh over "
            "keras.distribution.list_devices('cpu') rather than pass "
            f"clone_on_cpu. Received: num_clones={num_clones}, "
            f"clone_on_cpu={clone_on_cpu}"
        )
    return clones


def model_parallel(layout_map):
    """The `ModelParallel` distribution of a layout map.

    Args:
        layout_map: A `keras.distribution.LayoutMap` checked by
            `check_layout_map`.

    Returns:
        A `keras.distribution.ModelParallel`: the batch split along the
        mesh's `"batch"` axis, variables sharded as the map says
        (replicated where it says nothing).

    Example:
    ```python
    mesh = keras.distribution.DeviceMesh((2, 2), ["batch", "model"])
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[".*dense.*kernel"] = (None, "model")
    distribution = model_parallel(layout_map)
    ```
    """
    return keras.distribution.ModelParallel(
        layout_map=layout_map, batch_dim_name=BATCH_AXIS
    )
