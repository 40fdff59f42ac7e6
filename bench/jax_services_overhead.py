"""What keras_slim's training services cost on Keras's JAX backend:
keras.Model.fit vs SlimModel.fit with every service at its default, and
what one checkpoint save costs against a step.

On the models of bench/jax_policy_overhead.py (an MLP 32-64-64-10 and a
CNN 28x28x1 conv32-pool-conv64-dense10; one batch of 64 repeated, NumPy
arrays, SGD with momentum, steps_per_execution=1):

  keras     keras.Model, plain optimizer, no callback
  slim      SlimModel with bench/jax_policy_overhead.py's full policy
  services  the same SlimModel, with every service at its default:
            Checkpoints(dir) (every 600 s, and at the end of each fit),
            Summaries(dir) (every 600 s: the first step of each fit),
            LogEveryNSteps() (every 100 steps), NanLossGuard(),
            StopAtStep(last_step=10**9)

Each variant runs in its own fresh process, one per variant per round,
their order rotating round by round. A process builds each model, warms
it up (two fits: the compile, and for `services` a restore of the first
fit's checkpoint), then times `--runs` pairs of fits, of a quarter and of
all of 2000 (MLP) or 30 (CNN) steps. The steady rate is the difference's
(steps / seconds of the longer fit's extra steps): what a long run pays
per step. What a fit pays once (for `services`: the lock, the restore of
the last checkpoint, the summary at the first step, the save at the end)
is the shorter fit's time beyond its steps at that rate. Both are medians
over the pairs; ratios are per round, then the median and min-max over
the rounds. Target: services / keras >= 0.9 at the steady rate.

The save's cost: in the `services` process, the median of 5 saves of the
model's state through the library's store (orbax-checkpoint, synchronous,
into a fresh directory each), in ms, and as steps of that model.

Run: `KERAS_BACKEND=jax python bench/jax_services_overhead.py
[--rounds 5] [--runs 3] [--model MLP]`. Prints Markdown tables and one
JSON line.
"""

import os
import sys

os.environ["KERAS_BACKEND"] = "jax"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import jax_policy_overhead as policy_bench  # noqa: E402
import keras  # noqa: E402

import keras_slim  # noqa: E402
from keras_slim._jax import checkpoint_store  # noqa: E402

VARIANTS = ("keras", "slim", "services")


def services(directory):
    """Every service at its default, as a user lists them."""
    return [
        keras_slim.callbacks.StopAtStep(last_step=10**9),
        keras_slim.callbacks.Checkpoints(directory),
        keras_slim.callbacks.Summaries(directory),
        keras_slim.callbacks.NanLossGuard(),
        keras_slim.callbacks.LogEveryNSteps(),
    ]


def save_ms(model):
    """Median ms of one save of the model's state (5 saves)."""
    state = {
        "trainable": [v.value for v in model.trainable_variables],
        "non_trainable": [v.value for v in model.non_trainable_variables],
        "optimizer": [v.value for v in model.optimizer.variables],
        "metrics": [v.value for v in model.metrics_variables],
    }
    times = []
    for step in range(5):
        directory = tempfile.mkdtemp()
        store = checkpoint_store.Store(
            directory, max_to_keep=5, keep_hours=None
        )
        start = time.perf_counter()
        store.save(step + 1, state, {"step": step + 1})
        times.append((time.perf_counter() - start) * 1e3)
        store.close()
        shutil.rmtree(directory)
    return statistics.median(times)


