"""Where a small model's step goes inside one call of the train function.

Microseconds per step of `SlimModel`'s train step (the policy of
bench/vs_tf_slim.py), all in the graph, 300 steps per run, the best of 5
runs, medians over rounds:

- fit's call: the train function `SlimModel.fit` builds with 30 steps per
  call, called directly on a `tf.data` iterator (what fit runs);
- fit's call, no records: the same, the per-step loss records replaced
  by a constant (what recording each step's loss costs);
- fit's call, blocks: the same train function reading blocks of 30
  batches (keras_slim/_fit/feed.py), as `SlimModel.fit` does when it
  chooses the steps per call;
- loop, constant batch: a `tf.range` loop of the step on one constant
  batch, as TF-Slim's peer feeds `tf.constant` tensors;
- loop, iterator: the same loop, one batch per read of a `tf.data`
  iterator over the same dataset;
- loop, blocks of 30: the same loop, 30 batches per iterator read (the
  dataset `.batch(30)`), sliced in the graph.

Run: `python bench/step_floor.py [--rounds 3]`.
"""

import argparse
import statistics
import time

import _common
import keras
import tensorflow as tf
import vs_tf_slim

from keras_slim import _run
from keras_slim._fit import feed
from keras_slim._fit import loops as fit_loops

STEPS, PER_CALL = 300, 30


def best_of(function, runs=5):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        times.append((time.perf_counter() - start) / STEPS * 1e6)
    return min(times)


def slim_model(name, data):
    m = vs_tf_slim.model(name, True)
    m.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=PER_CALL,
    )
    m.fit(data, steps_per_epoch=2 * PER_CALL, verbose=0)
    return m


def fit_call(name, data, records=True, blocks=False):
    original = fit_loops._tracker_state
    if not records:
        fit_loops._tracker_state = lambda model: tf.zeros([2])
    try:
        m = slim_model(name, data)
    finally:
        fit_loops._tracker_state = original
    with _run.start(m) as run, m.train_function.bound(run):
        if blocks:
            run.feed = feed.make(m, data, None, {}, PER_CALL, mode=run.mode)
            assert run.feed.reads_blocks
            iterator = iter(run.feed.stand_in)
        else:
            iterator = iter(data)
        m.steps_per_execution = PER_CALL
        m.train_function(iterator)
        return best_of(
            lambda: [
                m.train_function(iterator) for _ in range(STEPS // PER_CALL)
            ]
        )


def loops(name, data):
    m = slim_model(name, data)
    step = tf.function(m.train_step)
    batch = next(iter(data))
    iterator = iter(data)
    blocks = iter(data.batch(PER_CALL))

    @tf.function
    def constant(n):
        for _ in tf.range(n):
            step(batch)

    @tf.function
    def from_iterator(n):
        for _ in tf.range(n):
            step(next(iterator))

    @tf.function
    def from_blocks(calls):
        for _ in tf.range(calls):
            block = next(blocks)
            for i in tf.range(PER_CALL):
                step(tf.nest.map_structure(lambda t: t[i], block))

    constant(tf.constant(2))
    from_iterator(tf.constant(2))
    from_blocks(tf.constant(1))
    return {
        "loop, constant batch": best_of(lambda: constant(tf.constant(STEPS))),
        "loop, iterator": best_of(lambda: from_iterator(tf.constant(STEPS))),
        "loop, blocks of 30": best_of(
            lambda: from_blocks(tf.constant(STEPS // PER_CALL))
        ),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        f"keras {keras.__version__}, tensorflow {tf.__version__}; us per "
        f"step, best of 5 runs of {STEPS} steps, medians of {args.rounds} "
        "rounds"
    )
    print()
    columns = [
        "fit's call",
        "fit's call, no records",
        "fit's call, blocks",
        "loop, constant batch",
        "loop, iterator",
        "loop, blocks of 30",
    ]
    print("| model | " + " | ".join(columns) + " |")
    print("|---" * (len(columns) + 1) + "|")
    for name in _common.MODELS:
        data = _common.dataset(_common.MODELS[name][0])
        results = {c: [] for c in columns}
        for _ in range(args.rounds):
            results["fit's call"].append(fit_call(name, data))
            keras.backend.clear_session()
            results["fit's call, no records"].append(
                fit_call(name, data, records=False)
            )
            keras.backend.clear_session()
            results["fit's call, blocks"].append(
                fit_call(name, data, blocks=True)
            )
            keras.backend.clear_session()
            for column, value in loops(name, data).items():
                results[column].append(value)
            keras.backend.clear_session()
        cells = " | ".join(
            f"{statistics.median(results[c]):.1f}" for c in columns
        )
        print(f"| {name} | {cells} |", flush=True)


if __name__ == "__main__":
    main()
