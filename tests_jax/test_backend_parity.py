"""The same initial weights and batches, trained under TensorFlow and
under JAX, end within 1e-5 for each field of the policy (one device)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests_jax import helpers
from tests_jax.scripts import train_policies

ROOT = Path(__file__).parent.parent


def _start_tensorflow_run(folder):
    """A TensorFlow process training every policy into `folder/tf.npz`."""
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    env.pop("XLA_FLAGS", None)
    return subprocess.Popen(
        [sys.executable, "-m", "tests_jax.scripts.train_policies",
         str(folder / "init.npz"), str(folder / "tf.npz")],
        cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_tensorflow_and_jax_train_the_same_weights(tmp_path):
    # One test: the TensorFlow process trains every policy once, while
    # this one trains them on JAX.
    start = train_policies.initial_weights()
    np.savez(tmp_path / "init.npz", **start)
    process = _start_tensorflow_run(tmp_path)
    try:
        jax_run = train_policies.train(start)
        _, errors = process.communicate(timeout=300)
    finally:
        process.kill()
    assert process.returncode == 0, errors[-3000:]
    tf_run = dict(np.load(tmp_path / "tf.npz"))
    for name in sorted(helpers.POLICIES):
        _check_policy(name, tf_run, jax_run, start)


def _check_policy(name, tf_run, jax_run, start):
    # The policy's table reads the same on both backends.
    table = f"{name}:describe"
    assert str(tf_run[table]) == str(jax_run[table])
    assert "fc1/kernel" in str(jax_run[table])
    keys = sorted(k for k in jax_run if k.startswith(f"{name}:") and k != table)
    assert keys and set(keys) <= set(tf_run), name
    helpers.assert_close(tf_run, jax_run, keys=keys)
    # Trained: the policy's variables moved from where they started.
    moved = [
        k for k in keys if k.split(":")[1] in start
        and not np.array_equal(jax_run[k], start[k.split(":")[1]])
    ]  # fmt: skip
    assert moved, name
