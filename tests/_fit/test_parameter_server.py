"""SlimModel.fit and keras_slim.train under ParameterServerStrategy.

Each test runs tests/scripts/ps_train.py, the coordinator of a local
cluster of 2 workers and 2 parameter servers, every task a real gRPC
server in its own process (keras_slim.cluster.LocalCluster).
"""

import csv
import json
import os
import pathlib
import subprocess
import sys
import time
import types

import keras
import pytest
import tensorflow as tf

from keras_slim import _keras
from keras_slim._fit import parameter_server
from keras_slim._fit import scheduled_input
from tests.helpers import once_per_session

pytestmark = pytest.mark.prestarted  # tests/zygote.py

SCRIPT = str(pathlib.Path(__file__).parent.parent / "scripts" / "ps_train.py")


def run(tmp_path, name, *flags, logdir=None, env=None):
    out = tmp_path / f"{name}.json"
    logdir = logdir or tmp_path / f"{name}_logdir"
    process = subprocess.run(
        [sys.executable, SCRIPT, str(out), str(logdir), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **(env or {})),
    )
    assert process.returncode == 0, process.stderr[-4000:]
    with open(out) as f:
        return json.load(f), logdir


def job_task(device):
    spec = tf.DeviceSpec.from_string(device)
    return spec.job, spec.task


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    return once_per_session(
        tmp_path_factory,
        "parameter_server_fit",
        lambda: run(
            tmp_path_factory.mktemp("ps"),
            "fit",
            "--auto-fit",
            *["--then-train", "100"],
        ),
    )


def test_every_scheduled_step_counts(fitted):
    result, _ = fitted
    # 2 epochs x 160 steps on 2 asynchronous workers: Keras 3's
    # read-modify-write assign_add would lose some of them.
    assert result["iterations"] == 320
    # The loss tracker counted every example of the last epoch (batch 32).
    assert result["loss_count"] == 160 * 32


def test_steps_per_scheduled_call_are_chosen_where_callbacks_allow(fitted):
    result, _ = fitted
    # The first fit's callbacks act on batches: one step per call, and
    # every step counted (above). The second leaves it to the model.
    assert result["auto_ends"] == [9, 19, 29, 39]
    assert result["auto_steps"] == 40
    assert result["auto_after"] == 1  # evaluation keeps one per call


