"""Steps/s process by process: where the input's tf.data threads matter.

On 2 cores the CNN of bench/_common.py, fed its in-memory batch by
`tf.data`, has been seen to run under `fit` at ~170 steps/s in some
processes and ~117 in others. One explanation tried: tf.data's own threads
(a pool as large as the machine, autotune, prefetch) competing with the
step's kernels. This bench runs each system in fresh processes,
alternating, and reports the spread:

- `keras fit`: `keras.Model.fit`, tf.data's defaults;
- `SlimModel.fit`: bench/vs_tf_slim.py's SlimModel (gradient policy, the
  training services at their default intervals); it reads an in-memory
  input with one thread and no autotune
  (keras_slim/_fit/input_options.py), a decoding one with tf.data's
  defaults;
- `SlimModel.fit, tf.data defaults`: the same, tf.data's defaults always;
- `SlimModel.fit, one thread`: the same, one thread and no autotune
  always (for `--input images`, what the choice avoids);
- `TF-Slim, tf.data`: tf_slim's `create_train_op` in graph mode fed by the
  same `tf.data` pipeline through an iterator in its graph;
- `TF-Slim, constants`: fed constant tensors.

`--input images` feeds an input that works instead: the batch's images
stored as PNG bytes, decoded and scaled in a parallel map
(`num_parallel_calls=AUTOTUNE`) each step; TF-Slim is then not run.

Reported per system: min / median / max steps/s over processes and the
slowest process over the fastest. Targets (the speed issue): the slowest
`SlimModel.fit` process within 5% of the fastest; its median at least
1.0x TF-Slim fed by the same tf.data pipeline.

Run: `python bench/input_threads.py [--processes 10] [--input memory]
[--systems "keras fit;SlimModel.fit"]`.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

import _common

NAME = "CNN 28x28x1 conv32-pool-conv64-dense10"


def image_dataset():
    """The CNN's batch of 64, as PNG bytes decoded in a parallel map."""
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(64, 28, 28, 1), dtype=np.uint8)
    encoded = [tf.io.encode_png(p).numpy() for p in pixels]
    labels = rng.integers(0, 10, size=64).astype("int32")

    def decode(png, label):
        image = tf.io.decode_png(png, channels=1)
        return tf.cast(image, tf.float32) / 255.0, label

    data = tf.data.Dataset.from_tensor_slices((encoded, labels)).repeat()
    data = data.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    return data.batch(64).prefetch(tf.data.AUTOTUNE)


def child(system, kind):
    import tempfile

    import vs_tf_slim

    if kind == "memory":
        data = _common.dataset(_common.MODELS[NAME][0])
    else:
        data = image_dataset()
    from keras_slim._fit import input_options

    if system == "SlimModel.fit, tf.data defaults":
        input_options.for_fit = lambda dataset: dataset
    if system == "SlimModel.fit, one thread":
        input_options.for_fit = input_options._one_thread
    logdir = tempfile.mkdtemp()
    if system == "keras fit":
        return vs_tf_slim.keras_fit(NAME, data, logdir)
    return vs_tf_slim.slim_model_fit(NAME, data, logdir)


SYSTEMS = [
    "keras fit",
    "SlimModel.fit",
    "SlimModel.fit, tf.data defaults",
    "SlimModel.fit, one thread",
]


def run_child(system, kind):
    result = subprocess.run(
        [sys.executable, __file__, "--child", system, "--input", kind],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--input", choices=["memory", "images"])
    parser.add_argument("--child")
    parser.add_argument(
        "--systems",
        default=None,
        help="';'-separated systems to run (default: all)",
    )
    args = parser.parse_args(argv)
    kind = args.input or "memory"
    if args.child:
        print(json.dumps(child(args.child, kind)))
        return
    import vs_tf_slim

    print(
        f"python bench/input_threads.py --processes {args.processes} "
        f"--input {kind}; {os.cpu_count()} CPUs; {NAME}, batch 64, "
        f"{vs_tf_slim.TIMED} steps timed after {vs_tf_slim.WARMUP}; one "
        "fresh process per system and round"
    )
    peers = {}
    if kind == "memory":
        peers = {
            "TF-Slim, tf.data": lambda: vs_tf_slim.tf_slim(
                NAME, feed="dataset"
            ),
            "TF-Slim, constants": lambda: vs_tf_slim.tf_slim(NAME),
        }
    systems = SYSTEMS if kind == "images" else SYSTEMS[:3]
    if args.systems:
        systems = args.systems.split(";")
        peers = {k: v for k, v in peers.items() if k in systems}
        systems = [s for s in systems if s in SYSTEMS]
    results = {s: [] for s in [*systems, *peers]}
    for _ in range(args.processes):
        for system in systems:
            results[system].append(run_child(system, kind))
        for system, peer in peers.items():
            results[system].append(peer())
    print()
    print("| system | steps/s min / median / max | slowest / fastest |")
    print("|---|---|---|")
    for system, rates in results.items():
        print(
            f"| {system} | {min(rates):.0f} / {statistics.median(rates):.0f}"
            f" / {max(rates):.0f} | {min(rates) / max(rates):.2f} |"
        )
    if peers and "SlimModel.fit" in results:
        slim = statistics.median(results["SlimModel.fit"])
        for system in peers:
            ratio = slim / statistics.median(results[system])
            print(f"\nSlimModel.fit median / {system} median: {ratio:.2f}x")
    print(f"\nper process, in order: {json.dumps(results)}")


if __name__ == "__main__":
    main()
