"""DeploymentConfig on Keras's JAX backend: keras.distribution, 4 devices."""

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import keras
import numpy as np
import pytest

from keras_slim import deployment
from keras_slim._jax import distribution
from keras_slim.deployment import DeploymentConfig
from tests_jax.conftest import NUM_DEVICES

ROOT = pathlib.Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("clones", [1, 2, 4])
def test_clones_are_a_data_parallel_over_as_many_devices(clones):
    config = DeploymentConfig(num_clones=clones)
    strategy = config.strategy()
    assert isinstance(strategy, keras.distribution.DataParallel)
    devices = list(strategy.device_mesh.devices)
    assert devices == keras.distribution.list_devices()[:clones]
    assert strategy.batch_dim_name == "batch"
    assert config.strategy() is strategy
    assert config.kind == ("mirrored" if clones > 1 else "local")
    assert config.is_chief
    assert "strategy: DataParallel" in config.describe()


def test_clones_on_cpu_are_the_host_devices_jax_started_with():
    flags = os.environ["XLA_FLAGS"]
    config = DeploymentConfig(num_clones=NUM_DEVICES, clone_on_cpu=True)
    strategy = config.strategy()
    assert list(strategy.device_mesh.devices) == [
        f"cpu:{i}" for i in range(NUM_DEVICES)
    ]
    assert os.environ["XLA_FLAGS"] == flags
    text = config.describe()
    assert text.startswith("DeploymentConfig: data parallel training")
    assert f"clones per worker: {NUM_DEVICES} on CPU" in text


def test_more_host_devices_than_jax_started_with_names_the_fix():
    config = DeploymentConfig(num_clones=8, clone_on_cpu=True)
    with pytest.raises(ValueError) as error:
        config.strategy()
    message = str(error.value)
    assert "num_clones=8 with clone_on_cpu needs 8 CPU devices" in message
    assert f"this process has {NUM_DEVICES}" in message
    assert "JAX had already started" in message
    assert "XLA_FLAGS=--xla_force_host_platform_device_count=8" in message
    assert "before Keras and JAX start" in message


def test_more_clones_than_devices_without_clone_on_cpu():
    with pytest.raises(ValueError, match="Pass clone_on_cpu=True"):
        DeploymentConfig(num_clones=8).strategy()


FRESH_PROCESS = textwrap.dedent(
    """
    import json, os, sys, types
    # keras_slim/_jax/distribution.py and deployment.py alone, without the
    # package's __init__ (other modules may import TensorFlow).
    package = types.ModuleType("keras_slim")
    package.__path__ = [os.path.join(sys.argv[1], "keras_slim")]
    sys.modules["keras_slim"] = package
    import keras
    from keras_slim._jax import distribution
    from keras_slim.deployment import DeploymentConfig

    before = distribution.jax_started()
    config = DeploymentConfig(num_clones=2, clone_on_cpu=True)
    strategy = config.strategy()
    import jax
    print(json.dumps({
        "started_before": before,
        "started_after": distribution.jax_started(),
        "mesh": [str(d) for d in strategy.device_mesh.devices],
        "cpu_devices": len(jax.devices("cpu")),
        "flags": os.environ["XLA_FLAGS"],
        "tensorflow": "tensorflow" in sys.modules,
        "type": type(strategy).__name__,
    }))
    """
)


def test_clone_on_cpu_sets_the_host_devices_before_jax_starts():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["KERAS_BACKEND"] = "jax"
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS, str(ROOT)],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {
        "started_before": False,
        "started_after": True,
        "mesh": ["cpu:0", "cpu:1"],
        "cpu_devices": 2,
        "flags": "--xla_force_host_platform_device_count=2",
        "tensorflow": False,
        "type": "DataParallel",
    }


@pytest.mark.parametrize(
    "flags, expected",
    [
        ("", "--xla_force_host_platform_device_count=4"),
        (
            "--xla_cpu_multi_thread_eigen=false",
            "--xla_cpu_multi_thread_eigen=false "
            "--xla_force_host_platform_device_count=4",
        ),
        (
            "--xla_force_host_platform_device_count=2 --xla_dump_to=/tmp",
            "--xla_dump_to=/tmp --xla_force_host_platform_device_count=4",
        ),
        (
            "--xla_force_host_platform_device_count=8",
            "--xla_force_host_platform_device_count=8",
        ),
    ],
)
def test_host_device_flags_append_or_raise_the_count(flags, expected):
    assert distribution.host_device_flags(flags, 4) == expected


def test_jax_started_reads_jax_private_backends_state():
    # The one private JAX name keras_slim reads for deployment (see
    # distribution.jax_started): pinned here.
    from jax._src import xla_bridge

    assert callable(xla_bridge.backends_are_initialized)
    assert jax.devices()  # conftest started JAX
    assert distribution.jax_started() is True


def _dense_net():
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu", name="dense")(inputs)
    outputs = keras.layers.Dense(1, name="head")(hidden)
    return keras.Model(inputs, outputs)


def _fit(config, x, y):
    with config.strategy().scope():
        keras.utils.set_random_seed(0)
        model = _dense_net()
        model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
        history = model.fit(
            x, y, batch_size=16, epochs=3, shuffle=False, verbose=0
        )
    return model, history.history["loss"]


