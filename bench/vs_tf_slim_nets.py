"""The main job on real nets: keras-slim-train against TF-Slim's own
training and Keras's fit, from the same TFRecords.

Writes TF-Slim's flowers layout (`flowers_{train,validation}_*-of-00005`,
`labels.txt`): `--images` generated JPEGs of 240x320 (smooth color
fields with noise, JPEG quality 90), a tenth more for validation, in
/dev/shm where it exists. Then, per net (mobilenet_v1 at 128 px,
inception_v1 at 224 (its 7x7 pool needs it), resnet_v1_50 at 96; batch
32, inception preprocessing), runs each system in a fresh process,
alternating their order round by round:

- keras-slim-train: the command as a TF-Slim user types it
  (`--dataset_name flowers --dataset_dir ... --model_name ...
  --preprocessing_name inception`, defaults otherwise: RMSProp,
  exponential decay, weight decay 4e-5, summaries and checkpoints every
  600 s), ending with its held-out accuracy on the validation split;
- TF-Slim: bench/tf_slim_train.py, train_image_classifier's training
  path on the `tf_slim` package (its queues, nets, fused batch norm,
  `create_train_op`, `slim.learning.train`); mobilenet_v1 is not in
  `tf_slim` and is written there with its layers;
- Keras: `keras.Model.fit` of Keras's own application of the net
  (`keras.applications.MobileNet`, `ResNet50`; none for inception_v1),
  RMSprop, fed the same tf.data pipeline as keras-slim-train
  (bench/keras_train.py).

Steady steps/s: from the arrival times of each process's log lines
(`global step N` every 10 steps, output unbuffered; the lines a call of
several steps prints together count as one arrival, at its last step):
the steps between the first arrival at or after step `--skip` and the
last, over the time between them, so building, tracing, the first steps
and what follows the last step are left out. Whole process: from the
spawn to the exit. Ratios are per round (keras-slim-train / TF-Slim, side
by side), then the median and spread (min - max) over rounds.

Writes the table (Markdown) to stdout, with `--chart PATH` a bar chart
of the median ratios (matplotlib), and with `--logs DIR` each process's
output, every line after the seconds at which it arrived.

Run: `python bench/vs_tf_slim_nets.py [--rounds 3] [--nets mobilenet_v1]
[--chart docs/images/main_job.png]`.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

import _common
import numpy as np
import tf_slim_train

from keras_slim.image.datasets import writers

#: net: (image size, steps, Keras's application or None)
NETS = {
    "mobilenet_v1": (128, 80, "MobileNet"),
    "inception_v1": (224, 40, None),
    "resnet_v1_50": (96, 50, "ResNet50"),
}
SYSTEMS = ("keras-slim-train", "TF-Slim", "Keras")
CLASSES = ("daisy", "dandelion", "roses", "sunflowers", "tulips")
BATCH = 32
LOG_EVERY = 10
_STEP = re.compile(r"global step (\d+)")


def _images(count, rng):
    """Smooth color fields with noise, 240x320: a photo's JPEG cost."""
    low = rng.uniform(0, 255, (count, 6, 8, 3))
    images = np.repeat(np.repeat(low, 40, axis=1), 40, axis=2)
    noise = rng.normal(0, 12, images.shape)
    return np.clip(images + noise, 0, 255).astype(np.uint8)


