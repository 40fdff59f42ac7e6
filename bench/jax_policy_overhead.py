"""What a full gradient policy costs on Keras's JAX backend: keras.Model.fit
vs SlimModel.fit, and what reading the numeric verdict once per call
costs.

On the models of bench/policy_overhead.py (an MLP 32-64-64-10 and a CNN
28x28x1 conv32-pool-conv64-dense10, written again here so that no
TensorFlow is imported for bench/_common.py's tf.data input), one batch of
64 repeated, fed as NumPy arrays, SGD with momentum, steps_per_execution=1
for every variant:

  keras        keras.Model, plain optimizer
  slim         SlimModel with multipliers + freeze + clip_norm + NaN check
               (the policy of bench/policy_overhead.py)
  slim-noread  the same SlimModel, its train function patched in this
               script not to read the verdict on the host (the previous
               call's counters, one transfer once the call is
               dispatched): what that read costs

Each variant runs in its own fresh process (KERAS_BACKEND=jax), one per
variant per round, their order rotating round by round. A process builds
each model, warms it up (the compile is left out), then times `--runs`
fits of 2000 (MLP) or 30 (CNN) steps; its figure is their median
steps/s. Ratios are per round (processes of the same round side by side),
then the median and min-max over the rounds. The read's cost per call is
1e6/slim - 1e6/slim-noread microseconds, per round.

Where the time goes, measured inside the processes (medians over the
rounds of each process's median of 5 blocks): the compiled step alone
(Keras's `jit(train_step)` and SlimModel's jitted step, called back to
back, µs per call), the read of a verdict already computed, and the
instructions of each compiled step (XLA's entry computation: each fusion,
copy or dot is one kernel launched per step). Target: slim / keras
>= 0.95. Prints Markdown tables and one JSON line.

Run: `KERAS_BACKEND=jax python bench/jax_policy_overhead.py [--rounds 5]
[--runs 3] [--model MLP]`.
"""

import os

os.environ["KERAS_BACKEND"] = "jax"

import argparse  # noqa: E402
import collections  # noqa: E402
import json  # noqa: E402
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

VARIANTS = ("keras", "slim", "slim-noread")

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


# name: (input shape, layers, steps per timed fit, warm-up steps, calls
# per block of the compiled step alone). The CNN's step takes about 0.1 s
# on this CPU under JAX (under 0.01 s on TensorFlow): its runs are short
# in steps, not in seconds.
MODELS = {
    "MLP 32-64-64-10": ((32,), mlp_layers, 2000, 50, 500),
    "CNN 28x28x1 conv32-pool-conv64-dense10": (
        (28, 28, 1), cnn_layers, 30, 5, 10,
    ),
}  # fmt: skip


# The child process: one variant, every model.


def skip_verdict_read():
    """Makes SlimModel's JAX train function skip the verdict's read: its
    `_failed_step` (the one host read per call, of the previous call's
    counters) answers 0 without reading. No step fails on this data.
    """
    train_function._failed_step = lambda counters: 0


def library_read(counters):
    """The read `TrainFunction.__call__` makes once per call."""
    return train_function._failed_step(counters)


def build(variant, input_shape, layers):
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    outputs = layers(inputs)
    if variant == "keras":
        model = keras.Model(inputs, outputs)
    else:
        policy = keras_slim.GradientPolicy(**POLICY)
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
    # SlimModel's TrainFunction: its jitted step, with its counters
    return function._step, [state, function.counters, batch]


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
            args[0] = step(*args)[1]
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


