"""A coordinator whose final weights are the sum of the batches it consumed.

Usage: python ps_position.py LOGDIR OUT_NPZ --epochs N

Run with `TF_CONFIG` naming a running cluster's chief (the test holds a
`keras_slim.cluster.LocalCluster(workers=2, ps=1)` and starts this
coordinator against it, again after a kill). The model's gradient does not
depend on its weights: `y = x @ w`, loss `-mean(y)`, so the gradient of a
batch is `-mean(x)` over it and plain SGD ends at `w = lr * sum of the
batches' means` in any order. The data are small integers, the batch 4
and the learning rate 1/8, so every sum is exact in float32: one batch
lost or repeated changes `w` by at least 1/32. `expected(batches)` gives
that sum for the first `batches` batches of the same pipeline.

Prints `step <global step>` after each scheduled call (counted on the
host), for the test to kill it at a chosen step.
"""

import argparse
import os
import pathlib
import sys

os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

FEATURES, BATCH, EXAMPLES = 8, 4, 96
STEPS_PER_EPOCH, STEPS_PER_CALL, SAVE_EVERY = 12, 2, 4
LEARNING_RATE = 1 / 8


def dataset():
    """Shuffled integer examples, reshuffled each pass, repeated."""
    rng = np.random.default_rng(7)
    x = rng.integers(1, 9, size=(EXAMPLES, FEATURES)).astype("float32")
    y = np.zeros((EXAMPLES, 1), "float32")
    data = tf.data.Dataset.from_tensor_slices((x, y))
    return data.shuffle(EXAMPLES, seed=3).batch(BATCH).repeat()


def expected(batches):
    """The weights after SGD on the first `batches` batches, exactly."""
    total = np.zeros(FEATURES, np.float64)
    for x, _ in dataset().take(batches).as_numpy_iterator():
        total += x.mean(axis=0)
    return (LEARNING_RATE * total).astype("float32").reshape(FEATURES, 1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("logdir")
    parser.add_argument("out")
    parser.add_argument("--epochs", type=int, required=True)
    args = parser.parse_args()

    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
    import keras_slim
    from keras_slim import callbacks
    from tests.helpers import global_step

    class PrintStep(callbacks.StepCallback):
        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            print(f"step {self.counter.step}", flush=True)

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    config = keras_slim.DeploymentConfig(
        num_ps_tasks=1, cluster_resolver=resolver
    )
    with config.strategy().scope():
        inputs = keras.Input((FEATURES,))
        outputs = keras.layers.Dense(
            1, use_bias=False, kernel_initializer="zeros", name="w"
        )(inputs)
        model = keras_slim.SlimModel(inputs, outputs)
        model.compile(
            optimizer=keras.optimizers.SGD(LEARNING_RATE),
            loss=lambda y_true, y_pred: -keras.ops.mean(y_pred),
            steps_per_execution=STEPS_PER_CALL,
        )
    model.fit(
        dataset(),
        epochs=args.epochs,
        steps_per_epoch=STEPS_PER_EPOCH,
        verbose=0,
        callbacks=[
            callbacks.Checkpoints(
                args.logdir, every_n_steps=SAVE_EVERY, every_n_secs=None
            ),
            PrintStep(),
        ],
    )
    np.savez(
        args.out,
        w=model.get_layer("w").kernel.numpy(),
        step=global_step(model),
    )


if __name__ == "__main__":
    main()
