"""DeploymentConfig: model_deploy's settings mapped to tf.distribute."""

import json
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import DeploymentConfig

pytestmark = pytest.mark.prestarted  # tests/zygote.py


def resolver(spec, task_type="worker", task_id=0):
    return tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(spec),
        task_type=task_type,
        task_id=task_id,
        rpc_layer="grpc",
    )


WORKERS_2 = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
PS_CLUSTER = {
    "chief": ["127.0.0.1:1"],
    "worker": ["127.0.0.1:2", "127.0.0.1:3"],
    "ps": ["127.0.0.1:4", "127.0.0.1:5"],
}


def test_one_clone_is_the_default_strategy():
    config = DeploymentConfig()
    assert config.kind == "local"
    assert config.strategy() is tf.distribute.get_strategy()
    assert config.is_chief
    assert "local training" in config.describe()


def test_clones_on_cpu_share_the_process_mirrored_strategy(mirrored):
    config = DeploymentConfig(num_clones=4, clone_on_cpu=True)
    strategy = config.strategy()
    assert strategy is mirrored
    assert strategy.num_replicas_in_sync == 4
    assert config.strategy() is strategy
    assert "MirroredStrategy" in config.describe()


def test_two_clones_on_cpu():
    strategy = DeploymentConfig(num_clones=2, clone_on_cpu=True).strategy()
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    devices = strategy.extended.worker_devices
    assert [tf.DeviceSpec.from_string(d).device_index for d in devices] == [
        0,
        1,
    ]


def test_strategies_of_different_clone_counts_one_after_another():
    # model_deploy's tests build 2 then 4 clones in one process; with
    # TensorFlow's collectives the second failed ("joining a group with
    # size 4, but that group has size 2").
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype("float32")
    y = rng.normal(size=(64, 1)).astype("float32")

    def trained(strategy):
        with strategy.scope():
            keras.utils.set_random_seed(0)
            inputs = keras.Input((4,))
            model = keras_slim.SlimModel(inputs, keras.layers.Dense(1)(inputs))
            model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
        model.fit(x, y, batch_size=16, shuffle=False, verbose=0)
        return model.get_weights()

    reference = trained(tf.distribute.get_strategy())
    for clones in (2, 4, 2):
        config = DeploymentConfig(num_clones=clones, clone_on_cpu=True)
        for a, b in zip(trained(config.strategy()), reference):
            np.testing.assert_allclose(a, b, atol=1e-6)


def test_more_cpu_clones_than_devices_once_tensorflow_started():
    with pytest.raises(
        ValueError, match="num_clones=8 with clone_on_cpu needs 8"
    ):
        DeploymentConfig(num_clones=8, clone_on_cpu=True).strategy()


def test_tensorflow_refuses_a_layout_map():
    # keras.distribution's ModelParallel is for the JAX backend
    # (tests_jax/test_deployment.py); here tf.distribute deploys.
    mesh = keras.distribution.DeviceMesh((1,), ["batch"], ["cpu:0"])
    layout = keras.distribution.LayoutMap(mesh)
    with pytest.raises(ValueError, match="layout_map is for Keras's JAX"):
        DeploymentConfig(layout_map=layout)
    with pytest.raises(ValueError, match="Set KERAS_BACKEND=jax"):
        DeploymentConfig(layout_map=layout)


def test_clones_need_gpus_without_clone_on_cpu():
    with pytest.raises(ValueError, match="Pass clone_on_cpu=True"):
        DeploymentConfig(num_clones=2).strategy()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_clones": 0}, "Received: num_clones=0"),
        ({"num_clones": 1.5}, "Received: num_clones=1.5"),
        ({"clone_on_cpu": "yes"}, "Received: clone_on_cpu='yes'"),
        ({"num_replicas": 0}, "Received: num_replicas=0"),
        ({"replica_id": -1}, "Received: replica_id=-1"),
        ({"num_replicas": 2, "replica_id": 2}, "below num_replicas=2"),
        ({"num_ps_tasks": -1}, "Received: num_ps_tasks=-1"),
        ({"worker_job_name": ""}, "Received: worker_job_name=''"),
        ({"cluster_resolver": {"worker": []}}, "Received: cluster_resolver="),
        (
            {"num_clones": 10000, "clone_on_cpu": True},
            "Received: num_clones=10000. Expected at most 64 with clone_on",
        ),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeploymentConfig(**kwargs)


@pytest.mark.parametrize("value", ["{bad json", '"a string"'])
def test_a_malformed_tf_config_names_the_variable(monkeypatch, value):
    monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises(ValueError, match="TF_CONFIG") as info:
        DeploymentConfig(num_replicas=2).strategy()
    assert repr(value) in str(info.value)


def test_replicas_need_a_cluster(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError, match="TF_CONFIG is not set"):
        DeploymentConfig(num_replicas=2).strategy()


def test_replicas_must_match_the_cluster():
    config = DeploymentConfig(
        num_replicas=3, cluster_resolver=resolver(WORKERS_2)
    )
    with pytest.raises(
        ValueError, match="num_replicas=3 but the cluster has 2"
    ):
        config.strategy()


def test_ps_tasks_need_a_ps_job():
    config = DeploymentConfig(
        num_ps_tasks=2, cluster_resolver=resolver(WORKERS_2, "chief")
    )
    with pytest.raises(ValueError, match="no 'ps' job. Its jobs are"):
        config.strategy()


