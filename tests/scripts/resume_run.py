"""A training run that tests/test_resume.py kills with SIGKILL and reruns.

Usage: resume_run.py MODE STRATEGY INPUT LOGDIR OUT [SAVE_EVERY]

- MODE: `fit` (`SlimModel.fit` with `Checkpoints`, 3 epochs) or `train`
  (`keras_slim.train`, 36 steps);
- STRATEGY: `default` or `mirrored` (2 logical CPU devices);
- INPUT: `dataset` (shuffled each epoch, randomly augmented with
  stateless ops seeded by `tf.data.Dataset.random`) or `arrays` (NumPy
  arrays, shuffled by `fit` / repeated by `train`).

SAVE_EVERY: the checkpoint interval in steps (4); 0 saves on time only
(every 600 s, so in practice on a signal and at the end). A run stopped by
SIGTERM or SIGINT prints `preempted STEP PATH` and exits with 42.

The model has `Dropout`. Each step prints `step N` (the parent kills the
process when it sees the step it chose); the run saves its final weights
to OUT. Op determinism is on, so two runs are bitwise equal.
"""

import pathlib
import sys
import time

import numpy as np
import tensorflow as tf

MODE, STRATEGY, INPUT, LOGDIR, OUT = sys.argv[1:6]
SAVE_EVERY = int(sys.argv[6]) if len(sys.argv) > 6 else 4

if STRATEGY == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2
    )
tf.config.experimental.enable_op_determinism()

import keras  # noqa: E402

import keras_slim  # noqa: E402

# The repository's root, for the model the tests share (tests/helpers.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.helpers import augmented  # noqa: E402
from tests.helpers import compile_model  # noqa: E402
from tests.helpers import global_step  # noqa: E402
from tests.helpers import mlp  # noqa: E402

keras.utils.set_random_seed(7)
rng = np.random.default_rng(0)
x = rng.normal(size=(120, 8)).astype("float32")
y = rng.integers(0, 3, size=120).astype("int32")


def dataset():
    data = tf.data.Dataset.from_tensor_slices((x, y))
    data = data.shuffle(120, seed=3, reshuffle_each_iteration=True)
    data = data.batch(10)
    if MODE == "train":
        data = data.repeat()
    return augmented(data)


def build():
    return compile_model(
        mlp(seed=7, activation="relu", dropout=0.3),
        keras.optimizers.Adam(0.01),
        metrics=None,
    )


class PrintStep(keras_slim.callbacks.StepCallback):
    """Prints the global step after each call (several steps per call)."""

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if not self.no_step:
            print(f"step {self.counter.step}", flush=True)
            # Time for the parent's SIGKILL to land near the step it chose
            # (in this pause, the next step or the next save).
            time.sleep(0.02)


if STRATEGY == "mirrored":
    strategy = keras_slim.DeploymentConfig(2, clone_on_cpu=True).strategy()
else:
    strategy = tf.distribute.get_strategy()
with strategy.scope():
    model = build()

steps, secs = (SAVE_EVERY, None) if SAVE_EVERY else (None, 600)


def main():
    if MODE == "fit":
        fit()
    else:
        train()


def fit():
    saver = keras_slim.callbacks.Checkpoints(
        LOGDIR, every_n_steps=steps, every_n_secs=secs
    )
    data = (dataset(),) if INPUT == "dataset" else (x, y)
    kwargs = {"batch_size": 10} if INPUT == "arrays" else {}
    model.fit(
        *data, epochs=3, verbose=0, callbacks=[saver, PrintStep()], **kwargs
    )


def train():
    data = dataset() if INPUT == "dataset" else (x, y)
    kwargs = {"batch_size": 10} if INPUT == "arrays" else {}
    keras_slim.train(
        model,
        data,
        logdir=LOGDIR,
        number_of_steps=36,
        save_interval_steps=steps,
        save_interval_secs=secs,
        save_summaries_secs=None,
        log_every_n_steps=None,
        callbacks=[PrintStep()],
        **kwargs,
    )


try:
    main()
except keras_slim.TrainingPreemptedError as error:
    print(f"preempted {error.step} {error.checkpoint}", flush=True)
    sys.exit(42)
np.savez(OUT, *[v.numpy() for v in model.variables])
print("done", global_step(model), flush=True)