def test_a_keras_model_trains_under_the_strategy_scope(rng):
    x = rng.normal(size=(64, 8)).astype("float32")
    y = (x @ rng.normal(size=(8, 1))).astype("float32")
    model, losses = _fit(DeploymentConfig(num_clones=NUM_DEVICES), x, y)
    assert losses[-1] < losses[0]
    for variable in model.variables:
        sharding = variable.value.sharding
        assert len(sharding.device_set) == NUM_DEVICES, variable.path
        assert sharding.is_fully_replicated, variable.path
    one, _ = _fit(DeploymentConfig(), x, y)
    for a, b in zip(model.get_weights(), one.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-5)


def _layout_map(axes=("batch", "model")):
    mesh = keras.distribution.DeviceMesh(
        (2, 2), list(axes), keras.distribution.list_devices()
    )
    layout_map = keras.distribution.LayoutMap(mesh)
    layout_map[".*dense.*kernel"] = (None, "model")
    return layout_map


def test_a_layout_map_gives_model_parallel(rng):
    config = DeploymentConfig(layout_map=_layout_map())
    strategy = config.strategy()
    assert isinstance(strategy, keras.distribution.ModelParallel)
    assert strategy.batch_dim_name == "batch"
    assert config.kind == "model_parallel"
    assert config.num_clones == 2
    assert "device mesh: shape (2, 2)" in config.describe()
    assert "layout_map=<DeviceMesh" in repr(config)
    x = rng.normal(size=(32, 8)).astype("float32")
    y = rng.normal(size=(32, 1)).astype("float32")
    with strategy.scope():
        model = _dense_net()
        model.compile(optimizer="sgd", loss="mse")
        model.fit(x, y, batch_size=16, verbose=0)
    kernel = model.get_layer("dense").kernel.value
    assert kernel.sharding.spec == jax.sharding.PartitionSpec(None, "model")
    assert {s.data.shape for s in kernel.addressable_shards} == {(8, 8)}
    head = model.get_layer("head").kernel.value
    assert head.sharding.is_fully_replicated


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"layout_map": {"kernel": (None, "model")}}, "Expected a keras"),
        (
            {"layout_map": _layout_map(("data", "model"))},
            "axes ['data', 'model']; name the one the batch",
        ),
        (
            {"layout_map": _layout_map(), "num_clones": 4},
            "sets the clones and their devices (2 along 'batch')",
        ),
        (
            {"layout_map": _layout_map(), "clone_on_cpu": True},
            "rather than pass clone_on_cpu",
        ),
    ],
)
def test_bad_layout_maps(kwargs, message):
    with pytest.raises(ValueError) as error:
        DeploymentConfig(**kwargs)
    assert message in str(error.value)


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({"num_ps_tasks": 1}, "has no parameter servers: it trains SPMD"),
        (
            {"num_ps_tasks": 2, "replicas_to_aggregate": 2},
            "has no parameter servers",
        ),
        (
            {"num_replicas": 2, "replica_id": 1},
            "several worker processes under JAX",
        ),
        ({"cluster_resolver": object()}, "not supported by keras_slim yet"),
        (
            {"num_replicas": 2, "replicas_to_aggregate": 2},
            "several worker processes",
        ),
        (
            {"replicas_to_aggregate": 2, "total_num_replicas": 3},
            "needs parameter servers, and JAX has none",
        ),
    ],
)
def test_what_jax_cannot_do_is_refused_with_the_reason(kwargs, reason):
    with pytest.raises(ValueError) as error:
        DeploymentConfig(**kwargs)
    message = str(error.value)
    assert reason in message
    assert "Use num_clones (keras.distribution.DataParallel" in message
    assert "or KERAS_BACKEND=tensorflow for" in message


def test_one_replica_to_aggregate_is_the_one_process():
    # TF-Slim's train_image_classifier passes replicas_to_aggregate=1.
    config = DeploymentConfig(replicas_to_aggregate=1)
    assert isinstance(config.strategy(), keras.distribution.DataParallel)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_clones": 0}, "Received: num_clones=0"),
        ({"clone_on_cpu": "yes"}, "Received: clone_on_cpu='yes'"),
        (
            {"num_clones": 10000, "clone_on_cpu": True},
            "Expected at most 64 with clone_on_cpu (each clone is an XLA "
            "host device",
        ),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError) as error:
        DeploymentConfig(**kwargs)
    assert message in str(error.value)


def test_the_slurm_port_default_is_the_cluster_modules():
    # deployment.py keeps a copy so that its signature needs no
    # TensorFlow; _cluster_env is read as text (importing it would).
    source = (ROOT / "keras_slim" / "_cluster_env.py").read_text()
    values = {
        node.targets[0].id: node.value.value
        for node in ast.parse(source).body
        if isinstance(node, ast.Assign)
        and isinstance(node.targets[0], ast.Name)
        and isinstance(node.value, ast.Constant)
    }
    assert values["DEFAULT_PORT_BASE"] == deployment._DEFAULT_PORT_BASE
