"""What the training services cost: bare fit vs fit with every callback.

Side by side in one process, interleaved, on the models of the foundation
benchmark (bench/_common.py), runs 5x as long. Every variant trains a
`SlimModel` with the default policy; "services" adds keras_slim's
callbacks at their default intervals: `LogEveryNSteps(100)` (to a logging
handler at INFO), `NanLossGuard()`, `Checkpoints(dir)` (every 600 s),
`StopAtStep(num_steps)`, `Summaries(dir)` (every 600 s) and `Trace(dir)`
(no step chosen); "in-step" also asks `Summaries` for gradients and
activations (one `tf.cond` in every step). "bare again" is a second bare
model timed the same way: its ratio to "bare" (A/A) is the noise floor.
Only the steps are timed, from the first batch's end to the last
batch's end (a timing callback in every variant): the restore at train
begin, the final save at train end, and the first step (where `fit`
traces the train function, again when in-step summaries change it) are
not step time.
Target: ratio >= 0.97, the services cost at most 3%.

The ratio of whole steps varies by several percent between identical runs
on a shared 2-core machine, more than the services cost. So the script
also times the services' hooks alone, called through Keras's
`CallbackList` as `fit` calls them (the loss tracker reads on logging steps
included), minus an empty `CallbackList`, and gives that cost per step as
a fraction of the bare step.

Checkpoints go to /dev/shm where it exists: each short timed run ends with
a save (by default a save comes every 600 s), and the disk's write-back of
those files would otherwise slow the next run of either variant.

Run: `make bench` or `python bench/callbacks_overhead.py [--runs 40]`.
"""

import argparse
import gc
import io
import logging
import os
import statistics
import tempfile
import time

import _common
import keras

import keras_slim
from keras_slim import callbacks


class StepTimer(keras.callbacks.Callback):
    """Times the steps of one fit call after the first.

    The first step is left out with train begin and end: a callback that
    changes the train step (in-step summaries) makes `fit` trace it again,
    once per `fit`, inside the first step.
    """

    def on_train_batch_end(self, batch, logs=None):
        if batch == 0:
            self.start = time.perf_counter()
        self.end = time.perf_counter()
        self.steps = batch


def build(input_shape, layers):
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    model = keras_slim.SlimModel(inputs, layers(inputs))
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def services(directory, steps, in_step=False):
    return [
        callbacks.LogEveryNSteps(),
        callbacks.NanLossGuard(),
        callbacks.Checkpoints(directory),
        callbacks.StopAtStep(num_steps=steps),
        callbacks.Summaries(directory, gradients=in_step, activations=in_step),
        callbacks.Trace(directory),
    ]


# Timed runs are this many times longer than the foundation benchmark's:
# a 0.1 s run of the MLP scattered by several percent between identical
# runs, more than the target allows.
STEPS_SCALE = 5

# "bare" twice: the second, an identical model timed the same way, is the
# A/A control whose ratio shows the noise floor of this run.
VARIANTS = ["bare", "bare again", "services", "in-step"]


def extra_for(variant, directory, steps):
    if variant.startswith("bare"):
        return []
    return services(directory, steps, in_step=variant == "in-step")


def steps_per_second(model, data, steps, extra):
    # Each run starts from a collected heap, so that cycles left by earlier
    # runs (a checkpoint manager holds many objects) are not collected
    # inside the next run's timed steps.
    gc.collect()
    timer = StepTimer()
    model.fit(
        data,
        steps_per_epoch=steps,
        epochs=1,
        verbose=0,
        shuffle=False,
        callbacks=[timer] + extra,
    )
    return timer.steps / (timer.end - timer.start)


def hook_cost(model, directory, calls=20000):
    """Seconds per step that the services' hooks add to `fit`'s loop."""

    def per_step(callback_list):
        start = time.perf_counter()
        for i in range(calls):
            callback_list.on_train_batch_begin(i)
            callback_list.on_train_batch_end(i, {"loss": 0.5})
        return (time.perf_counter() - start) / calls

    extra = services(directory, 10**9)
    list_with = keras.callbacks.CallbackList(extra, model=model)
    list_with.on_train_begin()
    empty = keras.callbacks.CallbackList([], model=model)
    costs = [per_step(list_with) - per_step(empty) for _ in range(5)]
    return statistics.median(costs)


def bench_model(name, runs, directory):
    input_shape, layers, steps = _common.MODELS[name]
    steps *= STEPS_SCALE
    data = _common.dataset(input_shape)
    variants = VARIANTS
    models = {v: build(input_shape, layers) for v in variants}
    for variant, model in models.items():
        steps_per_second(model, data, 30, extra_for(variant, directory, 30))
    results = {v: [] for v in variants}
    for run in range(runs):
        for variant in variants if run % 2 == 0 else variants[::-1]:
            extra = extra_for(variant, directory, steps)
            results[variant].append(
                steps_per_second(models[variant], data, steps, extra)
            )
    medians = {v: statistics.median(r) for v, r in results.items()}
    medians["hooks"] = hook_cost(models["services"], directory)
    return medians, _common.ratios_to(results, "bare")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    # Lines are formatted and written, as a user's INFO handler would.
    handler = logging.StreamHandler(io.StringIO())
    logging.getLogger("keras_slim").addHandler(handler)
    logging.getLogger("keras_slim").setLevel(logging.INFO)
    logging.getLogger("keras_slim").propagate = False
    print(_common.header(args.runs))
    print()
    print(
        "| model | bare fit steps/s | A/A: bare again, ratio "
        "| fit + services steps/s | ratio "
        "| + in-step summaries | ratio | hooks us/step | hooks / bare step |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in _common.MODELS:
        shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
        with tempfile.TemporaryDirectory(dir=shm) as directory:
            m, r = bench_model(name, args.runs, directory)
        fraction = m["hooks"] * m["bare"]
        print(
            f"| {name} | {m['bare']:.1f} | "
            f"{_common.summary(r['bare again'])} | {m['services']:.1f} | "
            f"{_common.summary(r['services'])} | {m['in-step']:.1f} | "
            f"{_common.summary(r['in-step'])} | {m['hooks'] * 1e6:.1f} | "
            f"{fraction:.2%} |"
        )


if __name__ == "__main__":
    main()
