"""The ops of `SlimModel.train_step`'s traced graph at two revisions.

A refactor of the step must trace the same step: this script traces the
train step of a small MLP under several settings (the default policy;
gradient and lr multipliers with a global clip under AdamW; the skipping
NaN mode; gradient accumulation; mixed_float16; the same under a
`MirroredStrategy` of 2 logical CPUs) at a baseline git revision and at
the working tree, each setting in a fresh process, and prints the op
types whose counts differ (the ops of the graph, and of the functions it
calls: a `cond`'s branches).

Run: `python bench/step_ops.py --baseline 749c15d`.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent

SETTINGS = (
    "default",
    "multipliers",
    "skip",
    "accumulation",
    "mixed",
    "mirrored",
    "mirrored_accumulation",
    "mirrored_mixed",
)

CHILD = r"""
import collections, contextlib, json, sys
sys.path.insert(0, {root!r})
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(
    cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
import keras, numpy as np
import keras_slim

setting = {setting!r}
mirrored = setting.startswith("mirrored")
strategy = scope = None
if mirrored:
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
scope = strategy.scope() if mirrored else contextlib.nullcontext()
if setting.endswith("mixed"):
    keras.mixed_precision.set_global_policy("mixed_float16")
policy = None
if setting == "multipliers":
    policy = keras_slim.GradientPolicy(
        multipliers={{"logits/.*": 2.0}}, clip_global_norm=1.0,
        lr_multipliers={{"fc1/.*": 0.5}})
keras.utils.set_random_seed(0)
with scope:
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(16, activation="relu", name="fc1")(inputs)
    outputs = keras.layers.Dense(3, name="logits")(hidden)
    model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    if setting == "multipliers":
        optimizer = keras.optimizers.AdamW(0.01)
    elif setting.endswith("accumulation"):
        optimizer = keras.optimizers.SGD(0.1, gradient_accumulation_steps=2)
    else:
        optimizer = keras.optimizers.SGD(0.1)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer=optimizer, loss=loss)
x, y = np.zeros((8, 8), "float32"), np.zeros((8,), "int32")
callbacks = []
if setting == "skip":
    callbacks = [keras_slim.callbacks.NanLossGuard(fail=False)]
model.fit(x, y, batch_size=8, verbose=0, callbacks=callbacks)
function = model.train_function
if setting == "skip":
    function._current = function._functions(function._options(callbacks))
data = (tf.constant(x), tf.constant(y))
if mirrored:
    step = lambda d: strategy.run(model.train_step, args=(d,))
else:
    step = model.train_step
graph = tf.function(step).get_concrete_function(data).graph.as_graph_def()
ops = collections.Counter(n.op for n in graph.node)
for f in graph.library.function:
    ops.update("function:" + n.op for n in f.node_def)
print(json.dumps(dict(ops)))
"""


def trace(tree, setting):
    """The op counts of one setting's traced step at `tree`."""
    result = subprocess.run(
        [sys.executable, "-c", CHILD.format(root=str(tree), setting=setting)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tempfile.gettempdir(),
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    if result.returncode != 0:
        raise RuntimeError(f"{tree} {setting}:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", required=True, help="a git revision")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "bench"))
    import _worktree

    print(f"baseline {args.baseline} vs the working tree: traced step ops")
    print()
    print("| setting | ops | differences (op: baseline -> working tree) |")
    print("|---|---|---|")
    with _worktree.baseline(args.baseline) as before:
        for setting in SETTINGS:
            old, new = trace(before, setting), trace(ROOT, setting)
            changed = sorted(
                k for k in set(old) | set(new) if old.get(k) != new.get(k)
            )
            text = ", ".join(
                f"{k}: {old.get(k, 0)} -> {new.get(k, 0)}" for k in changed
            )
            print(
                f"| {setting} | {sum(new.values())} | {text or 'the same'} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
