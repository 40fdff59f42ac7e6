"""Clusters found where users run them: a SLURM job step, Kubeflow's TFJob.

SLURM's environment as `srun` gives each task (the node 127.0.0.1, read
by TensorFlow's `SlurmClusterResolver`), and the `TF_CONFIG` Kubeflow's
operator derives from the manifest of docs/tutorials/deployment.md, fed
to real processes: parameter servers through `keras-slim-train` (the
chief trains to its last step, the servers end with status 0). Two
synchronous replicas of a SLURM step train to the weights of one process
in tests/_fit/test_multi_worker.py.
"""

import json
import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import time

import pytest
import tensorflow as tf
import yaml

import keras_slim
from keras_slim.image import train_image_classifier as train_cli

pytestmark = pytest.mark.prestarted  # tests/zygote.py

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "tutorials" / "deployment.md"
SLURM_VARIABLES = (
    "SLURM_PROCID",
    "SLURM_STEP_NUM_TASKS",
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE",
    "TF_CONFIG",
)


def slurm_env(rank, tasks, nodes="127.0.0.1", per_node=None):
    """What `srun` sets in task `rank`'s environment."""
    return {
        "SLURM_PROCID": str(rank),
        "SLURM_STEP_NUM_TASKS": str(tasks),
        "SLURM_STEP_NODELIST": nodes,
        "SLURM_STEP_TASKS_PER_NODE": per_node or str(tasks),
    }


@pytest.fixture
def slurm(monkeypatch):
    """Sets task `rank` of a SLURM job step in this process."""
    for name in SLURM_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def enter(rank, tasks, **kwargs):
        for name, value in slurm_env(rank, tasks, **kwargs).items():
            monkeypatch.setenv(name, value)

    return enter


def consecutive_free_ports(count):
    """A base port whose `count` ports from it are free on 127.0.0.1."""
    for _ in range(200):
        base = 20000 + int.from_bytes(os.urandom(2), "big") % 30000
        sockets = []
        try:
            for port in range(base, base + count):
                s = socket.socket()
                s.bind(("127.0.0.1", port))
                sockets.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError("no free ports")


def test_replicas_of_a_slurm_step_on_two_nodes(slurm):
    slurm(3, 4, nodes="node[07-08]", per_node="2(x2)")
    config = keras_slim.DeploymentConfig(num_replicas=4, replica_id=3)
    spec = config.cluster_resolver.cluster_spec().as_dict()
    assert spec == {
        "worker": [
            "node07:8888",
            "node07:8889",
            "node08:8888",
            "node08:8889",
        ]
    }
    resolver = config.cluster_resolver
    assert (resolver.task_type, resolver.task_id) == ("worker", 3)
    assert config.cluster_source == "SLURM"
    assert not config.is_chief and not config.serves
    assert "cluster (from SLURM)" in config.describe()


@pytest.mark.parametrize(
    "rank, task, serves",
    [(0, ("chief", 0), False), (1, ("ps", 0), True), (3, ("worker", 1), True)],
)
def test_parameter_servers_of_a_slurm_step(slurm, rank, task, serves):
    slurm(rank, 4)
    config = keras_slim.DeploymentConfig(num_ps_tasks=1, slurm_port_base=9000)
    spec = config.cluster_resolver.cluster_spec().as_dict()
    assert spec == {
        "chief": ["127.0.0.1:9000"],
        "ps": ["127.0.0.1:9001"],
        "worker": ["127.0.0.1:9002", "127.0.0.1:9003"],
    }
    resolver = config.cluster_resolver
    assert (resolver.task_type, resolver.task_id) == task
    assert config.serves is serves
    assert config.is_chief is (rank == 0)


def test_tf_config_comes_before_slurm(slurm, monkeypatch):
    slurm(1, 2)
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps(
            {
                "cluster": {"worker": ["a:1", "b:2"]},
                "task": {"type": "worker", "index": 0},
            }
        ),
    )
    config = keras_slim.DeploymentConfig(num_replicas=2)
    assert config.cluster_resolver.cluster_spec().as_dict() == {
        "worker": ["a:1", "b:2"]
    }
    assert config.cluster_source == "TF_CONFIG"


@pytest.mark.parametrize(
    "kwargs, tasks, message",
    [
        ({"num_replicas": 2}, 3, "num_replicas=2 but the SLURM job step has 3"),
        ({"num_ps_tasks": 2}, 3, "num_ps_tasks=2 needs at least 4 tasks"),
        (
            {"num_ps_tasks": 1, "worker_job_name": "a_workers"},
            3,
            "whose job name must sort after 'ps'",
        ),
    ],
)
def test_a_slurm_step_that_does_not_fit(slurm, kwargs, tasks, message):
    slurm(0, tasks)
    with pytest.raises(ValueError, match=re.escape(message)):
        keras_slim.DeploymentConfig(**kwargs).cluster_resolver


@pytest.mark.parametrize("rank", [0, 1])
def test_the_commands_dry_run_says_the_slurm_cluster(
    slurm, rank, tmp_path, capsys
):
    slurm(rank, 2)
    argv = ["--train_dir", str(tmp_path), "--worker_replicas=2", "--dry_run"]
    assert train_cli.main(argv) == 0
    out = capsys.readouterr().out
    assert 'cluster (from SLURM): {"worker": ["127.0.0.1:8888", ' in out
    assert f"this task: worker {rank}" in out
    assert f"this is replica {rank}" in out


