"""What a gradient policy costs on Keras's JAX backend: keras.Model.fit
vs SlimModel.fit, and what reading the numeric verdict costs.

On the models of bench/policy_overhead.py (an MLP 32-64-64-10 and a CNN
28x28x1 conv32-pool-conv64-dense10, written again here so that no
TensorFlow is imported for bench/_common.py's tf.data input), one batch of
64 repeated, fed as NumPy arrays, SGD with momentum,
steps_per_execution=1 for every variant:

  keras        keras.Model, plain optimizer
  keras-waiting the same, with a callback that implements
               `on_train_batch_end` (doing nothing): Keras's loop then
               waits for each step's logs and calls the batch-end
               callbacks itself, as `SlimModel.fit`'s loop does where
               JAX computes on the CPU (keras_slim/_jax/run.py's
               `WaitingTracker`), instead of handing each batch's end
               to a thread pool. slim / keras-waiting is the policy's
               own cost, at the same loop
  slim         SlimModel with multipliers + freeze + clip_norm + NaN check
               (the policy of bench/policy_overhead.py)
  slim-noread  the same policy, its train function patched in this
               script, for its own fits only, not to read the verdict on
               the host: what that read costs
  slim-check   SlimModel with the default policy (the NaN check only):
               what a user who sets no field pays

Side by side in each process: a fresh process (KERAS_BACKEND=jax) builds
every variant's model, compiles it in a warm-up fit, then times `--blocks`
blocks; a block is one fit of 500 (MLP) or 10 (CNN) steps of each variant,
their order rotating block by block. A variant's ratio in a process is
the median over the blocks of its steps/s over keras's in the same block
(machine noise hits neighbours alike); the figures are the median and
min-max of those ratios over `--rounds` fresh processes. The read's cost
per call is 1e6/slim - 1e6/slim-noread microseconds, per block.

Where the time goes, measured in the same processes: the compiled step
alone (Keras's `jit(train_step)` and SlimModel's jitted step, called back
to back, µs per call, median of 5 blocks), the read of a verdict already
computed, and the instructions of each compiled step (XLA's entry
computation: each fusion, copy or dot is one kernel launched per step).
Target: slim / keras >= 0.95 (where JAX runs on the CPU, the loops
differ: slim / keras-waiting is then the policy's own cost). Prints
Markdown tables and one JSON line.

Run: `KERAS_BACKEND=jax python bench/jax_policy_overhead.py [--rounds 7]
[--blocks 15] [--model MLP]`; `--steps 3` runs it on a few steps, a check
that it runs (tests_jax/test_bench.py), not a measurement.
"""

import os

os.environ["KERAS_BACKEND"] = "jax"

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pathlib  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_slim  # noqa: E402
from keras_slim._jax import train_function  # noqa: E402

VARIANTS = ("keras", "keras-waiting", "slim", "slim-noread", "slim-check")
SLIM = VARIANTS[2:]


class WaitEachStep(keras.callbacks.Callback):
    """Implements `on_train_batch_end`: Keras's loop waits for each step."""

    def on_train_batch_end(self, batch, logs=None):
        pass


POLICY = {
    "multipliers": {"logits/.*": 2.0, r".*/bias": 0.5},
    "freeze": ["layer1/bias"],
    "clip_norm": 1.0,
}


def mlp_layers(inputs):
    x = keras.layers.Dense(64, activation="relu", name="layer1")(inputs)
    x = keras.layers.Dense(64, activation="relu", name="layer2")(x)
    return keras.layers.Dense(10, name="logits")(x)


def cnn_layers(inputs):
    x = keras.layers.Conv2D(32, 3, activation="relu", name="layer1")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, activation="relu", name="layer2")(x)
    x = keras.layers.Flatten()(x)
    return keras.layers.Dense(10, name="logits")(x)


# name: (input shape, layers, steps per block's fit, warm-up steps, calls
# per block of the compiled step alone). The CNN's step takes about 0.1 s
# on this CPU under JAX (under 0.01 s on TensorFlow): its fits are short
# in steps, not in seconds.
MODELS = {
    "MLP 32-64-64-10": ((32,), mlp_layers, 500, 50, 500),
    "CNN 28x28x1 conv32-pool-conv64-dense10": (
        (28, 28, 1), cnn_layers, 10, 3, 10,
    ),
}  # fmt: skip


# The child process: one variant, every model.


def skip_verdict_read(model):
    """Makes `model`'s JAX train function skip the verdict's read during
    its calls: its next read is never due (`TrainFunction.__call__`); the
    sync at the end of each fit still reads it. No step fails on this
    data."""
    model.make_train_function()
    model.train_function._next_read = math.inf


def library_read(counters):
    """The read `TrainFunction.__call__` makes (at most every
    `READ_INTERVAL` during a fit)."""
    return train_function._failed_step(counters)