def child(variant, names, runs):
    if variant == "slim-noread":
        skip_verdict_read()
    results = {}
    for name in names:
        input_shape, layers, steps, warmup, calls = MODELS[name]
        model = build(variant, input_shape, layers)
        x, y = data(input_shape, steps)
        fit = dict(batch_size=64, epochs=1, verbose=0, shuffle=False)
        model.fit(x[: 64 * warmup], y[: 64 * warmup], **fit)  # compiles
        rates = []
        for _ in range(runs):
            start = time.perf_counter()
            model.fit(x, y, **fit)
            rates.append(steps / (time.perf_counter() - start))
        result = {"steps_per_s": statistics.median(rates)}
        if variant in ("keras", "slim"):
            result["kernels"] = kernels(model, x, y)
            result["step_us"] = step_us(model, x, y, calls)
        if variant == "slim":
            result["read_us"] = read_us(model)
        results[name] = result
    print(json.dumps(results))


# The parent: fresh processes, rounds, ratios.


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
    """Medians and per-round ratios of one model over the rounds."""
    per_round = [{v: r[v][name] for v in VARIANTS} for r in rounds]
    rates = {v: [r[v]["steps_per_s"] for r in per_round] for v in VARIANTS}
    noread = rates["slim-noread"]
    return {
        "steps_per_s": {v: statistics.median(r) for v, r in rates.items()},
        "over_keras": {
            v: spread([a / k for a, k in zip(rates[v], rates["keras"])])
            for v in VARIANTS[1:]
        },
        "read_us_per_call": spread(
            [1e6 / a - 1e6 / n for a, n in zip(rates["slim"], noread)]
        ),
        "step_us": {
            v: statistics.median(r[v]["step_us"] for r in per_round)
            for v in ("keras", "slim")
        },
        "ready_read_us": statistics.median(
            r["slim"]["read_us"] for r in per_round
        ),
        "kernels": {v: rounds[0][v][name]["kernels"] for v in VARIANTS[:2]},
    }


def kernel_text(ops):
    top = ", ".join(f"{op} {n}" for op, n in list(ops.items())[:4])
    return f"{sum(ops.values())} ({top})"


def report(args, names, summaries):
    print(
        f"keras {keras.__version__}, jax {jax.__version__}, "
        f"{os.cpu_count()} CPUs, {args.rounds} rounds of fresh processes "
        f"x {args.runs} fits; ratios: median (min to max) of per-round "
        "ratios"
    )
    print()
    print(
        "| model | keras fit steps/s | SlimModel full policy | / keras "
        "| SlimModel, no verdict read | / keras |"
    )
    print("|---|---|---|---|---|---|")
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
        "| model | the read, µs per call | a ready verdict's read, µs "
        "| compiled step alone µs: keras | SlimModel |"
    )
    print("|---|---|---|---|---|")
    for name in names:
        s = summaries[name]
        cost, ready, step = (
            s["read_us_per_call"],
            s["ready_read_us"],
            s["step_us"],
        )
        print(
            f"| {name} | {text(cost, '{:.0f}')} | {ready:.1f} | "
            f"{step['keras']:.0f} | {step['slim']:.0f} |"
        )
    print()
    print("| model | keras step: kernels | SlimModel step: kernels |")
    print("|---|---|---|")
    for name in names:
        k = summaries[name]["kernels"]
        print(
            f"| {name} | {kernel_text(k['keras'])} | {kernel_text(k['slim'])} |"
        )
    print()
    line = {
        "bench": "jax_policy_overhead",
        "jax": jax.__version__,
        "keras": keras.__version__,
        "cpus": os.cpu_count(),
        "rounds": args.rounds,
        "runs": args.runs,
        "models": summaries,
    }
    print(json.dumps(line))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--runs", type=int, default=3, help="timed fits per process"
    )
    parser.add_argument(
        "--model", default="", help="only the models whose name has this"
    )
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument("--name", action="append", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child, args.name, args.runs)
    names = [name for name in MODELS if args.model in name]
    rounds = []
    for round_ in range(args.rounds):
        # The order rotates, so that no variant always goes first.
        shift = round_ % len(VARIANTS)
        order = VARIANTS[shift:] + VARIANTS[:shift]
        rounds.append({v: run_child(v, names, args.runs) for v in order})
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    summaries = {name: summarize(name, rounds) for name in names}
    report(args, names, summaries)


if __name__ == "__main__":
    main()
