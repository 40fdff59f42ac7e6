"""XLA or not: SlimModel.fit with jit_compile False and True, the NaN check
on and off, on the two models of bench/_common.py.

What `jit_compile="auto"` should pick, measured (issue 19). Variants, each
`SlimModel.fit` with bench/vs_tf_slim.py's policy (multipliers, a frozen
bias, clip_norm) and steps per call chosen by the model:

- no XLA: `jit_compile=False`, the numeric check on (the default);
- XLA: `jit_compile=True`, the check on: the compiled step returns its
  verdict and the loop around it fails a non-finite step
  (keras_slim/_step/gate.py);
- XLA, no check: `jit_compile=True`, `check_numerics=False`: what the
  deferred check costs under XLA.

Each model is built once per variant, warmed up (the XLA compile is not
timed), then timed in interleaved runs; the table gives medians of
steps/s and the median (quartiles) of the per-run ratios to "no XLA".

Run: `python bench/xla.py [--runs 9]`.
"""

import argparse
import statistics
import time

import _common
import keras
import vs_tf_slim

import keras_slim

VARIANTS = {
    "no XLA": (False, True),
    "XLA": (True, True),
    "XLA, no check": (True, False),
}


def build(name, jit, check):
    input_shape, layers, _ = _common.MODELS[name]
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    model = keras_slim.SlimModel(
        inputs,
        layers(inputs),
        gradient_policy=keras_slim.GradientPolicy(
            **vs_tf_slim.POLICY, check_numerics=check
        ),
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=jit,
    )
    return model


def rate(model, data, steps):
    start = time.perf_counter()
    model.fit(data, steps_per_epoch=steps, verbose=0)
    return steps / (time.perf_counter() - start)


def bench_model(name, runs):
    data = _common.dataset(_common.MODELS[name][0])
    steps = 20 * _common.MODELS[name][2]
    models = {v: build(name, *flags) for v, flags in VARIANTS.items()}
    for model in models.values():
        rate(model, data, steps)  # traces and compiles
    results = {v: [] for v in models}
    for _ in range(runs):
        for variant, model in models.items():
            results[variant].append(rate(model, data, steps))
    ratios = _common.ratios_to(results, "no XLA")
    medians = {v: statistics.median(r) for v, r in results.items()}
    return medians, ratios


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    print(_common.header(args.runs))
    print()
    print(
        "| model | no XLA steps/s | XLA steps/s | XLA / no XLA "
        "| XLA, no check steps/s | XLA, no check / no XLA |"
    )
    print("|---|---|---|---|---|---|")
    for name in _common.MODELS:
        m, r = bench_model(name, args.runs)
        print(
            f"| {name} | {m['no XLA']:.1f} | {m['XLA']:.1f} | "
            f"{_common.summary(r['XLA'])} | {m['XLA, no check']:.1f} | "
            f"{_common.summary(r['XLA, no check'])} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