def build(variant, input_shape, layers):
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    outputs = layers(inputs)
    if variant.startswith("keras"):
        model = keras.Model(inputs, outputs)
    else:
        fields = {} if variant == "slim-check" else POLICY
        policy = keras_slim.GradientPolicy(**fields)
        model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=1,
    )
    return model


def data(input_shape, steps):
    """One batch of 64, `steps` times, as NumPy arrays."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64,) + input_shape).astype("float32")
    y = rng.integers(0, 10, size=64).astype("int32")
    return np.concatenate([x] * steps), np.concatenate([y] * steps)


def compiled_step(model, x, y):
    """`(step, args)`: the jitted step `fit` calls and its arguments, the
    state a copy of the model's (the step donates it)."""
    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in model.optimizer.variables],
        [v.value for v in model.metrics_variables],
    )
    state = jax.tree.map(jax.numpy.copy, state)
    batch = (jax.numpy.asarray(x[:64]), jax.numpy.asarray(y[:64]), None)
    function = model.train_function
    if not isinstance(function, train_function.TrainFunction):
        # Keras's, as JAXTrainer.make_train_function jits it
        return jax.jit(model.train_step, donate_argnums=0), [state, batch]
    # SlimModel's TrainFunction: its jitted step, with a copy of its
    # counters (the step donates them, as it donates the state)
    counters = jax.tree.map(jax.numpy.copy, function.counters)
    return function._step, [state, counters, batch]


def kernels(model, x, y):
    """The instructions of the compiled step's entry computation by
    opcode (parameters, constants and the result tuple left out)."""
    step, args = compiled_step(model, x, y)
    text = step.lower(*args).compile().as_text()
    entry = text[text.index("ENTRY") :]
    entry = entry[: entry.index("\n}")]
    ops = collections.Counter(re.findall(r"= \S+ ([\w-]+)\(", entry))
    for op in ("parameter", "constant", "tuple", "get-tuple-element"):
        ops.pop(op, None)
    return dict(ops.most_common())


def microseconds(function, calls, blocks=5):
    """Median over `blocks` of the µs per call of `calls` calls."""
    times = []
    for _ in range(blocks):
        start = time.perf_counter()
        function(calls)
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def step_us(model, x, y, calls):
    """µs per call of the compiled step alone, called back to back (JAX
    dispatches asynchronously; the last call is waited for)."""
    step, args = compiled_step(model, x, y)

    def run(n):
        for _ in range(n):
            out = step(*args)
            args[0] = out[1]
            if len(out) == 3:  # SlimModel's step donates its counters
                args[1] = out[2]
        jax.block_until_ready(args[0])

    run(20)
    return microseconds(run, calls)


def read_us(model):
    """µs of the library's read of a verdict already computed."""
    counters = model.train_function.counters
    jax.block_until_ready(counters)
    library_read(counters)

    def run(n):
        for _ in range(n):
            library_read(counters)

    return microseconds(run, 500)


def child(names, blocks, quick=None):
    """One process: every variant of each model, side by side; `quick`
    steps per block, warm-up and compiled-step timing in place of each
    model's own (a check that the script runs)."""
    results = {}
    for name in names:
        input_shape, layers, steps, warmup, calls = MODELS[name]
        if quick:
            steps = warmup = calls = quick
        x, y = data(input_shape, steps)
        fit = dict(batch_size=64, epochs=1, verbose=0, shuffle=False)
        models = {v: build(v, input_shape, layers) for v in VARIANTS}
        callbacks = {v: [] for v in VARIANTS}
        callbacks["keras-waiting"] = [WaitEachStep()]
        for variant, model in models.items():
            model.fit(
                x[: 64 * warmup],
                y[: 64 * warmup],
                callbacks=callbacks[variant],
                **fit,
            )  # compiles
        skip_verdict_read(models["slim-noread"])
        rates = {v: [] for v in VARIANTS}
        for block in range(blocks):
            # The order rotates, so that no variant always goes first.
            shift = block % len(VARIANTS)
            for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                start = time.perf_counter()
                models[variant].fit(x, y, callbacks=callbacks[variant], **fit)
                rates[variant].append(steps / (time.perf_counter() - start))
        result = {"steps_per_s": rates}
        result["kernels"] = {
            v: kernels(models[v], x, y) for v in ("keras", "slim", "slim-check")
        }
        result["step_us"] = {
            v: step_us(models[v], x, y, calls)
            for v in ("keras", "slim", "slim-check")
        }
        result["read_us"] = read_us(models["slim"])
        results[name] = result
    print(json.dumps(results))


# The parent: fresh processes, rounds, ratios.


