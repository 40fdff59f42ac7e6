"""Small models and data shared by the tests."""

import fcntl
import os
import pickle
import subprocess
import sys

import keras
import numpy as np
import tensorflow as tf

import keras_slim


def classification_data(n=256, features=8, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    y = rng.integers(0, classes, size=n).astype("int32")
    return x, y


def augmented(batches):
    """`batches` of `(x, y)` with noise drawn by stateless ops, seeded per
    batch by `tf.data.Dataset.random` (what an exact resume can restore)."""
    seeds = tf.data.Dataset.random(seed=5).batch(2)

    def augment(batch, seed):
        images, labels = batch
        noise = tf.random.stateless_normal(tf.shape(images), seed=seed)
        return images + 0.1 * noise, labels

    return tf.data.Dataset.zip((batches, seeds)).map(augment)


def mlp(
    policy=None,
    *,
    cls=keras_slim.SlimModel,
    seed=1,
    features=8,
    classes=3,
    regularizer=None,
    activation="tanh",
    dropout=None,
    name="mlp",
):
    """A 2-layer MLP with fixed initial weights (layers fc1, logits, and
    `drop` between them with `dropout`); the model of the tests and of the
    scripts they run in subprocesses (tests/scripts/)."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((features,))
    hidden = keras.layers.Dense(
        16, activation=activation, name="fc1", kernel_regularizer=regularizer
    )(inputs)
    if dropout:
        hidden = keras.layers.Dropout(dropout, name="drop")(hidden)
    outputs = keras.layers.Dense(classes, name="logits")(hidden)
    kwargs = {} if cls is keras.Model else {"gradient_policy": policy}
    return cls(inputs, outputs, name=name, **kwargs)


def compile_model(model, optimizer=None, **kwargs):
    kwargs.setdefault("metrics", ["accuracy"])
    model.compile(
        optimizer=optimizer or keras.optimizers.SGD(0.5, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **kwargs,
    )
    return model


def assert_gradient_not_finite(model, x, y):
    """The premise of a planted NaN, asserted before the claim: `model`'s
    gradient on the batch `(x, y)` is not finite.

    A NaN in an input reaches the first layer's kernel gradient as
    `x^T . delta` (IEEE arithmetic: NaN times anything is NaN) on every
    CPU, whatever the activations make of it: the loss itself may stay
    finite where a fused kernel maps `relu(NaN)` to 0. A model built for
    the premise only (its variables are read, not changed).
    """
    x = tf.convert_to_tensor(x)
    with tf.GradientTape() as tape:
        logits = model(x, training=False)
        loss = model.loss(y, logits)
    gradients = tape.gradient(loss, model.trainable_variables)
    finite = [bool(np.isfinite(g).all()) for g in gradients if g is not None]
    assert finite and not all(finite), (
        "premise: the planted batch's gradient is finite on this CPU"
    )


def global_step(model_or_optimizer):
    """The global step as an `int`: the optimizer's `iterations`.

    keras_slim keeps no step counter of its own: its callbacks,
    checkpoints and logs count this one.

    Args:
        model_or_optimizer: A compiled `keras.Model` (its `optimizer` is
            read) or an optimizer.

    Returns:
        The optimizer's `iterations`, read on the host.

    Example:
    ```python
    model.fit(x, y, epochs=1, steps_per_epoch=5, verbose=0)
    assert global_step(model) == 5
    ```
    """
    optimizer = model_or_optimizer
    if isinstance(optimizer, keras.Model):
        optimizer = optimizer.optimizer
    return int(optimizer.iterations.numpy())


def weights(model):
    return [v.numpy().copy() for v in model.weights]


def max_abs_diff(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def run_module(module, *args, timeout=120, env=None):
    """`python -m module args...` in a subprocess, output captured."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=dict(os.environ, **(env or {})),
    )


def once_per_session(tmp_path_factory, name, make):
    """`make()`, computed by one pytest-xdist worker and shared with the
    others (pytest-xdist's recipe: a file lock in the session's base
    directory), so a module fixture that trains in subprocesses runs once
    even when both workers run tests that use it.

    Args:
        tmp_path_factory: pytest's fixture.
        name: A file name for the value.
        make: A function of no argument; its result must pickle.

    Returns:
        What `make()` returned, here or in the other worker.
    """
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return make()  # one process: nothing to share
    root = tmp_path_factory.getbasetemp().parent
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = root / f"{name}.pickle"
        if cached.exists():
            return pickle.loads(cached.read_bytes())
        value = make()
        cached.write_bytes(pickle.dumps(value))
        return value
