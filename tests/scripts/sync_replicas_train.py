"""Synchronous steps over parameter servers, as a coordinator process.

Usage: python sync_replicas_train.py MODE OUT_JSON LOGDIR

MODE `average`: one worker, `replicas_to_aggregate=2` of
`total_num_replicas=2`: the worker computes two batches per step, in
order, and the step applies their average through the policy (with
learning-rate multipliers). The same model trained on one device on
batches twice the size (the two batches concatenated) is the reference:
the final weights must agree. Then the same under `mixed_float16`, with
batches whose float16 gradient overflows at the third step.

MODE `backup`: three workers, each step takes the first 2 of 3; worker 2
is stopped (SIGSTOP) from step 5 to step 25, and training goes on
without it (it is let go on only once step 25 is reached); its gradient
is stale when it comes back and is dropped. Through `keras_slim.train`,
with a checkpoint at the end.

Writes what the tests check to OUT_JSON.
"""

import json
import logging
import os
import pathlib
import sys
import time

os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import keras_slim  # noqa: E402
from keras_slim.cluster import LocalCluster  # noqa: E402

# The repository's root, for the model the tests share (tests/helpers.py).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.helpers import compile_model  # noqa: E402
from tests.helpers import global_step  # noqa: E402
from tests.helpers import mlp  # noqa: E402

mode, out, logdir = sys.argv[1:4]
BATCH = 16


def examples():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(320, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int32") + (x[:, 1] > 0).astype("int32")
    return x, y


def augmented(batch, loud=False):
    """Shuffled every pass, with noise keyed by position: the same stream
    in every process (no global seed involved). With `loud`, examples 64
    to 79 are 1000 times larger: their float16 gradient overflows."""
    x, y = examples()
    rng = np.random.default_rng(3)
    order = np.concatenate([rng.permutation(len(x)) for _ in range(8)])

    def noise(index, example):
        features, label = example
        seed = tf.stack([index, tf.constant(7, tf.int64)])
        features += 0.1 * tf.random.stateless_normal((8,), seed=seed)
        if loud:
            features *= tf.where((index >= 64) & (index < 80), 1e3, 1.0)
        return features, label

    return (
        tf.data.Dataset.from_tensor_slices((x[order], y[order]))
        .repeat()
        .enumerate()
        .map(noise)
        .batch(batch)
    )


def dataset_fn(input_context):
    del input_context
    return augmented(BATCH)


def build():
    policy = keras_slim.GradientPolicy(
        clip_norm=0.5,
        multipliers={"logits/.*": 2.0},
        lr_multipliers={"fc1/.*": 0.5},
    )
    return compile_model(
        mlp(policy), keras_slim.optimizers.Adam(0.01), steps_per_execution=1
    )


def loud_dataset_fn(input_context):
    del input_context
    return augmented(BATCH, loud=True)


def build_mixed():
    """Under `mixed_float16`: Keras's initial loss scale, grown every 4
    finite steps."""
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        policy = keras_slim.GradientPolicy(
            clip_norm=0.5, lr_multipliers={"fc1/.*": 0.5}
        )
        optimizer = keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(0.1, momentum=0.9),
            dynamic_growth_steps=4,
        )
        return compile_model(
            mlp(policy, activation="relu"), optimizer, steps_per_execution=1
        )
    finally:
        keras.mixed_precision.set_global_policy("float32")


def max_difference(a, b):
    return max(
        float(np.max(np.abs(np.asarray(x) - np.asarray(y))))
        for x, y in zip(a.get_weights(), b.get_weights())
    )


def mixed_average(config):
    """12 synchronous steps under `mixed_float16`, against one device;
    the third step's batches overflow."""
    with config.strategy().scope():
        model = build_mixed()
    initial = [np.asarray(w) for w in model.get_weights()]
    model.fit(loud_dataset_fn, steps_per_epoch=12, verbose=0)
    reference = build_mixed()
    data = augmented(2 * BATCH, loud=True).take(12)
    reference.fit(data, epochs=1, verbose=0)
    return {
        "max_difference": max_difference(model, reference),
        "moved": max(
            float(np.max(np.abs(w - np.asarray(v))))
            for w, v in zip(initial, model.get_weights())
        ),
        "iterations": global_step(model),
        "scales": [
            float(m.optimizer.dynamic_scale.numpy()) for m in (model, reference)
        ],
        "overflows": [
            list(m.train_function.overflow_steps.read())
            for m in (model, reference)
        ],
    }


class Straggler(keras.callbacks.Callback):
    """Stops worker 2 at one step and lets it go on at another."""

    def __init__(self, cluster, pause_at, resume_at):
        super().__init__()
        self.cluster = cluster
        self.pause_at, self.resume_at = pause_at, resume_at
        self.steps = {}

    def on_train_batch_end(self, batch, logs=None):
        step = global_step(self.model)
        if step == self.pause_at:
            self.cluster.pause("worker", 2)
            self.steps["paused"] = step
            self.steps["paused_time"] = time.monotonic()
        if step == self.resume_at:
            self.steps["resumed"] = step
            self.steps["paused_secs"] = (
                time.monotonic() - self.steps["paused_time"]
            )
            self.cluster.resume("worker", 2)


class Lines(logging.Handler):
    def __init__(self):
        super().__init__()
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


lines = Lines()
logging.getLogger("keras_slim").addHandler(lines)
logging.getLogger("keras_slim").setLevel(logging.INFO)

result = {}
workers = 1 if mode == "average" else 3
# `backup` stops a worker's process: there, each task has its own.
with LocalCluster(
    workers=workers, ps=1, one_process=mode == "average"
) as cluster:
    config = keras_slim.DeploymentConfig(
        num_ps_tasks=1,
        cluster_resolver=cluster.resolver(),
        replicas_to_aggregate=2,
        total_num_replicas=2 if mode == "average" else None,
    )
    result["describe"] = config.describe()
    with config.strategy().scope():
        model = build()
    try:
        keras_slim.train(
            model,
            dataset_fn,
            logdir=None,
            number_of_steps=3,
            startup_delay_steps=2,
        )
    except ValueError as error:
        result["startup_delay_error"] = str(error)
    if mode == "average":
        # Gradient summaries after the policy, from the coordinator.
        summaries = keras_slim.callbacks.Summaries(
            logdir, every_n_steps=6, every_n_secs=None, gradients=True
        )
        history = model.fit(
            dataset_fn,
            steps_per_epoch=12,
            epochs=2,
            verbose=0,
            callbacks=[summaries],
        )
        from tensorboard.backend.event_processing import event_accumulator

        events = event_accumulator.EventAccumulator(
            logdir, size_guidance={"tensors": 0}
        )
        events.Reload()
        result["gradient_norm_steps"] = [
            e.step for e in events.Tensors("logits/kernel/gradient_norm")
        ]
        result["history"] = history.history
        reference = build()
        reference.fit(augmented(2 * BATCH).take(24), epochs=1, verbose=0)
        result["max_difference"] = max_difference(model, reference)
        result["reference_iterations"] = global_step(reference)
        result["mixed"] = mixed_average(config)
    else:
        straggler = Straggler(cluster, pause_at=5, resume_at=25)
        result["loss"] = keras_slim.train(
            model,
            dataset_fn,
            logdir=logdir,
            number_of_steps=40,
            # Only the final save, after the resume: the first call of a
            # new function (a save) waits for every worker to answer.
            save_interval_secs=None,
            log_every_n_steps=None,
            callbacks=[straggler],
        )
        result["steps"] = straggler.steps
    result["iterations"] = global_step(model)
    result["log"] = lines.lines
with open(out, "w") as f:
    json.dump(result, f)