def run_child(names, blocks, quick=None):
    env = dict(os.environ, KERAS_BACKEND="jax", TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, str(pathlib.Path(__file__).resolve())]
    command += ["--child", "--blocks", str(blocks)]
    if quick:
        command += ["--steps", str(quick)]
    command += [arg for name in names for arg in ("--name", name)]
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=3600
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def spread(values):
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def text(s, fmt="{:.3f}"):
    low, high = fmt.format(s["min"]), fmt.format(s["max"])
    return f"{fmt.format(s['median'])} ({low} to {high})"


def summarize(name, rounds):
    """Per-process ratios (median over its blocks), then their median and
    spread over the processes."""
    processes = [r[name] for r in rounds]

    def per_process(function):
        return [function(p["steps_per_s"]) for p in processes]

    def ratio(variant, to="keras"):
        return lambda rates: statistics.median(
            a / k for a, k in zip(rates[variant], rates[to])
        )

    def read_cost(rates):
        return statistics.median(
            1e6 / a - 1e6 / n
            for a, n in zip(rates["slim"], rates["slim-noread"])
        )

    return {
        "steps_per_s": {
            v: statistics.median(
                statistics.median(p["steps_per_s"][v]) for p in processes
            )
            for v in VARIANTS
        },
        "over_keras": {v: spread(per_process(ratio(v))) for v in VARIANTS[1:]},
        "over_keras_waiting": {
            v: spread(per_process(ratio(v, "keras-waiting"))) for v in SLIM
        },
        "read_us_per_call": spread(per_process(read_cost)),
        "step_us": {
            v: statistics.median(p["step_us"][v] for p in processes)
            for v in processes[0]["step_us"]
        },
        "ready_read_us": statistics.median(p["read_us"] for p in processes),
        "kernels": processes[0]["kernels"],
    }


def kernel_text(ops):
    top = ", ".join(f"{op} {n}" for op, n in list(ops.items())[:4])
    return f"{sum(ops.values())} ({top})"


def report(args, names, summaries):
    print(
        f"keras {keras.__version__}, jax {jax.__version__}, "
        f"{os.cpu_count()} CPUs, {args.rounds} fresh processes x "
        f"{args.blocks} blocks; ratios: median (min to max) over the "
        "processes of each one's median ratio"
    )
    print()
    print(
        "| model | keras fit steps/s | its loop waiting | / keras "
        "| SlimModel full policy | / keras | no verdict read | / keras "
        "| default policy (check) | / keras |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in names:
        rate, ratio = (
            summaries[name][k] for k in ("steps_per_s", "over_keras")
        )
        cells = [f"{rate['keras']:.1f}"]
        for v in VARIANTS[1:]:
            cells += [f"{rate[v]:.1f}", text(ratio[v])]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print(
        "| model | at the same loop (keras's waiting): full policy "
        "| no verdict read | default policy |"
    )
    print("|---|---|---|---|")
    for name in names:
        ratio = summaries[name]["over_keras_waiting"]
        cells = [text(ratio[v]) for v in SLIM]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    print(
        "| model | the read, µs per call | a ready verdict's read, µs "
        "| compiled step alone µs: keras | full policy | default policy |"
    )
    print("|---|---|---|---|---|---|")
    for name in names:
        s = summaries[name]
        cost, ready, step = (
            s["read_us_per_call"],
            s["ready_read_us"],
            s["step_us"],
        )
        print(
            f"| {name} | {text(cost, '{:.0f}')} | {ready:.1f} | "
            f"{step['keras']:.0f} | {step['slim']:.0f} | "
            f"{step['slim-check']:.0f} |"
        )
    print()
    print(
        "| model | keras step: kernels | full policy: kernels "
        "| default policy: kernels |"
    )
    print("|---|---|---|---|")
    for name in names:
        k = summaries[name]["kernels"]
        cells = [kernel_text(k[v]) for v in ("keras", "slim", "slim-check")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print()
    line = {
        "bench": "jax_policy_overhead",
        "jax": jax.__version__,
        "keras": keras.__version__,
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "blocks": args.blocks,
        "models": summaries,
    }
    print(json.dumps(line))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument(
        "--blocks", type=int, default=15, help="timed blocks per process"
    )
    parser.add_argument(
        "--model", default="", help="only the models whose name has this"
    )
    parser.add_argument(
        "--steps",
        type=int,
        help="steps per block, warm-up and compiled-step timing, in place "
        "of each model's own: a quick check that the script runs, not a "
        "measurement",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--name", action="append", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.name, args.blocks, args.steps)
    names = [name for name in MODELS if args.model in name]
    rounds = []
    for round_ in range(args.rounds):
        rounds.append(run_child(names, args.blocks, args.steps))
        print(f"process {round_ + 1}/{args.rounds} done", file=sys.stderr)
    summaries = {name: summarize(name, rounds) for name in names}
    report(args, names, summaries)


if __name__ == "__main__":
    main()
