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

The variants run side by side in each process: a fresh process builds
and compiles every variant (for `services`, a second warm-up fit restores
the first one's checkpoint), then times `--blocks` blocks; in a block each
variant, in an order rotating block by block, runs a pair of fits, of a
quarter and of all of `STEPS` (2000 for the MLP, 30 for the CNN). The
steady rate is the difference's (steps / seconds of the longer fit's
extra steps): what a long run pays per step. What a fit pays once (for
`services`: the lock, the restore of the last checkpoint, the summary at
the first step, the save at the end) is the shorter fit's time beyond its
steps at that rate. A variant's ratio in a process is the median over
its blocks of its rate over keras's in the same block; the figures are
the median and min-max of those over `--rounds` fresh processes. Target:
services / keras >= 0.9 at the steady rate.

The save's cost: in the `services` process, the median of 5 saves of the
model's state through the library's store (orbax-checkpoint, synchronous,
into a fresh directory each), in ms, and as steps of that model.

Run: `KERAS_BACKEND=jax python bench/jax_services_overhead.py
[--rounds 5] [--blocks 4] [--model MLP]`. Prints Markdown tables and one
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

# Steps of the longer fit of a pair, by model (the shorter: a quarter).
STEPS = {"MLP 32-64-64-10": 2000, "CNN 28x28x1 conv32-pool-conv64-dense10": 30}


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


def child(names, blocks):
    """One process: every variant of each model, side by side."""
    results = {}
    for name in names:
        input_shape, layers, _, warmup, _ = policy_bench.MODELS[name]
        steps = STEPS[name]
        short = steps // 4
        x, y = policy_bench.data(input_shape, steps)
        fit = dict(batch_size=64, epochs=1, verbose=0, shuffle=False)
        directory = tempfile.mkdtemp()
        models = {
            v: policy_bench.build(
                "keras" if v == "keras" else "slim", input_shape, layers
            )
            for v in VARIANTS
        }

        def timed(variant, n):
            with_services = variant == "services"
            callbacks = services(directory) if with_services else []
            start = time.perf_counter()
            models[variant].fit(
                x[: 64 * n], y[: 64 * n], callbacks=callbacks, **fit
            )
            return time.perf_counter() - start

        for variant in VARIANTS:
            # Compiles; for services a second fit restores the first's
            # checkpoint.
            timed(variant, warmup)
            timed(variant, warmup)
        rates = {v: [] for v in VARIANTS}
        fixed = {v: [] for v in VARIANTS}
        for block in range(blocks):
            shift = block % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                t_short, t_long = timed(variant, short), timed(variant, steps)
                rate = (steps - short) / (t_long - t_short)
                rates[variant].append(rate)
                fixed[variant].append((t_short - short / rate) * 1e3)
        results[name] = {
            "steps_per_s": rates,
            "per_fit_ms": fixed,
            "save_ms": save_ms(models["services"]),
        }
        shutil.rmtree(directory)
    print(json.dumps(results))


def run_child(names, blocks):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, str(pathlib.Path(__file__).resolve())]
    command += ["--child", "--blocks", str(blocks)]
    command += [arg for name in names for arg in ("--name", name)]
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=3600
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def summarize(name, rounds):
    """Per-process ratios (median over its blocks), then their median and
    spread over the processes."""
    processes = [r[name] for r in rounds]
    median = statistics.median

    def ratio(p, v):
        rates = p["steps_per_s"]
        return median(a / k for a, k in zip(rates[v], rates["keras"]))

    rates = {
        v: median(median(p["steps_per_s"][v]) for p in processes)
        for v in VARIANTS
    }
    save = median(p["save_ms"] for p in processes)
    return {
        "steps_per_s": rates,
        "over_keras": {
            v: policy_bench.spread([ratio(p, v) for p in processes])
            for v in VARIANTS[1:]
        },
        "save_ms": save,
        "save_in_steps": save / (1e3 / rates["services"]),
        "per_fit_ms": {
            v: median(median(p["per_fit_ms"][v]) for p in processes)
            for v in VARIANTS
        },
    }


def report(args, names, summaries):
    text = policy_bench.text
    print(
        f"keras {keras.__version__}, jax {jax.__version__}, "
        f"{os.cpu_count()} CPUs, {args.rounds} fresh processes x "
        f"{args.blocks} blocks; ratios: median (min to max) over the "
        "processes of each one's median ratio"
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
                "blocks": args.blocks,
                "models": summaries,
            }
        )
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--blocks", type=int, default=4, help="per process")
    parser.add_argument("--model", default="", help="only these models")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--name", action="append", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.name, args.blocks)
        return
    names = [n for n in policy_bench.MODELS if args.model in n]
    rounds = []
    for i in range(args.rounds):
        rounds.append(run_child(names, args.blocks))
        print(f"process {i + 1}/{args.rounds} done", file=sys.stderr)
    summaries = {name: summarize(name, rounds) for name in names}
    report(args, names, summaries)


if __name__ == "__main__":
    main()
