"""Runs of one worker of a local cluster that
tests/_fit/test_multi_worker_resume.py compares: exact resume per worker
under MultiWorkerMirroredStrategy.

Usage: python multi_worker_resume.py ROOT PHASE [PHASE ...]

Each PHASE is `DIR:EPOCHS`: a new model (as a new process would build it)
fits EPOCHS epochs with `Checkpoints(ROOT/DIR, every_n_steps=5)`, resuming
what ROOT/DIR holds; the phases run one after the other in this process.
With KILL_AT=N in the environment, the worker of task KILL_TASK kills
itself with SIGKILL KILL_DELAY seconds after its last phase reached global
step N (so the kill lands in a step, between calls or in a save).

The input is shuffled each epoch and augmented with stateless noise
seeded per batch by `tf.data.Dataset.random`, read by each worker in its
share (6 global batches of 16 per epoch, 8 examples per worker); the model
has `Dropout` and Adam's moving averages.
"""

import json
import os
import pathlib
import signal
import sys
import threading

import keras
import numpy as np
import tensorflow as tf

import keras_slim
from keras_slim import callbacks

# The repository's root, for the model the tests share (tests/helpers.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.helpers import augmented  # noqa: E402
from tests.helpers import compile_model  # noqa: E402
from tests.helpers import global_step  # noqa: E402
from tests.helpers import mlp  # noqa: E402

root, phases = pathlib.Path(sys.argv[1]), sys.argv[2:]
task = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
strategy = keras_slim.DeploymentConfig(
    num_replicas=2, replica_id=task
).strategy()

rng = np.random.default_rng(0)
x = rng.normal(size=(96, 8)).astype("float32")
y = rng.integers(0, 3, size=96).astype("int32")


def dataset():
    data = tf.data.Dataset.from_tensor_slices((x, y))
    data = data.shuffle(96, seed=3, reshuffle_each_iteration=True).batch(16)
    return augmented(data)


class KillAt(callbacks.StepCallback):
    """SIGKILL to this process `delay` seconds after the step reached `at`."""

    def __init__(self, at, delay):
        super().__init__()
        self.at, self.delay = at, delay

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self.at is not None and self.counter.step >= self.at:
            self.at = None
            kill = threading.Timer(
                self.delay, os.kill, (os.getpid(), signal.SIGKILL)
            )
            kill.daemon = True
            kill.start()


class Started(keras.callbacks.Callback):
    """Records the global step at train begin (after a restore)."""

    def __init__(self, name):
        super().__init__()
        self.name = name

    def on_train_begin(self, logs=None):
        step = global_step(self.model)
        path = root / f"start-{self.name}-{task}.json"
        path.write_text(json.dumps(step))


kill = None
if os.environ.get("KILL_AT") and int(os.environ["KILL_TASK"]) == task:
    kill = KillAt(int(os.environ["KILL_AT"]), float(os.environ["KILL_DELAY"]))
for number, phase in enumerate(phases):
    name, epochs = phase.split(":")
    keras.utils.set_random_seed(7)
    with strategy.scope():
        model = compile_model(
            mlp(seed=7, activation="relu", dropout=0.3),
            keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9),
            metrics=None,
        )
    last = number == len(phases) - 1
    model.fit(
        dataset(),
        epochs=int(epochs),
        verbose=0,
        callbacks=[
            callbacks.Checkpoints(
                str(root / name), every_n_steps=5, every_n_secs=None
            ),
            Started(name),
            *([kill] if kill is not None and last else []),
        ],
    )
