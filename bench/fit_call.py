"""The fixed cost of a `fit` call: `SlimModel.fit` against `keras.Model.fit`,
and a short fit, call included, against TF-Slim.

Each system runs in its own fresh process, processes alternating
(keras, SlimModel, keras, ...). In each: the MLP 32-64-64-10 of
bench/_common.py on its repeated in-memory batch of 64, SGD with momentum,
built by bench/vs_tf_slim.py's `model` (the `SlimModel` with its gradient
policy: multipliers, a frozen bias, clip_norm, the NaN check), no
callbacks (the cost of the call itself); one warm-up `fit`, then:

- `--calls` (15) calls of `fit(data, steps_per_epoch=1)`, each timed;
- 5 calls of `fit(data, steps_per_epoch=300)` (after one that traces
  that size), each timed whole: steps/s with the call's fixed cost
  included; per process, their median and slowest.

`SlimModel` reads this in-memory input with one tf.data thread and no
autotune (keras_slim/_fit/input_options.py); `SlimModel, tf.data
defaults` is the same with tf.data's defaults, as Keras reads it.

TF-Slim: tf_slim 1.1.0 in graph mode (bench/vs_tf_slim.py's train op:
`create_train_op` with the same policy), fed the same batch by `tf.data`
through an iterator in its graph, 300 `session.run(train_op)` after 30
warm-up steps: its loop has no per-call cost to pay.

Per process: the median of its calls (and its slowest); over processes:
min / median / max. Targets (the speed issue): a one-step `fit` at most
1.5x Keras's per-call time; the 300-step fit at least 1.3x TF-Slim's
steps/s.

Run: `python bench/fit_call.py [--processes 5] [--calls 15]`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import _common

STEPS = 300
#: Timed `fit(steps_per_epoch=STEPS)` calls per process.
LONG_CALLS = 5
SYSTEMS = ["keras", "SlimModel", "SlimModel, tf.data defaults"]


def child(system, calls):
    """One process's measurements, as a dict."""
    import vs_tf_slim

    name = "MLP 32-64-64-10"
    model = vs_tf_slim.model(name, slim_policy=system != "keras")
    data = _common.dataset(_common.MODELS[name][0])
    if system == "SlimModel, tf.data defaults":
        from keras_slim._fit import input_options

        input_options.for_fit = lambda dataset: dataset
    model.fit(data, steps_per_epoch=1, verbose=0)  # warm-up: traces
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=1, verbose=0)
        times.append(time.perf_counter() - start)
    model.fit(data, steps_per_epoch=STEPS, verbose=0)  # traces this size
    rates = []
    for _ in range(LONG_CALLS):
        start = time.perf_counter()
        model.fit(data, steps_per_epoch=STEPS, verbose=0)
        rates.append(STEPS / (time.perf_counter() - start))
    return {"call_ms": [t * 1000 for t in times], "rates": rates}


def run_child(system, calls):
    result = subprocess.run(
        [sys.executable, __file__, "--child", system, "--calls", str(calls)],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def tf_slim_rate():
    import vs_tf_slim

    vs_tf_slim.WARMUP, vs_tf_slim.TIMED = 30, STEPS
    return vs_tf_slim.tf_slim("MLP 32-64-64-10", feed="dataset")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--calls", type=int, default=15)
    parser.add_argument("--child", choices=SYSTEMS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.calls)))
        return
    print(
        f"python bench/fit_call.py --processes {args.processes} --calls "
        f"{args.calls}; {os.cpu_count()} CPUs; per process: the median "
        "(slowest) of its one-step fit calls; over processes: min / "
        "median / max"
    )
    systems = {system: [] for system in SYSTEMS}
    slim_rates = []
    for _ in range(args.processes):
        for system, results in systems.items():
            results.append(run_child(system, args.calls))
        slim_rates.append(tf_slim_rate())
    print()
    print(
        "| system | one-step fit, ms per call | slowest call, ms | "
        f"{STEPS}-step fit, steps/s (call included) | slowest "
        f"{STEPS}-step fit, steps/s |"
    )
    print("|---|---|---|---|---|")
    for system, results in systems.items():
        medians = [statistics.median(r["call_ms"]) for r in results]
        slowest = [max(r["call_ms"]) for r in results]
        rates = [statistics.median(r["rates"]) for r in results]
        slowest_rates = [min(r["rates"]) for r in results]
        print(
            f"| {system} | {_common.spread(medians, '{:.2f}')} | "
            f"{_common.spread(slowest)} | {_common.spread(rates, '{:.0f}')} | "
            f"{_common.spread(slowest_rates, '{:.0f}')} |"
        )
    slim = _common.spread(slim_rates, "{:.0f}")
    print(f"| TF-Slim (session.run) | | | {slim} | |")
    keras_ms = [statistics.median(r["call_ms"]) for r in systems["keras"]]
    slim_ms = [statistics.median(r["call_ms"]) for r in systems["SlimModel"]]
    call_ratios = [s / k for s, k in zip(slim_ms, keras_ms)]
    rate_ratios = [
        statistics.median(r["rates"]) / t
        for r, t in zip(systems["SlimModel"], slim_rates)
    ]
    print()
    print(
        "SlimModel / keras per one-step call, per process pair: "
        f"{_common.spread(call_ratios, '{:.2f}')}x (target <= 1.5x)"
    )
    print(
        f"SlimModel {STEPS}-step fit / TF-Slim steps/s, per round: "
        f"{_common.spread(rate_ratios, '{:.2f}')}x (target >= 1.3x)"
    )


if __name__ == "__main__":
    main()
