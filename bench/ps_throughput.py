"""Parameter-server training: SlimModel.fit vs tf_keras (Keras 2) fit.

Keras 3's own `fit` cannot run under ParameterServerStrategy; tf_keras's
can, so it is the peer. Both train the MLP of the foundation benchmark
(32-64-64-10, Adam, batch 64 of random data, each worker reading its own
dataset) on the same kind of cluster: 2 workers and 1 parameter server,
each a real gRPC server process on loopback (keras_slim.cluster.
LocalCluster), the coordinator in a fresh process per run. Each run warms
up for 20 steps, then times 300: from the end of the first epoch of 20
steps to the end of training (each after the coordinator's `join`), by
the same timing callback in both (tf_keras allows no batch-level
callback under parameter servers). Each runs at its defaults: tf_keras
schedules one step per call (`steps_per_execution=1`), `SlimModel` picks
its steps per scheduled call (here 10: epochs of 20 steps over 2
workers). Runs alternate between the two; the table gives medians and
the median of the per-pair ratios. Target (issue 19): ratio >= 1.5.

`--coordinator-reads` compares instead `SlimModel.fit` on the dataset
function (each worker reads its own data) with `SlimModel.fit` on the
`tf.data.Dataset` it returns, which the coordinator reads, sending each
call its batches (the input position that checkpoints save): the cost of
that feed.

Run: `python bench/ps_throughput.py [--runs 9] [--coordinator-reads]`
(about 20 s per run).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WARMUP, TIMED = 20, 300


def child(variant):
    """One timed run, as the coordinator of a fresh local cluster."""
    os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
    import numpy as np
    import tensorflow as tf

    from keras_slim.cluster import LocalCluster

    if variant == "tf_keras":
        import tf_keras as keras
    else:
        import keras

        import keras_slim

    # tf_keras allows no batch-level callback under parameter servers:
    # epochs of WARMUP steps, the first one untimed.
    class Timer(keras.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            if epoch == 0:
                self.start = time.perf_counter()

        def on_train_end(self, logs=None):
            self.end = time.perf_counter()

    def dataset_fn(input_context=None):
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 32)).astype("float32")
        y = rng.integers(0, 10, size=64).astype("int32")
        return tf.data.Dataset.from_tensors((x, y)).repeat()

    with LocalCluster(workers=2, ps=1) as cluster:
        strategy = tf.distribute.ParameterServerStrategy(cluster.resolver())
        with strategy.scope():
            inputs = keras.Input((32,))
            x = keras.layers.Dense(64, activation="relu")(inputs)
            x = keras.layers.Dense(64, activation="relu")(x)
            outputs = keras.layers.Dense(10)(x)
            if variant == "tf_keras":
                model = keras.Model(inputs, outputs)
            else:
                model = keras_slim.SlimModel(inputs, outputs)
            model.compile(
                optimizer=keras.optimizers.Adam(0.001),
                loss=keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True
                ),
            )
        if variant == "tf_keras":
            data = keras.utils.experimental.DatasetCreator(dataset_fn)
        elif variant == "keras_slim_dataset":
            data = dataset_fn()  # read by the coordinator
        else:
            data = dataset_fn
        timer = Timer()
        model.fit(
            data,
            epochs=1 + TIMED // WARMUP,
            steps_per_epoch=WARMUP,
            verbose=0,
            callbacks=[timer],
        )
        print(json.dumps({"steps_per_sec": TIMED / (timer.end - timer.start)}))


def run(variant):
    result = subprocess.run(
        [sys.executable, __file__, "--child", variant],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if result.returncode != 0:
        raise RuntimeError(f"{variant} run failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["steps_per_sec"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument(
        "--coordinator-reads",
        action="store_true",
        help="dataset function vs tf.data.Dataset, both SlimModel.fit",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return
    if args.coordinator_reads:
        variants = ["keras_slim_dataset", "keras_slim"]
        names = ["coordinator reads", "workers read"]
    else:
        variants = ["keras_slim", "tf_keras"]
        names = ["SlimModel.fit", "tf_keras fit"]
    results = {v: [] for v in variants}
    for i in range(args.runs):
        for variant in variants if i % 2 == 0 else variants[::-1]:
            results[variant].append(run(variant))
    mine, peer = (results[v] for v in variants)
    ratios = [a / b for a, b in zip(mine, peer)]
    print(
        f"2 workers + 1 ps on loopback, {args.runs} alternating runs, "
        f"{TIMED} steps timed after {WARMUP}; {os.cpu_count()} CPUs"
    )
    print()
    print(f"| model | {names[1]} steps/s | {names[0]} steps/s | ratio |")
    print("|---|---|---|---|")
    print(
        f"| MLP 32-64-64-10, batch 64 | "
        f"{statistics.median(peer):.1f} | "
        f"{statistics.median(mine):.1f} | "
        f"{statistics.median(ratios):.3f} "
        f"({min(ratios):.2f}-{max(ratios):.2f}) |"
    )


if __name__ == "__main__":
    main()
