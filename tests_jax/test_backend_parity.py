"""The same initial weights and batches, trained under TensorFlow and
under JAX, end within 1e-5 for each field of the policy (one device)."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests_jax import helpers
from tests_jax.scripts import train_policies

ROOT = Path(__file__).parent.parent


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """`(tensorflow, jax)`: every policy's variables from each backend."""
    folder = tmp_path_factory.mktemp("parity")
    initial = train_policies.initial_weights()
    np.savez(folder / "init.npz", **initial)
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    env.pop("XLA_FLAGS", None)
    subprocess.run(
        [sys.executable, "-m", "tests_jax.scripts.train_policies",
         str(folder / "init.npz"), str(folder / "tf.npz")],
        cwd=ROOT, env=env, check=True, timeout=300,
    )  # fmt: skip
    return dict(np.load(folder / "tf.npz")), train_policies.train(initial)


@pytest.mark.parametrize("name", sorted(helpers.POLICIES))
def test_tensorflow_and_jax_train_the_same_weights(runs, name):
    tf_run, jax_run = runs
    keys = sorted(k for k in jax_run if k.startswith(f"{name}:"))
    assert keys and set(keys) <= set(tf_run)
    helpers.assert_close(tf_run, jax_run, keys=keys)
    # Trained: the policy's variables moved from where they started.
    start = train_policies.initial_weights()
    moved = [
        k for k in keys if k.split(":")[1] in start
        and not np.array_equal(jax_run[k], start[k.split(":")[1]])
    ]  # fmt: skip
    assert moved
