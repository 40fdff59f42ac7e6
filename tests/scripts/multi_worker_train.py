"""Trains one model as one worker of a local cluster, or as one process.

Usage: python multi_worker_train.py OUT_DIR LOGDIR {fit,train,preempt}

Under TF_CONFIG (keras_slim.cluster.LocalCluster.run), or as a task of a
SLURM job step (SLURM_PROCID ...; SLURM_PORT_BASE, the resolver's first
port), this is a worker of a MultiWorkerMirroredStrategy from
DeploymentConfig; without either, one
process on the same global batch of 64. Writes OUT_DIR/result-<task>.json:
history (fit) or the returned loss (train), and the final weights.
`train` runs keras_slim.train with Keras's gradient accumulation (2
micro-batches a step). `preempt` fits with checkpoints on time only;
with PREEMPT_AT=N, task 1 sends itself SIGTERM once the global step
reaches N, and each task writes what `TrainingPreemptedError` said, then
exits with status 42.
"""

import json
import os
import pathlib
import signal
import sys

import keras
import numpy as np
import tensorflow as tf

import keras_slim
from keras_slim import _keras_optimizer
from keras_slim import callbacks

# The repository's root, for the model the tests share (tests/helpers.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.helpers import compile_model  # noqa: E402
from tests.helpers import global_step  # noqa: E402
from tests.helpers import mlp  # noqa: E402

out_dir, logdir, mode = sys.argv[1:4]
tf_config = json.loads(os.environ.get("TF_CONFIG", "{}"))
task = tf_config.get("task", {}).get("index", 0)
if "SLURM_PROCID" in os.environ:  # a task of a SLURM job step: no TF_CONFIG
    task = int(os.environ["SLURM_PROCID"])
    tf_config = {"slurm": True}
if tf_config:
    config = keras_slim.DeploymentConfig(
        num_replicas=2,
        replica_id=task,
        slurm_port_base=int(os.environ.get("SLURM_PORT_BASE", 8888)),
    )
    strategy = config.strategy()
    is_chief = config.is_chief
else:
    strategy = tf.distribute.get_strategy()
    is_chief = True

rng = np.random.default_rng(0)
x = rng.normal(size=(640, 8)).astype("float32")
y = rng.integers(0, 3, size=640).astype("int32")
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = (
    tf.data.experimental.AutoShardPolicy.DATA
)
data = (
    tf.data.Dataset.from_tensor_slices((x, y))
    .batch(64)
    .repeat()
    .with_options(options)
)

with strategy.scope():
    policy = keras_slim.GradientPolicy(
        clip_norm=0.5,
        multipliers={"logits/.*": 2.0},
        lr_multipliers={"fc1/.*": 0.5},
    )
    # `train` also accumulates: 2 micro-batches of 64 per optimizer step.
    accumulate = {"gradient_accumulation_steps": 2} if mode == "train" else {}
    model = compile_model(
        mlp(policy), keras_slim.optimizers.Momentum(0.1, 0.9, **accumulate)
    )


class Preempt(callbacks.StepCallback):
    """SIGTERM to this process once the global step reaches `at`."""

    def __init__(self, at):
        super().__init__()
        self.at = at

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self.at is not None and self.counter.step >= self.at:
            self.at = None
            os.kill(os.getpid(), signal.SIGTERM)


class StartStep(keras.callbacks.Callback):
    """Records the global step at train begin (after a restore)."""

    def on_train_begin(self, logs=None):
        result["start_step"] = global_step(self.model)


result = {"task": task, "is_chief": is_chief}
if mode == "preempt":
    at = os.environ.get("PREEMPT_AT")
    try:
        model.fit(
            data,
            epochs=2,
            steps_per_epoch=10,
            verbose=0,
            callbacks=[
                Preempt(int(at) if at and task == 1 else None),
                callbacks.Checkpoints(logdir),
                StartStep(),
            ],
        )
    except keras_slim.TrainingPreemptedError as error:
        result.update(
            step=error.step,
            checkpoint=error.checkpoint,
            signal_name=error.signal_name,
        )
        with open(os.path.join(out_dir, f"result-{task}.json"), "w") as f:
            json.dump(result, f)
        sys.exit(keras_slim.errors.PREEMPTED_EXIT_CODE)
elif mode == "fit":
    history = model.fit(
        data,
        epochs=2,
        steps_per_epoch=10,
        verbose=0,
        callbacks=[
            c
            for c in [
                callbacks.Checkpoints(logdir, every_n_steps=5),
                callbacks.Summaries(logdir, every_n_steps=5),
                callbacks.LogEveryNSteps(5),
                callbacks.Trace(logdir, at_steps=[3]),
            ]
            if type(c).__name__ in os.environ.get("ONLY", type(c).__name__)
        ],
    )
    result["history"] = history.history
else:
    try:
        if tf_config:  # No error on one process: it would train.
            keras_slim.train(
                model,
                data,
                logdir=logdir,
                number_of_steps=20,
                startup_delay_steps=5,
            )
    except ValueError as error:
        result["startup_delay_error"] = str(error)
    result["loss"] = keras_slim.train(
        model,
        data,
        logdir=logdir,
        number_of_steps=20,
        save_summaries_steps=5,
        save_interval_steps=5,
        log_every_n_steps=5,
    )
result["weights"] = [w.tolist() for w in model.get_weights()]
result["batches"] = int(
    _keras_optimizer.micro_step_counter(model.optimizer).numpy()
)
with open(os.path.join(out_dir, f"result-{task}.json"), "w") as f:
    json.dump(result, f)
