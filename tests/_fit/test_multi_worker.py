"""SlimModel.fit and keras_slim.train under MultiWorkerMirroredStrategy.

Two worker processes on loopback (keras_slim.cluster.LocalCluster), each
a real gRPC server, against one process on the same global batch: the
same history and weights. Keras 3.15's own fit fails there (see
keras_slim/_train_function.py and SlimModel._maybe_symbolic_build).
"""

import concurrent.futures
import glob
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from keras_slim.cluster import LocalCluster
from tests.helpers import once_per_session

pytestmark = pytest.mark.prestarted  # tests/zygote.py

SCRIPT = str(
    pathlib.Path(__file__).parent.parent / "scripts" / "multi_worker_train.py"
)


def results(out_dir, tasks):
    loaded = []
    for task in range(tasks):
        with open(os.path.join(out_dir, f"result-{task}.json")) as f:
            loaded.append(json.load(f))
    return loaded


def run_cluster(tmp_path, mode):
    out, logdir = tmp_path / "cluster", tmp_path / "cluster_logdir"
    out.mkdir()
    with LocalCluster(workers=2) as cluster:
        runs = cluster.run(
            [sys.executable, SCRIPT, str(out), str(logdir), mode], timeout=240
        )
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    return results(out, 2), logdir


def run_single(tmp_path, mode):
    out, logdir = tmp_path / "single", tmp_path / "single_logdir"
    out.mkdir()
    run = subprocess.run(
        [sys.executable, SCRIPT, str(out), str(logdir), mode],
        capture_output=True,
        text=True,
        timeout=240,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return results(out, 1)[0], logdir


def run_both(tmp_path, mode):
    """`run_cluster` and `run_single` at the same time (independent
    processes; the workers wait on each other's collectives)."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        single = pool.submit(run_single, tmp_path, mode)
        return run_cluster(tmp_path, mode), single.result()


def assert_same_weights(a, b):
    for x, y in zip(a, b, strict=True):
        np.testing.assert_allclose(np.array(x), np.array(y), atol=2e-6)


@pytest.fixture(scope="module")
def fit_runs(tmp_path_factory):
    def make():
        return run_both(tmp_path_factory.mktemp("fit"), "fit")

    return once_per_session(tmp_path_factory, "multi_worker_fit", make)


def test_two_workers_fit_like_one_process(fit_runs):
    (workers, _), (single, _) = fit_runs
    for worker in workers:
        for name, values in single["history"].items():
            np.testing.assert_allclose(
                worker["history"][name], values, rtol=1e-5, err_msg=name
            )
        assert_same_weights(worker["weights"], single["weights"])
    assert [w["is_chief"] for w in workers] == [True, False]


def test_only_the_chief_writes(fit_runs):
    (_, logdir), _ = fit_runs
    names = sorted(os.listdir(logdir))
    assert "checkpoint" in names
    assert "model.ckpt-20.index" in names and "model.ckpt-5.index" in names
    # One events file (the chief's), one trace; no worker's temporary
    # directory is left, inside or beside the logdir.
    assert len(glob.glob(str(logdir / "events.out.tfevents.*"))) == 1
    assert names.count("tf_trace-3.json") == 1
    assert not glob.glob(str(logdir) + "*workertemp*")
    assert not glob.glob(str(logdir / "*workertemp*"))


@pytest.fixture(scope="module")
def train_single(tmp_path_factory):
    """One process's `train` run: what each cluster's `train` equals."""

    def make():
        return run_single(tmp_path_factory.mktemp("train_single"), "train")

    return once_per_session(tmp_path_factory, "multi_worker_train", make)


def test_train_under_two_workers(tmp_path, train_single):
    """keras_slim.train with gradient accumulation (2 micro-batches a
    step): two workers equal one process, and the step is an optimizer
    step (20 of them, 40 micro-batches)."""
    workers, logdir = run_cluster(tmp_path, "train")
    single, _ = train_single
    for worker in workers:
        assert (
            "`startup_delay_steps` must be 0" in worker["startup_delay_error"]
        )
        assert_same_weights(worker["weights"], single["weights"])
        assert worker["batches"] == single["batches"] == 40
    # Each worker returns the loss of its half of the global batch (TF-Slim
    # returned the chief's own): their mean is the global batch's loss.
    mean = (workers[0]["loss"] + workers[1]["loss"]) / 2
    assert mean == pytest.approx(single["loss"], rel=1e-5)
    assert workers[0]["loss"] != pytest.approx(workers[1]["loss"], rel=1e-3)
    assert "model.ckpt-20.index" in os.listdir(logdir)


def test_a_signal_to_one_worker_stops_all_at_one_saved_step(tmp_path, fit_runs):
    _, (single, _) = fit_runs
    out, logdir = tmp_path / "cluster", tmp_path / "cluster_logdir"
    out.mkdir()
    command = [sys.executable, SCRIPT, str(out), str(logdir), "preempt"]
    with LocalCluster(workers=2, env={"PREEMPT_AT": "7"}) as cluster:
        runs = cluster.run(command, timeout=240)
    assert [r.returncode for r in runs] == [42, 42], runs[0].stderr[-3000:]
    chief, worker = results(out, 2)
    # Task 1 got SIGTERM; both stopped at the same step, the chief saved.
    assert chief["step"] == worker["step"] >= 7
    assert worker["signal_name"] == "SIGTERM"
    assert chief["signal_name"] == "a signal to another worker"
    assert chief["checkpoint"] == str(logdir / f"model.ckpt-{chief['step']}")
    assert worker["checkpoint"] is None
    assert sorted(p.name for p in logdir.glob("*.index")) == [
        f"model.ckpt-{chief['step']}.index"
    ]
    # The rerun resumes there and ends where one uninterrupted process does.
    with LocalCluster(workers=2) as cluster:
        runs = cluster.run(command, timeout=240)
    for run in runs:
        assert run.returncode == 0, run.stderr[-3000:]
    for result in results(out, 2):
        assert result["start_step"] == chief["step"]
        assert_same_weights(result["weights"], single["weights"])


def test_train_as_two_tasks_of_a_slurm_step(tmp_path, train_single):
    """SLURM's environment as `srun` gives two tasks on one node (no
    `TF_CONFIG`): the two synchronous replicas train to one process's
    weights (tests/test_cluster_env.py: the resolver's mapping)."""
    from tests.test_cluster_env import consecutive_free_ports
    from tests.test_cluster_env import slurm_env

    out, logdir = tmp_path / "slurm", tmp_path / "slurm_logdir"
    out.mkdir()
    base = consecutive_free_ports(2)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("TF_CONFIG", None)
    processes = [
        subprocess.Popen(
            [sys.executable, SCRIPT, str(out), str(logdir), "train"],
            env={**env, **slurm_env(rank, 2), "SLURM_PORT_BASE": str(base)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for rank in range(2)
    ]
    try:
        errors = [p.communicate(timeout=240)[1] for p in processes]
    finally:
        for p in processes:
            p.kill()
    assert [p.returncode for p in processes] == [0, 0], errors[0][-3000:]
    single, _ = train_single
    workers = results(out, 2)
    assert [w["is_chief"] for w in workers] == [True, False]
    for worker in workers:
        assert_same_weights(worker["weights"], single["weights"])