def test_history_and_training(fitted):
    result, logdir = fitted
    history = result["history"]
    assert set(history) == {"loss", "accuracy"}
    assert history["loss"][1] < history["loss"][0] < 1.1
    assert history["accuracy"][1] > 0.8
    # Keras's own callbacks run on the coordinator too.
    with open(logdir / "log.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["loss"]) for r in rows] == pytest.approx(history["loss"])


def test_state_lives_on_the_parameter_servers(fitted):
    result, _ = fitted
    placed = [job_task(d) for d in result["devices"].values()]
    assert placed == [("ps", 0), ("ps", 1), ("ps", 0), ("ps", 1)]
    for device in result["slot_devices"] + result["metric_devices"]:
        assert job_task(device)[0] == "ps", device


def test_the_coordinator_writes_checkpoints_and_summaries(fitted):
    _, logdir = fitted
    assert tf.train.latest_checkpoint(str(logdir)).endswith("model.ckpt-320")
    assert any(name.startswith("events.out") for name in os.listdir(logdir))


def test_bad_arguments_fail_before_any_step(fitted):
    result, _ = fitted
    assert "`steps_per_epoch` is required" in result["error_no_steps"]
    assert "`validation_data` is not supported" in result["error_validation"]
    assert "no `y`" in result["error_y"]
    assert "cannot roll back asynchronous steps" in result["error_rollback"]
    assert result["iterations_after_errors"] == 0


# The lost-task tests' epochs: 2 x 60 steps, not the script's 2 x 160
# (what they check, the steps counted across a lost task, does not grow
# with the run; each step is a round of RPCs to the servers).
LOST_STEPS = 60


def test_a_lost_worker_does_not_stop_training_all_lost_is_an_error(tmp_path):
    # Then a second fit loses both workers: TensorFlow's coordinator would
    # wait an hour for them; keras_slim's waits fail after
    # KERAS_SLIM_WORKER_TIMEOUT_SECS (here 3 s), naming them.
    started = time.monotonic()
    result, _ = run(
        tmp_path,
        "kill_worker",
        *["--steps", str(LOST_STEPS)],
        "--kill-worker-at",
        "30",
        "--steps-per-execution",
        "4",
        "--then-kill-all-workers-at",
        "5",
        env={parameter_server.WORKER_TIMEOUT_ENV: "3"},
    )
    assert time.monotonic() - started < 180
    error = result["all_lost_error"]
    assert "No worker has been reachable for 3 s" in error
    assert "lost workers ['127.0.0.1:" in error
    assert parameter_server.WORKER_TIMEOUT_ENV in error
    assert "error" not in result
    # The coordinator runs a lost worker's scheduled call again elsewhere
    # (at least once, as TF documents): steps the dead worker had already
    # applied count twice, at most one call's worth (4 steps).
    assert 2 * LOST_STEPS <= result["iterations"] <= 2 * LOST_STEPS + 4
    assert result["history"]["loss"][1] < result["history"]["loss"][0]


class FakeWorkers:
    def __init__(self):
        self.now, self.up = 0.0, {"a:1": True, "b:2": True}

    def clock(self):
        return self.now

    def probe(self, address):
        return self.up[address]


def test_worker_watch_bounds_the_wait_when_all_are_lost():
    fake = FakeWorkers()
    watch = parameter_server.WorkerWatch(
        ["a:1", "b:2"], 10, probe=fake.probe, clock=fake.clock
    )
    watch.check()
    fake.up["a:1"] = False
    fake.now = 30.0
    watch.check()  # b answers: training goes on
    fake.up["b:2"] = False
    for now in (31.0, 35.0, 40.0):
        fake.now = now
        watch.check()  # not yet 10 s without any
    fake.now = 41.0  # the next probe, 11 s after the last answer
    with pytest.raises(RuntimeError, match=r"for 10 s: lost workers \['a:1'"):
        watch.check()


@pytest.mark.parametrize("value", ["0", "-3", "soon", "inf"])
def test_a_bad_worker_timeout_names_the_variable(monkeypatch, value):
    monkeypatch.setenv(parameter_server.WORKER_TIMEOUT_ENV, value)
    with pytest.raises(ValueError, match="KERAS_SLIM_WORKER_TIMEOUT_SECS"):
        parameter_server.worker_timeout_secs()


def test_a_lost_ps_is_an_error_and_a_rerun_resumes(tmp_path):
    logdir = tmp_path / "logdir"
    steps = ["--steps", str(LOST_STEPS)]
    # Killed in the second epoch, after the checkpoint of step 50.
    first, _ = run(
        tmp_path, "first", *steps, "--kill-ps-at", "70", logdir=logdir
    )
    assert "A parameter server was lost" in first["error"]
    assert "resumes from the latest checkpoint" in first["error"]
    latest = tf.train.latest_checkpoint(str(logdir))
    saved = int(latest.rsplit("-", 1)[1])
    assert 0 < saved <= 70
    second, _ = run(tmp_path, "second", *steps, logdir=logdir)
    assert second["restored"] == latest
    assert second["iterations"] == saved + 2 * LOST_STEPS


def test_keras_slim_train(fitted):
    """On the fixture's cluster, a new model (one cluster start less),
    with learning-rate multipliers."""
    result, _ = fitted
    assert result["train_iterations"] == 100
    assert 0 < result["train_loss"] < 1.1
    assert result["train_latest"].endswith("model.ckpt-100")
    # Learning-rate multipliers hold on asynchronous workers: 100 Adam
    # steps at 0.01 move a variable about 0.01 each; fc1's, at 1e-4
    # times the rate, at most a few 1e-6 each.
    moved = result["train_moved"]
    assert max(moved["fc1/kernel"], moved["fc1/bias"]) < 5e-4
    assert min(moved["logits/kernel"], moved["logits/bias"]) > 1e-2


def test_atomic_updates_trace_single_ops():
    """The mechanism: a variable made atomic traces `assign_add` as one
    AssignAddVariableOp, not a read, an add and an assign; another
    variable keeps Keras's own method."""
    variable = keras.Variable(0.0)
    other = keras.Variable(0.0)

    def ops(function):
        graph = tf.function(function).get_concrete_function().graph
        return {op.type for op in graph.get_operations()}

    plain = ops(lambda: variable.assign_add(1.0))
    assert "AssignVariableOp" in plain and "AssignAddVariableOp" not in plain

    _keras.make_assign_add_atomic(variable)

    def atomic():
        variable.assign_add(1.0)
        variable.assign_sub(2.0)

    traced = ops(atomic)
    assert {"AssignAddVariableOp", "AssignSubVariableOp"} <= traced
    assert "AssignVariableOp" not in traced
    # Only that variable changed: no process-wide patch.
    assert "AssignAddVariableOp" not in ops(lambda: other.assign_add(1.0))


class FakeEpoch:
    """A model, run, callbacks, schedule and join for `_run_epoch`: each
    call scheduled is one step, applied when joined; `no_step_below`
    makes the calls before that batch run no step, as after a restore."""

    def __init__(self, steps_per_execution=1, no_step_below=0):
        self.steps_per_execution = steps_per_execution
        self.stop_training = False
        self.no_step = False
        self.no_step_below = no_step_below
        self.optimizer = types.SimpleNamespace(iterations=tf.Variable(0))
        self.pending, self.events, self.ends, self.args = 0, [], [], []

    def on_train_batch_begin(self, batch):
        self.no_step = batch < self.no_step_below

    def on_train_batch_end(self, batch, logs):
        self.ends.append(batch)

    def schedule(self, function, args):
        self.pending += 1
        self.events.append("S")
        self.args.append(args)

    def join(self):
        self.optimizer.iterations.assign_add(self.pending)
        self.pending = 0
        self.events.append("J")


def plan_of(fake, reads, startup=None):
    """A `_plan` for `_run_epoch` on a `FakeEpoch`."""
    return types.SimpleNamespace(
        run=fake,
        schedule=fake.schedule,
        step_function=None,
        reads=reads,
        join=fake.join,
        startup=startup,
    )


def test_startup_delay_starts_worker_i_at_i_times_the_delay():
    fake = FakeEpoch()
    plan = plan_of(
        fake,
        scheduled_input.WorkerReads(None),
        parameter_server.StartupDelay(2, workers=3),
    )
    parameter_server._run_epoch(fake, fake, plan, 10)
    # Steps 0-1: one call at a time (worker 0); steps 2-3: two at once;
    # from step 4 (= 2 x 2) every worker runs: no more waves.
    assert "".join(fake.events) == "SJSJSSJSSSSSS"
    assert parameter_server.StartupDelay(0, workers=3).concurrent(0) is None
    delay = parameter_server.StartupDelay(10, workers=4)
    assert [delay.concurrent(s) for s in (0, 9, 10, 25, 30)] == [
        1,
        1,
        2,
        3,
        None,
    ]


def test_coordinator_reads_skip_caught_up_calls_and_stop_at_the_end():
    """A restored epoch's first calls read nothing; each call is given a
    block of its batches; data that runs out stops with Keras's warning
    after its last batch."""
    fake = FakeEpoch(steps_per_execution=4, no_step_below=4)
    data = tf.data.Dataset.range(10).batch(1)  # 10 batches of shape (1,)
    reads = scheduled_input.CoordinatorReads(iter(data))
    with pytest.warns(UserWarning, match="Your input ran out of data"):
        parameter_server._run_epoch(fake, fake, plan_of(fake, reads), 20)
    assert fake.ends == [3, 7, 11, 13]
    assert fake.stop_training
    blocks = [(args[0].numpy().ravel().tolist(), args[1]) for args in fake.args]
    assert blocks == [([0, 1, 2, 3], 4), ([4, 5, 6, 7], 4), ([8, 9], 2)]
