"""Where mobilenet_v1's train step goes: Keras's BatchNormalization against
the fused batch norm keras_slim's nets use (TF-Slim's `fused=True`).

Builds `nets.build("mobilenet_v1", 5, image_size=128)` twice in fresh
processes: as keras_slim builds it (`FusedBatchNormalization`, TensorFlow's
`FusedBatchNormV3` and its gradient), and with Keras 3's
`keras.layers.BatchNormalization` in its place (the same arguments). Each
trains on one constant batch of 32 (keras_slim's RMSProp, TF-Slim's
defaults), and the TensorFlow profiler traces `--steps` steps after 5;
kernel time per step by op type (bench/step_profile.py's reader: kernels
overlap on two cores, so their sum is not the step time) and the median
step time.

Run: `python bench/batch_norm_profile.py [--steps 10] [--top 12]`.
"""

import argparse
import json
import os
import subprocess
import sys
import time

CHILD = """
import json, os, sys, tempfile, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import keras
import numpy as np
import tensorflow as tf
sys.path.insert(0, {bench!r})
import step_profile
from keras_slim.image import nets
from keras_slim.image import optimizer as optimizer_lib
from keras_slim.image.nets import _slim

if {keras_bn}:
    _slim.FusedBatchNormalization = keras.layers.BatchNormalization
model = nets.build("mobilenet_v1", 5, image_size=128)
model.compile(
    optimizer=optimizer_lib.configure_optimizer(0.01),
    loss=keras.losses.CategoricalCrossentropy(from_logits=True),
)
rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (32, 128, 128, 3)).astype("float32")
y = np.eye(5, dtype="float32")[np.arange(32) % 5]
data = tf.data.Dataset.from_tensors((x, y)).repeat()
times = []


class Timer(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        self.start = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        times.append(time.perf_counter() - self.start)


model.fit(data, steps_per_epoch=5, verbose=0, callbacks=[Timer()])
times.clear()
logdir = tempfile.mkdtemp()
tf.profiler.experimental.start(logdir)
model.fit(data, steps_per_epoch={steps}, verbose=0, callbacks=[Timer()])
tf.profiler.experimental.stop()
kernels = step_profile.kernel_times(logdir, {steps})
print(json.dumps({{"kernels": kernels, "step": float(np.median(times))}}))
"""


def profile(keras_bn, steps):
    bench = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(bench=bench, keras_bn=keras_bn, steps=steps)
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args(argv)
    start = time.perf_counter()
    keras_bn = profile(True, args.steps)
    fused = profile(False, args.steps)
    print(
        f"python bench/batch_norm_profile.py --steps {args.steps}; "
        f"{os.cpu_count()} CPUs; mobilenet_v1 128 px, batch 32; "
        f"{time.perf_counter() - start:.0f} s"
    )
    print()
    print("| op type | Keras BatchNormalization ms/step | fused ms/step |")
    print("|---|---|---|")
    a, b = keras_bn["kernels"], fused["kernels"]
    types = sorted(
        set(a) | set(b),
        key=lambda t: -max(a.get(t, (0, 0))[0], b.get(t, (0, 0))[0]),
    )
    for op_type in types[: args.top]:
        x = a.get(op_type, (0.0, 0))[0] / 1000
        y = b.get(op_type, (0.0, 0))[0] / 1000
        print(f"| {op_type} | {x:.1f} | {y:.1f} |")
    total_a = sum(us for us, _ in a.values()) / 1000
    total_b = sum(us for us, _ in b.values()) / 1000
    print(f"| all kernels | {total_a:.1f} | {total_b:.1f} |")
    print(f"| step (median s) | {keras_bn['step']:.3f} | {fused['step']:.3f} |")


if __name__ == "__main__":
    main()
