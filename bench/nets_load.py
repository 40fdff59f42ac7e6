"""What a TF-Slim net costs before its first step: build and checkpoint load.

For each net, at TF-Slim's default image size with 1001 classes (the
published ImageNet checkpoints' head), in a fresh process:

- build: `nets.build(name, 1001)` (the Keras layers, their weights
  allocated and initialized);
- load: `checkpoints.assign_from_checkpoint` of a TF1 name-based
  checkpoint in TF-Slim's names, through `nets.slim_name_map` (every
  variable, batch-norm statistics included), as `keras-slim-train
  --checkpoint_path model.ckpt` and `keras-slim-eval` read one;
- first step: the first `train_on_batch` (batch 8): tracing and the
  first run of the step;
- step: the median of the next 3 steps, the unit a fine-tune repeats.

The checkpoint is written once beforehand (by keras_slim, in TF-Slim's
names, with `tf.compat.v1.train.Saver`: the format TF-Slim writes). Each
net runs in `--processes` fresh processes, nets interleaved; the figure
is the median over processes with the range.

Run: `python bench/nets_load.py [--nets inception_v3 vgg_16 ...]
[--processes 3]`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

NETS = [
    "inception_v1",
    "inception_v3",
    "resnet_v1_50",
    "resnet_v2_101",
    "vgg_16",
    "mobilenet_v1",
    "mobilenet_v2",
]
CLASSES, BATCH, STEPS = 1001, 8, 3


def write_checkpoint(name, prefix):
    """A TF1 checkpoint of `name` in TF-Slim's names (random weights)."""
    import tensorflow as tf

    from keras_slim import checkpoints
    from keras_slim.image import nets

    model = nets.build(name, CLASSES)
    name_map = nets.slim_name_map(name)
    values = {
        name_map(v.path): v.numpy()
        for v in checkpoints.variables_to_restore(model)
    }
    with tf.Graph().as_default():
        for name, value in values.items():
            tf.compat.v1.Variable(value, name=name)
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            tf.compat.v1.train.Saver().save(session, prefix)


def measure(name, prefix):
    """Seconds to build, load, run the first step, run a step."""
    import keras
    import numpy as np

    from keras_slim import checkpoints
    from keras_slim.image import nets

    keras.utils.set_random_seed(0)
    start = time.perf_counter()
    model = nets.build(name, CLASSES)
    built = time.perf_counter()
    name_map = nets.slim_name_map(name)
    var_map = {
        name_map(v.path): v for v in checkpoints.variables_to_restore(model)
    }
    checkpoints.assign_from_checkpoint(prefix, var_map)
    loaded = time.perf_counter()
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    heads = len(model.outputs)
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=[loss] * heads if heads > 1 else loss,
    )
    size = model.input_shape[1]
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (BATCH, size, size, 3)).astype("float32")
    y = rng.integers(0, CLASSES, BATCH)
    y = [y] * heads if heads > 1 else y
    model.train_on_batch(x, y)
    first = time.perf_counter()
    steps = []
    for _ in range(STEPS):
        t = time.perf_counter()
        model.train_on_batch(x, y)
        steps.append(time.perf_counter() - t)
    return {
        "build": built - start,
        "load": loaded - built,
        "first step": first - loaded,
        "step": statistics.median(steps),
        "variables": len(var_map),
    }


def spread(values):
    return (
        f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nets", nargs="+", default=NETS)
    parser.add_argument("--processes", type=int, default=3)
    parser.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        job, name, prefix = args.worker
        if job == "write":
            write_checkpoint(name, prefix)
        else:
            print(json.dumps(measure(name, prefix)))
        return

    def run(*worker):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", *worker],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return out.strip().splitlines()[-1] if out.strip() else None

    work = tempfile.mkdtemp(prefix="nets_load_")
    prefixes = {
        name: os.path.join(work, name, "model.ckpt") for name in args.nets
    }
    for name, prefix in prefixes.items():
        run("write", name, prefix)
    results = {name: [] for name in args.nets}
    for _ in range(args.processes):
        for name in args.nets:
            results[name].append(json.loads(run("time", name, prefixes[name])))
    import keras
    import tensorflow as tf

    print(
        f"keras {keras.__version__}, tensorflow {tf.__version__}, "
        f"{os.cpu_count()} CPUs, {args.processes} processes per net; "
        "seconds: median (min-max)"
    )
    print(
        "| net | variables | build | load checkpoint | first step "
        f"(batch {BATCH}) | step | build + load, in steps |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, runs in results.items():
        col = {k: [r[k] for r in runs] for k in runs[0]}
        in_steps = [(r["build"] + r["load"]) / r["step"] for r in runs]
        print(
            f"| `{name}` | {runs[0]['variables']} | {spread(col['build'])} "
            f"| {spread(col['load'])} | {spread(col['first step'])} "
            f"| {spread(col['step'])} | {statistics.median(in_steps):.1f} |"
        )


if __name__ == "__main__":
    main()
