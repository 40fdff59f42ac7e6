"""Is the input the bottleneck of keras-slim-train? A real net's steps/s
fed from a folder of JPEGs, from TFRecords, and from memory.

Writes `--images` generated JPEGs (default 512, `--side` 128 px, 4
classes) as a folder of class subfolders and as TFRecord shards (4), with
bench/input_pipeline.py's `write_dataset`, in /dev/shm where it exists.
Then runs the command as a user would, `keras-slim-train --model_name
mobilenet_v2 --train_image_size 96 --batch_size 32`, in a fresh process
per run, on:

- "folder": `--dataset_dir <folder>` (the net's preprocessing,
  inception's: random crop, resize, flip);
- "tfrecords": `--dataset_dir <shards> --dataset_name bench`, the same
  images and preprocessing;
- "memory": the bundled digits (`--dataset_name digits`, arrays in
  memory, resized to 96 px, no augmentation): the same net, step and
  batch with an input that costs next to nothing.

Steps/s per run: from the command's own log lines (`--log_every_n_steps
10`, TF-Slim's `(x sec/step)`), the median of those after the first
(which holds the step's tracing). Sources alternate within each round.
Prints, per source, min / median / max over the rounds and the median
per-round ratio to "memory": 1.0 means the input costs the training
nothing.

Run: `python bench/command_input.py [--rounds 3] [--steps 60]`.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

import _common
import input_pipeline

SOURCES = ["folder", "tfrecords", "memory"]
_SEC_PER_STEP = re.compile(r"\(([0-9.]+) sec/step\)")


def flags(source, folder, shards, args):
    """The command's flags for `source`."""
    common = [
        *["--model_name", "mobilenet_v2", "--train_image_size", "96"],
        *["--batch_size", str(args.batch_size)],
        *["--max_number_of_steps", str(args.steps)],
        *["--log_every_n_steps", "10", "--save_interval_secs", "3600"],
        *["--save_summaries_secs", "3600"],
    ]
    if source == "folder":
        return [*common, "--dataset_dir", folder]
    if source == "tfrecords":
        return [*common, "--dataset_dir", shards, "--dataset_name", "bench"]
    return common  # the bundled digits, in memory


def steps_per_second(source, folder, shards, args):
    """One fresh run's steps/s, from its log lines after the first."""
    with tempfile.TemporaryDirectory() as train_dir:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "keras_slim.image.train_image_classifier",
                "--train_dir",
                train_dir,
                *flags(source, folder, shards, args),
            ],
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"{source}: {result.stderr[-2000:]}")
    seconds = [float(s) for s in _SEC_PER_STEP.findall(result.stdout)]
    if len(seconds) < 2:
        raise RuntimeError(f"{source}: no log lines\n{result.stdout}")
    return 1.0 / statistics.median(seconds[1:])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--side", type=int, default=128)
    parser.add_argument("--batch_size", type=int, default=32)
    args = parser.parse_args(argv)
    print(
        f"python bench/command_input.py --rounds {args.rounds} --steps "
        f"{args.steps}; {os.cpu_count()} CPUs; keras-slim-train "
        f"mobilenet_v2 at 96 px, batches of {args.batch_size}; "
        f"{args.images} JPEGs {args.side}x{args.side}"
    )
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    rates = {source: [] for source in SOURCES}
    with tempfile.TemporaryDirectory(dir=shm) as directory:
        folder, shards = input_pipeline.write_dataset(
            directory, args.images, args.side
        )
        for i in range(args.rounds):
            order = SOURCES if i % 2 == 0 else SOURCES[::-1]
            for source in order:
                rates[source].append(
                    steps_per_second(source, folder, shards, args)
                )
    print()
    print("| source | steps/s (min / median / max) | ratio to memory |")
    print("|---|---|---|")
    for source in SOURCES:
        ratios = [a / b for a, b in zip(rates[source], rates["memory"])]
        rate = _common.spread(rates[source], "{:.2f}")
        ratio = _common.spread(ratios, "{:.2f}")
        print(
            f"| {source} | {rate} | {statistics.median(ratios):.2f} ({ratio}) |"
        )


if __name__ == "__main__":
    main()
