"""One training run on JAX with `Checkpoints`, for the resume tests: what
a user writes (shuffled arrays, augmentation and dropout in the model,
AdamW with moving averages, a gradient policy), run in its own process.

    python -m tests_jax.scripts.resume_run --directory D --out W.npz
        [--kill_at STEP | --term_at STEP] [--epochs 3] [--devices 1]
        [--input arrays|py_dataset] [--steps_per_execution 1]
        [--file_size_limit BYTES]

`--kill_at` sends itself SIGKILL when the global step reaches STEP (at a
batch's end, after `Checkpoints` saw it); `--term_at` sends SIGTERM. The
run that finishes writes every variable, by path, to `--out`.

It runs as on a machine without TensorFlow (`tests_jax/no_tensorflow.py`),
the JAX images' case; with TensorFlow installed, Keras's
`set_random_seed` would import it (about 3 s of each run).
"""

import argparse
import logging
import os
import resource
import signal
import sys


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--directory", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--kill_at", type=int)
    parser.add_argument("--term_at", type=int)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--devices", type=int, default=1)
    parser.add_argument("--input", default="arrays")
    parser.add_argument("--steps_per_execution", type=int, default=1)
    parser.add_argument("--every_n_steps", type=int, default=3)
    parser.add_argument("--file_size_limit", type=int)
    args = parser.parse_args(argv)
    if args.file_size_limit:
        # No file may grow past this (EFBIG, not a signal).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = (args.file_size_limit, args.file_size_limit)
        resource.setrlimit(resource.RLIMIT_FSIZE, limit)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("keras_slim").setLevel(logging.INFO)
    os.environ["KERAS_BACKEND"] = "jax"
    flag = f"--xla_force_host_platform_device_count={args.devices}"
    os.environ["XLA_FLAGS"] = flag

    from tests_jax import no_tensorflow

    no_tensorflow.install()

    import keras
    import numpy as np

    import keras_slim

    keras.utils.set_random_seed(7)
    x = np.random.default_rng(0).normal(size=(64, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    scope = _nothing()
    if args.devices > 1:
        config = keras_slim.DeploymentConfig(
            num_clones=args.devices, clone_on_cpu=True
        )
        scope = config.strategy().scope()
    with scope:
        model = _model(keras, keras_slim)
        model.compile(
            optimizer=keras.optimizers.AdamW(
                0.01, weight_decay=0.01, use_ema=True, ema_momentum=0.9
            ),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
            steps_per_execution=args.steps_per_execution,
        )
        callbacks = [
            keras_slim.callbacks.Checkpoints(
                args.directory,
                every_n_steps=args.every_n_steps,
                every_n_secs=None,
            ),
            _Signal(args.kill_at, signal.SIGKILL),
            _Signal(args.term_at, signal.SIGTERM),
        ]
        data = (x, y) if args.input == "arrays" else (_Batches(x, y),)
        try:
            model.fit(
                *data,
                batch_size=8 if args.input == "arrays" else None,
                epochs=args.epochs,
                shuffle=True,
                verbose=0,
                callbacks=callbacks,
            )
        except keras_slim.TrainingPreemptedError as error:
            print("preempted", error.step, error.checkpoint, flush=True)
            return 42
    values = {v.path: keras.ops.convert_to_numpy(v) for v in model.variables}
    for v in model.optimizer.variables:
        name = "optimizer/" + v.path.split("/", 1)[-1]
        values[name] = keras.ops.convert_to_numpy(v)
    np.savez(args.out, **values)
    return 0


def _model(keras, keras_slim):
    inputs = keras.Input((8,))
    h = keras.layers.GaussianNoise(0.1, seed=3)(inputs)  # augmentation
    h = keras.layers.Dense(16, activation="relu", name="fc1")(h)
    h = keras.layers.Dropout(0.3, seed=4)(h)
    h = keras.layers.Dense(16, activation="tanh", name="fc2")(h)
    outputs = keras.layers.Dense(3, name="logits")(h)
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0},
        freeze=["fc1/bias"],
        clip_global_norm=1.0,
    )
    return keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _signal_callback():
    import keras

    class Signal(keras.callbacks.Callback):
        """Sends a signal to this process at a global step."""

        def __init__(self, step, number):
            super().__init__()
            self._step, self._number = step, number

        def on_train_batch_end(self, batch, logs=None):
            from keras_slim._jax import run

            if self._step is None:
                return
            if run.of(self._model).step >= self._step:
                self._step = None
                os.kill(os.getpid(), self._number)

    return Signal


def _Signal(step, number):
    return _signal_callback()(step, number)


def _Batches(x, y):
    # Imported once the backend and the devices are set (`main`).
    from tests_jax import helpers

    return helpers.Batches(x, y)


if __name__ == "__main__":
    sys.exit(main())
