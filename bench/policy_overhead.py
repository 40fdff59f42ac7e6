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
import statistics
import time

import _common
import keras

import keras_slim

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


def steps_per_second(model, data, steps):
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0, shuffle=False)
    return steps / (time.perf_counter() - start)


def bench_model(name, runs):
    input_shape, layers, steps = _common.MODELS[name]
    data = _common.dataset(input_shape)
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
    ratios = _common.ratios_to(results, "keras")
    medians = {v: statistics.median(r) for v, r in results.items()}
    return medians, ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    print(_common.header(args.runs))
    print()
    print(
        "| model | keras fit steps/s | SlimModel full policy | ratio "
        "| SlimModel no freeze | ratio |"
    )
    print("|---|---|---|---|---|---|")
    for name in _common.MODELS:
        m, r = bench_model(name, args.runs)
        print(
            f"| {name} | {m['keras']:.1f} | {m['slim-full']:.1f} | "
            f"{_common.summary(r['slim-full'])} | {m['slim-mc']:.1f} | "
            f"{_common.summary(r['slim-mc'])} |"
        )


if __name__ == "__main__":
    main()