def child(variant, names, runs):
    results = {}
    for name in names:
        input_shape, layers, steps, warmup, _ = policy_bench.MODELS[name]
        build = "keras" if variant == "keras" else "slim"
        model = policy_bench.build(build, input_shape, layers)
        x, y = policy_bench.data(input_shape, steps)
        short = steps // 4
        fit = dict(batch_size=64, epochs=1, verbose=0, shuffle=False)
        directory = tempfile.mkdtemp()
        with_services = variant == "services"

        def timed(n):
            callbacks = services(directory) if with_services else []
            start = time.perf_counter()
            model.fit(x[: 64 * n], y[: 64 * n], callbacks=callbacks, **fit)
            return time.perf_counter() - start

        # Compiles; a second fit restores the first one's checkpoint.
        timed(warmup)
        timed(warmup)
        rates, fixed = [], []
        for _ in range(runs):
            t_short, t_long = timed(short), timed(steps)
            rate = (steps - short) / (t_long - t_short)
            rates.append(rate)
            fixed.append((t_short - short / rate) * 1e3)
        result = {
            "steps_per_s": statistics.median(rates),
            "per_fit_ms": statistics.median(fixed),
        }
        if with_services:
            result["save_ms"] = save_ms(model)
        shutil.rmtree(directory)
        results[name] = result
    print(json.dumps(results))


def run_child(variant, names, runs):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, str(pathlib.Path(__file__).resolve())]
    command += ["--child", variant, "--runs", str(runs)]
    command += [arg for name in names for arg in ("--name", name)]
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=1800
    )
    if result.returncode != 0:
        raise RuntimeError(f"{variant}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarize(name, rounds):
    per_round = [{v: r[v][name] for v in VARIANTS} for r in rounds]
    rates = {v: [r[v]["steps_per_s"] for r in per_round] for v in VARIANTS}
    save = statistics.median(r["services"]["save_ms"] for r in per_round)
    step_ms = 1e3 / statistics.median(rates["services"])
    return {
        "steps_per_s": {v: statistics.median(r) for v, r in rates.items()},
        "over_keras": {
            v: policy_bench.spread(
                [a / k for a, k in zip(rates[v], rates["keras"])]
            )
            for v in VARIANTS[1:]
        },
        "save_ms": save,
        "save_in_steps": save / step_ms,
        "per_fit_ms": {
            v: statistics.median(r[v]["per_fit_ms"] for r in per_round)
            for v in VARIANTS
        },
    }


def report(args, names, summaries):
    text = policy_bench.text
    print(
        f"keras {keras.__version__}, jax {jax.__version__}, "
        f"{os.cpu_count()} CPUs, {args.rounds} rounds of fresh processes "
        f"x {args.runs} fits; ratios: median (min to max) of per-round "
        "ratios"
    )
    print()
    print(
        "| model | keras fit steps/s | SlimModel, policy | / keras "
        "| SlimModel, policy + every service | / keras | one save, ms "
        "| one save, in steps | once per fit, ms: keras | policy "
        "| services |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        s = summaries[name]
        rate, ratio = s["steps_per_s"], s["over_keras"]
        print(
            f"| {name} | {rate['keras']:.1f} | {rate['slim']:.1f} | "
            f"{text(ratio['slim'])} | {rate['services']:.1f} | "
            f"{text(ratio['services'])} | {s['save_ms']:.1f} | "
            f"{s['save_in_steps']:.1f} | "
            + " | ".join(f"{s['per_fit_ms'][v]:.0f}" for v in VARIANTS)
            + " |"
        )
    print()
    print(
        json.dumps(
            {
                "bench": "jax_services_overhead",
                "jax": jax.__version__,
                "keras": keras.__version__,
                "cpus": os.cpu_count(),
                "rounds": args.rounds,
                "runs": args.runs,
                "models": summaries,
            }
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3, help="timed fits")
    parser.add_argument("--model", default="", help="only these models")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--name", action="append", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.name, args.runs)
        return
    names = [n for n in policy_bench.MODELS if args.model in n]
    rounds = []
    for i in range(args.rounds):
        order = VARIANTS[i % 3 :] + VARIANTS[: i % 3]
        rounds.append({v: run_child(v, names, args.runs) for v in order})
        print(f"round {i + 1}/{args.rounds} done", file=sys.stderr)
    summaries = {name: summarize(name, rounds) for name in names}
    report(args, names, summaries)


if __name__ == "__main__":
    main()
