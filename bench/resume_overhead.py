"""What exact resume costs: checkpoint saves with the input position, and
steps with the preemption signal handlers installed.

1. Save time and size of a training checkpoint of the MLP and the CNN of
   bench/_common.py, without and with the input position (`data`: Keras's
   epoch, the step in it, and the state of a `tf.data` iterator over a
   dataset shuffled with a buffer of 1024 examples, which the state holds).
   Medians of 15 saves each, alternating.
2. Steps per second of `SlimModel.fit` with `Checkpoints` (time interval,
   so no save while timed), with its SIGTERM/SIGINT handlers installed
   and with them left out, and left out again (an A/A control of this
   machine's noise); medians of rotating runs. Target: >= 0.99.
3. The same under `MultiWorkerMirroredStrategy` (2 workers on loopback,
   the MLP): there `Checkpoints` also agrees with the other workers, once
   per call, whether any of them was signalled (one all-reduce of a
   scalar), so that all stop at the same step. Steps per second of the
   chief with the handlers and the agreement, against without.

Run: `python bench/resume_overhead.py [--rounds 7] [--worker-rounds 5]`.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import _common
import keras
import numpy as np
import tensorflow as tf

import keras_slim
from keras_slim import _signals
from keras_slim import _stop_agreement
from keras_slim import training_state
from keras_slim._fit import position as position_lib
from keras_slim.cluster import LocalCluster

STEPS, WARMUP, BATCH = 300, 30, 64


def model(name):
    input_shape, layers, _ = _common.MODELS[name]
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    m = keras_slim.SlimModel(inputs, layers(inputs))
    m.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return m


def shuffled(input_shape):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, *input_shape)).astype("float32")
    y = rng.integers(0, 10, size=4096).astype("int32")
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024, seed=1)
    return data.batch(BATCH).repeat()


def saves(name, rounds):
    m = model(name)
    data = shuffled(_common.MODELS[name][0])
    m.fit(data, steps_per_epoch=5, verbose=0)
    state = position_lib.DataState()
    state.iterator = iter(data)
    next(state.iterator)  # the shuffle buffer is full
    results = {"without": ([], []), "with": ([], [])}
    with tempfile.TemporaryDirectory() as directory:
        for i in range(rounds):
            for label, data_state in (("without", None), ("with", state)):
                ckpt = training_state.training_checkpoint(m, data=data_state)
                start = time.perf_counter()
                path = ckpt.write(os.path.join(directory, f"{label}-{i}"))
                results[label][0].append(time.perf_counter() - start)
                size = sum(
                    os.path.getsize(os.path.join(directory, f))
                    for f in os.listdir(directory)
                    if f.startswith(os.path.basename(path) + ".")
                )
                results[label][1].append(size)
    return {
        label: (statistics.median(t) * 1e3, statistics.median(s) / 2**20)
        for label, (t, s) in results.items()
    }


class Timer(keras_slim.callbacks.StepCallback):
    def step_multiples(self, model):
        return [WARMUP]

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self.counter.step >= WARMUP and not hasattr(self, "start"):
            self.start = time.perf_counter()
            self.begin = self.counter.step
        self.end, self.last = time.perf_counter(), self.counter.step


def steps_per_sec(name, data, handlers, strategy=None):
    original = _signals.StopSignals.catch, _stop_agreement.StopAgreement
    if not handlers:
        _signals.StopSignals.catch = lambda self: None
        _stop_agreement.StopAgreement = lambda strategy: bool
    try:
        with (strategy or tf.distribute.get_strategy()).scope():
            m = model(name)
        timer = Timer()
        with tempfile.TemporaryDirectory() as directory:
            m.fit(
                data,
                steps_per_epoch=WARMUP + STEPS,
                verbose=0,
                callbacks=[keras_slim.callbacks.Checkpoints(directory), timer],
            )
    finally:
        _signals.StopSignals.catch, _stop_agreement.StopAgreement = original
    return (timer.last - timer.begin) / (timer.end - timer.start)


def worker(handlers):
    """One worker of a 2-worker cluster (under LocalCluster's TF_CONFIG):
    prints its steps per second as JSON."""
    config = keras_slim.DeploymentConfig(
        num_replicas=2,
        replica_id=json.loads(os.environ["TF_CONFIG"])["task"]["index"],
    )
    strategy = config.strategy()  # before any op runs
    name = next(iter(_common.MODELS))
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.OFF
    )
    data = _common.dataset(_common.MODELS[name][0]).with_options(options)
    rate = steps_per_sec(name, data, handlers, strategy)
    print(json.dumps({"rate": rate}))


def multi_worker(rounds):
    rates = {"on": [], "off": []}
    for i in range(rounds):
        for label in ("on", "off") if i % 2 == 0 else ("off", "on"):
            with LocalCluster(workers=2) as cluster:
                runs = cluster.run(
                    [sys.executable, __file__, "--worker", label], timeout=600
                )
            for run in runs:
                if run.returncode != 0:
                    raise RuntimeError(run.stderr[-3000:])
            # The chief's rate (the workers run in lockstep).
            rates[label].append(
                json.loads(runs[0].stdout.splitlines()[-1])["rate"]
            )
    return {k: statistics.median(v) for k, v in rates.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--worker-rounds", type=int, default=5)
    parser.add_argument(
        "--worker", choices=["on", "off"], help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args.worker == "on")
    print(
        f"keras {keras.__version__}, tensorflow {tf.__version__}, "
        f"{os.cpu_count()} CPUs"
    )
    print()
    print(
        "| model | save ms without | with position | MiB without | "
        "with position |"
    )
    print("|---|---|---|---|---|")
    for name in _common.MODELS:
        r = saves(name, 15)
        print(
            f"| {name} | {r['without'][0]:.1f} | {r['with'][0]:.1f} | "
            f"{r['without'][1]:.2f} | {r['with'][1]:.2f} |",
            flush=True,
        )
    print()
    print(
        "| model | steps/s handlers off | handlers on | on / off | "
        "off again / off (A/A) |"
    )
    print("|---|---|---|---|---|")
    for name in _common.MODELS:
        data = _common.dataset(_common.MODELS[name][0])
        variants = [("on", True), ("off", False), ("off again", False)]
        rates = {label: [] for label, _ in variants}
        for i in range(args.rounds):
            # The order rotates, so no variant gains from going first.
            order = variants[i % 3 :] + variants[: i % 3]
            for label, handlers in order:
                rates[label].append(steps_per_sec(name, data, handlers))
                keras.backend.clear_session()
        on, off, again = (
            statistics.median(rates[k]) for k in ("on", "off", "off again")
        )
        print(
            f"| {name} | {off:.1f} | {on:.1f} | {on / off:.3f} | "
            f"{again / off:.3f} |",
            flush=True,
        )

    print()
    print("| 2 workers, MLP | steps/s handlers off | handlers on | on / off |")
    print("|---|---|---|---|")
    r = multi_worker(args.worker_rounds)
    print(
        f"| chief | {r['off']:.1f} | {r['on']:.1f} | {r['on'] / r['off']:.3f} |"
    )


if __name__ == "__main__":
    main()