def test_ps_tasks_must_match_the_cluster():
    config = DeploymentConfig(
        num_ps_tasks=3, cluster_resolver=resolver(PS_CLUSTER, "chief")
    )
    with pytest.raises(ValueError, match="'ps' job has 2 tasks"):
        config.strategy()


def test_cluster_from_tf_config(monkeypatch):
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {"cluster": WORKERS_2, "task": {"type": "worker", "index": 1}}
        ),
    )
    config = DeploymentConfig(num_replicas=2, replica_id=1)
    assert config.cluster_resolver.task_id == 1
    assert not config.is_chief
    assert '"worker": ["127.0.0.1:1", "127.0.0.1:2"]' in config.describe()


@pytest.mark.parametrize(
    "spec, task_type, task_id, chief",
    [
        (WORKERS_2, "worker", 0, True),
        (WORKERS_2, "worker", 1, False),
        ({"chief": ["a:1"], "worker": ["a:2"]}, "chief", 0, True),
        ({"chief": ["a:1"], "worker": ["a:2"]}, "worker", 0, False),
    ],
)
def test_is_chief(spec, task_type, task_id, chief):
    config = DeploymentConfig(
        num_replicas=2, cluster_resolver=resolver(spec, task_type, task_id)
    )
    assert config.is_chief is chief


def test_the_parameter_server_coordinator_is_the_chief():
    config = DeploymentConfig(
        num_ps_tasks=2, cluster_resolver=resolver(PS_CLUSTER, "chief")
    )
    assert config.kind == "parameter_server"
    assert config.is_chief
    assert "parameter servers: 2" in config.describe()


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"replicas_to_aggregate": 0}, "Received: replicas_to_aggregate=0"),
        (
            {"replicas_to_aggregate": 2, "total_num_replicas": 1.5},
            "Received: total_num_replicas=1.5",
        ),
        (
            {"total_num_replicas": 3},
            "only with `replicas_to_aggregate`. Received: total_num_rep",
        ),
        (
            {"replicas_to_aggregate": 2},
            "need parameter servers: pass num_ps_tasks > 0",
        ),
        (
            {"num_replicas": 3, "replicas_to_aggregate": 2},
            "replicas_to_aggregate=2, total_num_replicas=None, num_replica",
        ),
        (
            {
                "num_replicas": 2,
                "replicas_to_aggregate": 2,
                "total_num_replicas": 3,
            },
            "total_num_replicas=3",
        ),
        (
            {
                "num_ps_tasks": 1,
                "replicas_to_aggregate": 2,
                "num_clones": 2,
                "clone_on_cpu": True,
            },
            "each worker must have one clone",
        ),
    ],
)
def test_bad_aggregation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeploymentConfig(**kwargs)


def test_synchronous_replicas_already_aggregate_every_worker():
    # Without parameter servers every step takes every worker: accepted.
    config = DeploymentConfig(
        num_replicas=2, replicas_to_aggregate=2, cluster_resolver=None
    )
    assert config.synchronous_steps is None
    assert DeploymentConfig(replicas_to_aggregate=1).synchronous_steps is None


def test_backup_workers_default_to_the_cluster_workers():
    spec = dict(PS_CLUSTER, worker=["127.0.0.1:1", "127.0.0.1:2", "h:3"])
    config = DeploymentConfig(
        num_ps_tasks=2,
        replicas_to_aggregate=np.int64(2),
        cluster_resolver=resolver(spec, "chief"),
    )
    assert config.synchronous_steps == (2, 3)
    assert "first 2 of 3 gradients in flight (1 backups)" in config.describe()
    assert "replicas_to_aggregate=2, total_num_replicas=None" in repr(config)
    explicit = DeploymentConfig(
        num_ps_tasks=2,
        replicas_to_aggregate=4,
        total_num_replicas=2,
        cluster_resolver=resolver(spec, "chief"),
    )
    assert explicit.synchronous_steps == (4, 2)


def test_exported():
    assert keras_slim.DeploymentConfig is DeploymentConfig


PLACEMENT = textwrap.dedent(
    """
    import json, sys
    import keras
    import tensorflow as tf
    import keras_slim
    from keras_slim.cluster import LocalCluster

    with LocalCluster(workers=1, ps=2, one_process=True) as cluster:
        config = keras_slim.DeploymentConfig(
            num_ps_tasks=2, cluster_resolver=cluster.resolver()
        )
        with config.strategy().scope():
            inputs = keras.Input((4,))
            h = keras.layers.Dense(3, name="fc1")(inputs)
            outputs = keras.layers.Dense(2, name="fc2")(h)
            model = keras.Model(inputs, outputs)
        print(json.dumps({v.path: v.value.device for v in model.variables}))
    """
)


def test_variables_round_robin_over_two_ps_tasks(tmp_path):
    """model_deploy's placement test: with 2 ps tasks, variables alternate."""
    result = subprocess.run(
        [sys.executable, "-c", PLACEMENT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    devices = json.loads(result.stdout.strip().splitlines()[-1])
    tasks = [tf.DeviceSpec.from_string(d) for d in devices.values()]
    assert all(t.job == "ps" for t in tasks), devices
    assert [t.task for t in tasks] == [0, 1, 0, 1], devices