# -- Real processes ---------------------------------------------------------

TRAIN = [sys.executable, "-m", "keras_slim.image.train_image_classifier"]
STEPS = 20


def start(argv, env, log):
    return subprocess.Popen(
        argv,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )


def wait_all(processes, timeout=240):
    """Each process's exit status; every wait bounded, the processes killed
    past `timeout`."""
    deadline = time.monotonic() + timeout
    try:
        return [
            p.wait(max(deadline - time.monotonic(), 0.1)) for p in processes
        ]
    finally:
        for p in processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(30)


def run_parameter_servers(
    tmp_path, tasks, chief_argv, server_argv, signal_servers
):
    """Starts the servers, then the chief; returns `(codes, logs)` once the
    chief has ended and the servers after it (SIGTERM to them first when
    `signal_servers`, as Kubeflow's cleanup does)."""
    logs, processes = [], []
    for i, (argv, env) in enumerate(
        [(server_argv, env) for env in tasks[1:]] + [(chief_argv, tasks[0])]
    ):
        path = tmp_path / f"task{i}.log"
        logs.append(path)
        processes.append(start(argv, env, open(path, "w")))
    servers, chief = processes[:-1], processes[-1]
    chief_code = wait_all([chief])[0]
    if signal_servers:
        for p in servers:
            p.send_signal(signal.SIGTERM)
    codes = wait_all(servers, timeout=60) + [chief_code]
    texts = [path.read_text() for path in logs]
    return codes, texts[-1], texts[:-1]


def short(argv, train_dir):
    """The command as written, with this test's train_dir and few steps."""
    argv = [a for a in argv if not a.startswith(("--train_dir", "--max_"))]
    return argv + [
        f"--train_dir={train_dir}",
        f"--max_number_of_steps={STEPS}",
        "--save_summaries_secs=3600",
        "--nosummarize_activations",
    ]


def assert_trained(chief_log, train_dir, source):
    assert f"cluster (from {source})" in chief_log, chief_log[-3000:]
    assert "held-out accuracy" in chief_log, chief_log[-3000:]
    latest = tf.train.latest_checkpoint(str(train_dir))
    assert latest and latest.endswith(f"model.ckpt-{STEPS}")


def sh_block(page, marker):
    """The ```sh block of `page` holding `marker`."""
    blocks = re.findall(r"```sh\n(.*?)```", page, flags=re.DOTALL)
    return next(b for b in blocks if marker in b)


def test_parameter_servers_on_a_slurm_step(tmp_path):
    script = sh_block(PAGE.read_text(), "--num_ps_tasks")
    tasks = int(re.search(r"#SBATCH --ntasks=(\d+)", script).group(1))
    srun = script.split("srun ", 1)[1].replace("\\\n", " ").split()
    assert srun[0] == "keras-slim-train"
    train_dir = tmp_path / "train"
    base = consecutive_free_ports(tasks)
    argv = TRAIN + short(srun[1:], train_dir) + [f"--slurm_port_base={base}"]
    envs = [slurm_env(rank, tasks) for rank in range(tasks)]
    codes, chief, servers = run_parameter_servers(
        tmp_path, envs, argv, argv, signal_servers=False
    )
    assert codes == [0] * tasks, (chief[-2000:], [s[-1000:] for s in servers])
    assert_trained(chief, train_dir, "SLURM")
    # Ranks 1, 2, 3: the parameter server, then the workers; each ended
    # when the coordinator had.
    for log, task in zip(servers, ["ps 0", "worker 0", "worker 1"]):
        assert f"Serving {task} at " in log, log[-2000:]
        assert "has ended: stopping" in log, log[-2000:]


def test_parameter_servers_of_kubeflows_tfjob(tmp_path):
    page = PAGE.read_text()
    manifest = yaml.safe_load(
        re.search(r"```yaml\n(.*?)```", page, flags=re.DOTALL).group(1)
    )
    assert manifest["kind"] == "TFJob"
    replicas = manifest["spec"]["tfReplicaSpecs"]
    # The operator's TF_CONFIG: the replicas' services, here on loopback.
    jobs = {name.lower(): spec["replicas"] for name, spec in replicas.items()}
    base = consecutive_free_ports(sum(jobs.values()))
    ports = iter(range(base, base + sum(jobs.values())))
    cluster = {
        job: [f"127.0.0.1:{next(ports)}" for _ in range(n)]
        for job, n in jobs.items()
    }

    def env(job, index):
        config = {
            "cluster": cluster,
            "task": {"type": job, "index": index},
            "environment": "cloud",
        }
        return {"TF_CONFIG": json.dumps(config)}

    def command(job):
        container = replicas[job]["template"]["spec"]["containers"][0]
        assert container["command"][0] == "keras-slim-train"
        return TRAIN + short(container["command"][1:], tmp_path / "train")

    envs = [env("chief", 0)] + [
        env(job, i) for job in ("ps", "worker") for i in range(jobs[job])
    ]
    assert command("PS") == command("Worker")  # one image, one command
    codes, chief, servers = run_parameter_servers(
        tmp_path, envs, command("Chief"), command("Worker"), signal_servers=True
    )
    assert codes == [0] * len(envs), chief[-2000:]
    assert_trained(chief, tmp_path / "train", "TF_CONFIG")
    for log in servers:
        assert "Serving " in log and "until SIGTERM or SIGINT." in log
