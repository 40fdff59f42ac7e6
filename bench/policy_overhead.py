"""What a full gradient policy costs: keras.Model.fit vs SlimModel.fit.

Side by side in one process, interleaved, on the two models of the issue:
an MLP 32-64-64-10 and a CNN 28x28x1 conv32-pool-conv64-dense10, one
in-memory batch of 64 repeated. Each variant is built and warmed up once,
then timed in many short alternating runs; the table shows medians of
steps/s and the median (quartiles) of the per-run ratios to plain `fit`
(runs taken side by side, so drifts of the machine cancel). Target: ratio
>= 0.97, the policy costs at most 3%.

Variants:
  keras      keras.Model, plain optimizer
  slim-full  SlimModel with multipliers + freeze + clip_norm + NaN check
  slim-mc    SlimModel with multipliers + clip_norm + NaN check, no freeze
             (every variable trains, as in the keras variant)

Run: `make bench` or `python bench/policy_overhead.py [--runs 40]`.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_slim  # noqa: E402

POLICIES = {
    "slim-full": keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0, r".*/bias": 0.5},
        freeze=["layer1/bias"],
        clip_norm=1.0,
    ),
    "slim-mc": keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0, r".*/bias": 0.5},
        clip_norm=1.0,
    ),
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


MODELS = {
    "MLP 32-64-64-10": ((32,), mlp_layers, 100),
    "CNN 28x28x1 conv32-pool-conv64-dense10": ((28, 28, 1), cnn_layers, 15),
}


def build(variant, input_shape, layers):
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    outputs = layers(inputs)
    if variant == "keras":
        model = keras.Model(inputs, outputs)
    else:
        model = keras_slim.SlimModel(
            inputs, outputs, gradient_policy=POLICIES[variant]
        )
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def dataset(input_shape):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64,) + input_shape).astype("float32")
    y = rng.integers(0, 10, size=64).astype("int32")
    return tf.data.Dataset.from_tensors((x, y)).repeat()


def steps_per_second(model, data, steps):
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
    return steps / (time.perf_counter() - start)


def bench_model(name, runs):
    input_shape, layers, steps = MODELS[name]
    data = dataset(input_shape)
    variants = ["keras", "slim-full", "slim-mc"]
    models = {v: build(v, input_shape, layers) for v in variants}
    for model in models.values():
        model.fit(data, steps_per_epoch=30, epochs=1, verbose=0)
    results = {v: [] for v in variants}
    for run in range(runs):
        order = variants if run % 2 == 0 else variants[::-1]
        for variant in order:
            results[variant].append(
                steps_per_second(models[variant], data, steps)
            )
    # Ratios of runs taken side by side, so the machine's drifts (+-20%
    # between identical runs here) cancel; then the median and quartiles.
    ratios = {
        v: [a / b for a, b in zip(results[v], results["keras"])]
        for v in variants
    }
    medians = {v: statistics.median(r) for v, r in results.items()}
    return medians, ratios


def summary(ratios):
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return f"{median:.3f} ({q1:.2f}-{q3:.2f})"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    print(
        f"keras {keras.__version__}, tensorflow {tf.__version__}, "
        f"{os.cpu_count()} CPUs, {args.runs} interleaved runs; ratio: "
        "median of per-run ratios (quartiles)"
    )
    print()
    print(
        "| model | keras fit steps/s | SlimModel full policy | ratio "
        "| SlimModel no freeze | ratio |"
    )
    print("|---|---|---|---|---|---|")
    for name in MODELS:
        m, r = bench_model(name, args.runs)
        print(
            f"| {name} | {m['keras']:.1f} | {m['slim-full']:.1f} | "
            f"{summary(r['slim-full'])} | {m['slim-mc']:.1f} | "
            f"{summary(r['slim-mc'])} |"
        )


if __name__ == "__main__":
    main()
