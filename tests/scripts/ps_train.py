"""SlimModel.fit as the coordinator of a local parameter-server cluster.

Usage: python ps_train.py OUT_JSON LOGDIR [--steps N] [--epochs N]
       [--kill-worker-at N] [--kill-ps-at N] [--then-kill-all-workers-at N]
       [--steps-per-execution N] [--auto-fit] [--then-train N]

Starts keras_slim.cluster.LocalCluster(workers=2, ps=2) (real gRPC servers
on 127.0.0.1: each task to be killed in its own process, the others in
one), trains a SlimModel with a gradient policy, and writes what the tests
check to OUT_JSON.
"""

import argparse
import json
import os
import pathlib
import sys

os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_slim  # noqa: E402
from keras_slim import callbacks  # noqa: E402
from keras_slim.cluster import LocalCluster  # noqa: E402

# The repository's root, for the model the tests share (tests/helpers.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.helpers import compile_model  # noqa: E402
from tests.helpers import global_step  # noqa: E402
from tests.helpers import mlp  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("out")
parser.add_argument("logdir")
parser.add_argument("--steps", type=int, default=160)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--kill-worker-at", type=int)
parser.add_argument("--kill-ps-at", type=int)
parser.add_argument("--then-kill-all-workers-at", type=int)
# Left to the model ("auto") unless given.
parser.add_argument("--steps-per-execution", type=int)
parser.add_argument(
    "--auto-fit", action="store_true", help="then a fit with auto steps"
)
parser.add_argument(
    "--then-train",
    type=int,
    help="then keras_slim.train of a new model on the same cluster, to "
    "this many steps, in <logdir>_train",
)
args = parser.parse_args()


def dataset_fn(input_context):
    rng = np.random.default_rng(input_context.input_pipeline_id)
    x = rng.normal(size=(640, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat()


class Kill(keras.callbacks.Callback):
    """Kills a worker or a parameter server after some batches."""

    def __init__(self, cluster):
        super().__init__()
        self.cluster = cluster
        self.batches = 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.batches == args.kill_worker_at:
            self.cluster.kill("worker", 1)
        if self.batches == args.kill_ps_at:
            self.cluster.kill("ps", 1)


class CallEnds(callbacks.StepCallback):
    """Records the batch that ends each scheduled call; constrains none."""

    def __init__(self):
        super().__init__()
        self.ends = []

    def step_multiples(self, model):
        return []

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self.ends.append(batch)


class KillAll(keras.callbacks.Callback):
    """Kills every worker still alive after some batches."""

    def __init__(self, cluster, at):
        super().__init__()
        self.cluster, self.at, self.batches = cluster, at, 0

    def on_train_batch_end(self, batch, logs=None):
        self.batches += 1
        if self.batches == self.at:
            for index in range(2):
                if self.cluster._servers[("worker", index)].poll() is None:
                    self.cluster.kill("worker", index)


result = {}
# The tasks to be killed get a process each; the others share one.
alone = [("worker", 1)] if args.kill_worker_at else []
alone += [("worker", 0), ("worker", 1)] if args.then_kill_all_workers_at else []
alone += [("ps", 1)] if args.kill_ps_at else []
with LocalCluster(workers=2, ps=2, one_process=True, alone=alone) as cluster:
    config = keras_slim.DeploymentConfig(
        num_ps_tasks=2, cluster_resolver=cluster.resolver()
    )
    with config.strategy().scope():
        policy = keras_slim.GradientPolicy(
            clip_norm=1.0, multipliers={"logits/.*": 2.0}
        )
        model = compile_model(
            mlp(policy),
            keras_slim.optimizers.Adam(0.01),
            steps_per_execution=args.steps_per_execution or "auto",
        )
    # Bad calls fail before any step.
    for name, kwargs in {
        "no_steps": {},
        "validation": {"steps_per_epoch": 5, "validation_data": dataset_fn},
        "y": {"steps_per_epoch": 5, "y": np.zeros(3)},
        "rollback": {
            "steps_per_epoch": 5,
            "callbacks": [keras_slim.callbacks.NanLossGuard(rollback=1)],
        },
    }.items():
        try:
            model.fit(dataset_fn, verbose=0, **kwargs)
        except ValueError as error:
            result[f"error_{name}"] = str(error)
    result["iterations_after_errors"] = global_step(model)
    saver = callbacks.Checkpoints(args.logdir, every_n_steps=50)
    try:
        history = model.fit(
            dataset_fn,
            epochs=args.epochs,
            steps_per_epoch=args.steps,
            verbose=0,
            # Left at Keras's defaults: accepted under parameter servers.
            validation_freq=1,
            shuffle=True,
            callbacks=[
                saver,
                callbacks.LogEveryNSteps(50),
                callbacks.Summaries(args.logdir, every_n_steps=50),
                keras.callbacks.CSVLogger(os.path.join(args.logdir, "log.csv")),
                Kill(cluster),
            ],
        )
        result["history"] = history.history
        result["restored"] = saver.restored_path
    except RuntimeError as error:
        result["error"] = str(error)
    if "error" not in result:
        result["iterations"] = global_step(model)
        result["loss_count"] = float(model._loss_tracker.count.numpy())
        result["devices"] = {v.path: v.value.device for v in model.variables}
        result["slot_devices"] = [
            v.value.device for v in model.optimizer.variables
        ]
        result["metric_devices"] = [
            v.value.device for m in model.metrics for v in m.variables
        ]
    if args.auto_fit and "error" not in result:
        # Steps per scheduled call left to the model: 40 steps on 2
        # workers, log lines every 10 steps -> calls of 10.
        ends = CallEnds()
        before = global_step(model)
        model.fit(
            dataset_fn,
            steps_per_epoch=40,
            verbose=0,
            callbacks=[callbacks.LogEveryNSteps(10), ends],
        )
        result["auto_ends"] = ends.ends
        result["auto_steps"] = global_step(model) - before
        result["auto_after"] = model.steps_per_execution
    if args.then_train:
        with config.strategy().scope():
            # fc1 at 1e-4 times the rate: it barely moves if the workers'
            # steps scale it.
            fresh = compile_model(
                mlp(
                    keras_slim.GradientPolicy(
                        clip_norm=1.0, lr_multipliers={"fc1/.*": 1e-4}
                    )
                ),
                keras_slim.optimizers.Adam(0.01),
            )
        initial = {v.path: v.numpy() for v in fresh.trainable_variables}
        train_dir = args.logdir.rstrip("/") + "_train"
        result["train_loss"] = keras_slim.train(
            fresh,
            dataset_fn,
            logdir=train_dir,
            number_of_steps=args.then_train,
            save_interval_steps=50,
            log_every_n_steps=25,
            # Worker 1 starts at global step 10 (TF-Slim's meaning).
            startup_delay_steps=10,
        )
        result["train_iterations"] = global_step(fresh)
        result["train_moved"] = {
            v.path: float(np.max(np.abs(v.numpy() - initial[v.path])))
            for v in fresh.trainable_variables
        }
        result["train_latest"] = tf.train.latest_checkpoint(train_dir)
    if args.then_kill_all_workers_at:
        # A second fit loses every worker: an error within the bound.
        try:
            model.fit(
                dataset_fn,
                steps_per_epoch=args.steps,
                verbose=0,
                callbacks=[KillAll(cluster, args.then_kill_all_workers_at)],
            )
        except RuntimeError as error:
            result["all_lost_error"] = str(error)
with open(args.out, "w") as f:
    json.dump(result, f)