def write_flowers(directory, count):
    """TF-Slim's flowers layout: `count` train, `count // 10` validation."""
    rng = np.random.default_rng(0)
    for split, n in (("train", count), ("validation", count // 10)):
        writers.write_tfrecords(
            _images(n, rng),
            np.arange(n) % len(CLASSES),
            directory,
            name="flowers",
            split=split,
            shards=5,
            image_format="jpeg",
            class_names=list(CLASSES),
        )


def command(system, net, data, train_dir, steps, count):
    """The command line of one run; `None` when the system lacks the net."""
    size, _, application = NETS[net]
    if system == "keras-slim-train":
        return [
            sys.executable,
            "-m",
            "keras_slim.image.train_image_classifier",
            f"--train_dir={train_dir}",
            f"--dataset_dir={data}",
            "--dataset_name=flowers",
            f"--model_name={net}",
            "--preprocessing_name=inception",
            f"--train_image_size={size}",
            f"--batch_size={BATCH}",
            f"--max_number_of_steps={steps}",
            f"--log_every_n_steps={LOG_EVERY}",
        ]
    if system == "TF-Slim":
        return tf_slim_train.argv(
            [
                f"--train_dir={train_dir}",
                f"--dataset_dir={data}",
                f"--model_name={net}",
                f"--train_image_size={size}",
                f"--num_samples={count}",
                f"--batch_size={BATCH}",
                f"--max_number_of_steps={steps}",
                f"--log_every_n_steps={LOG_EVERY}",
            ]
        )
    if application is None:
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        sys.executable,
        os.path.join(here, "keras_train.py"),
        f"--dataset_dir={data}",
        f"--application={application}",
        f"--image_size={size}",
        f"--batch_size={BATCH}",
        f"--steps={steps}",
        f"--log_every_n_steps={LOG_EVERY}",
    ]


def run(argv, timeout=1800, log=None):
    """Runs `argv`; returns `(seconds, [(step, arrival time), ...])`.
    With `log` (an open file), writes each output line there after the seconds
    since the spawn at which it arrived."""
    env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
    start = time.perf_counter()
    process = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    lines, arrivals = [], []
    deadline = start + timeout
    for line in process.stdout:
        lines.append(line)
        if log is not None:
            log.write(f"{time.perf_counter() - start:8.2f} {line}")
        match = _STEP.search(line)
        if match:
            arrivals.append((int(match.group(1)), time.perf_counter()))
        if time.perf_counter() > deadline:
            process.kill()
            break
    code = process.wait(timeout=max(1.0, deadline - time.perf_counter()))
    seconds = time.perf_counter() - start
    if code != 0:
        raise RuntimeError(f"{argv[:4]} exited {code}:\n{''.join(lines[-40:])}")
    return seconds, arrivals


def bursts(arrivals, gap=0.05):
    """`[(last step, time), ...]`: lines that arrive together (one call of
    several steps prints its lines at its end) count as one arrival."""
    grouped = []
    for step, arrival in arrivals:
        if grouped and arrival - grouped[-1][1] < gap:
            grouped[-1] = (step, grouped[-1][1])
        else:
            grouped.append((step, arrival))
    return grouped


def steady_rate(arrivals, skip):
    """Steps/s from the first arrival at or after step `skip` to the last."""
    after = [b for b in bursts(arrivals) if b[0] >= skip]
    if len(after) < 2:
        raise RuntimeError(
            f"fewer than 2 arrivals after step {skip}: {arrivals}"
        )
    (step0, t0), (step1, t1) = after[0], after[-1]
    return (step1 - step0) / (t1 - t0)


def measure(args, data):
    """`{(net, system): [(steps/s, process seconds), ...]}` over rounds."""
    results = {}
    for round_index in range(args.rounds):
        for net in args.nets:
            steps = args.steps or NETS[net][1]
            systems = [s for s in SYSTEMS if s in args.systems]
            order = systems if round_index % 2 == 0 else systems[::-1]
            for system in order:
                with tempfile.TemporaryDirectory() as train_dir:
                    argv = command(
                        system, net, data, train_dir, steps, args.images
                    )
                    if argv is None:
                        continue
                    if args.logs:
                        name = f"round{round_index}_{net}_{system}.log"
                        os.makedirs(args.logs, exist_ok=True)
                        with open(os.path.join(args.logs, name), "w") as log:
                            seconds, arrivals = run(argv, log=log)
                    else:
                        seconds, arrivals = run(argv)
                rate = steady_rate(arrivals, args.skip)
                results.setdefault((net, system), []).append((rate, seconds))
                print(
                    f"# round {round_index} {net} {system}: "
                    f"{rate:.3f} steps/s, process {seconds:.1f} s",
                    file=sys.stderr,
                )
    return results


def table(results, nets):
    """The Markdown table and the median ratios per net."""
    rows = [
        "| net | system | steps/s (min / median / max) | process s "
        "(min / median / max) | steps/s ratio to TF-Slim | process ratio "
        "to TF-Slim |",
        "|---|---|---|---|---|---|",
    ]
    medians = {}
    for net in nets:
        base = results[(net, "TF-Slim")]
        for system in SYSTEMS:
            runs = results.get((net, system))
            if runs is None:
                rows.append(f"| {net} | {system} | n/a | n/a | n/a | n/a |")
                continue
            rates = [r for r, _ in runs]
            seconds = [s for _, s in runs]
            rate_ratio = [r / b for (r, _), (b, _) in zip(runs, base)]
            time_ratio = [s / b for (_, s), (_, b) in zip(runs, base)]
            medians[(net, system)] = (
                statistics.median(rate_ratio),
                statistics.median(time_ratio),
            )
            rows.append(
                f"| {net} | {system} | {_common.spread(rates, '{:.3f}')} | "
                f"{_common.spread(seconds)} | "
                f"{statistics.median(rate_ratio):.2f} "
                f"({_common.spread(rate_ratio, '{:.2f}')}) | "
                f"{statistics.median(time_ratio):.2f} "
                f"({_common.spread(time_ratio, '{:.2f}')}) |"
            )
    return "\n".join(rows), medians


def chart(medians, nets, path):
    """Two panels of median ratios to TF-Slim, per net and system: steady
    steps/s (higher is faster) and the whole process's time (lower)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(10, 3.4), dpi=120)
    width = 0.8 / len(SYSTEMS)
    panels = (
        (0, "steady steps/s relative to TF-Slim (higher: faster)"),
        (1, "whole process time relative to TF-Slim (lower: shorter)"),
    )
    for axis, (index, title) in zip(axes, panels):
        for i, system in enumerate(SYSTEMS):
            values = [
                medians.get((net, system), (0.0, 0.0))[index] for net in nets
            ]
            positions = [j + (i - 1) * width for j in range(len(nets))]
            bars = axis.bar(positions, values, width, label=system)
            labels = [f"{v:.2f}" if v else "n/a" for v in values]
            axis.bar_label(bars, labels=labels, fontsize="x-small")
        axis.axhline(1.0, color="gray", linewidth=0.8)
        axis.set_xticks(range(len(nets)), nets)
        axis.set_title(title, fontsize="small")
    axes[0].legend(loc="lower left", fontsize="x-small")
    figure.suptitle(
        "keras-slim-train, TF-Slim and Keras: batch 32, flowers TFRecords, "
        "inception preprocessing, 2 CPU cores",
        fontsize="small",
    )
    figure.tight_layout()
    figure.savefig(path)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=640)
    parser.add_argument("--skip", type=int, default=2 * LOG_EVERY)
    parser.add_argument("--nets", nargs="+", default=list(NETS))
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS))
    parser.add_argument("--chart", default=None)
    parser.add_argument(
        "--logs",
        default=None,
        help="a folder for each process's output, lines timed",
    )
    args = parser.parse_args(argv)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as data:
        write_flowers(data, args.images)
        results = measure(args, data)
    text, medians = table(results, args.nets)
    print(
        f"python bench/vs_tf_slim_nets.py --rounds {args.rounds}; "
        f"{os.cpu_count()} CPUs; batch {BATCH}; steady steps/s from step "
        f"{args.skip} to the last"
    )
    print()
    print(text)
    print()
    print(
        json.dumps(
            {f"{n} {s}": v for (n, s), v in sorted(results.items())},
        )
    )
    if args.chart:
        chart(medians, args.nets, args.chart)


if __name__ == "__main__":
    main()
