"""Trains one MLP per policy of `tests_jax.helpers.POLICIES` from the
same initial weights and batches, on whichever backend `KERAS_BACKEND`
names, and saves every variable: the TensorFlow and JAX runs of
tests_jax/test_backend_parity.py.

Usage: python -m tests_jax.scripts.train_policies INIT.npz OUT.npz
"""

import sys

import keras
import numpy as np

from tests_jax import helpers


def optimizer():
    """Adam with decoupled decay: momentum, scale and decay all move."""
    return keras.optimizers.AdamW(0.01, weight_decay=0.05)


def initial_weights():
    """The weights every run starts from, by variable path."""
    model = helpers.mlp()
    return {v.path: np.array(v) for v in model.weights}


def train(initial):
    """Trains each policy from `initial`; returns `{policy:path: array}`."""
    x, y = helpers.data()
    results = {}
    for name, policy in sorted(helpers.POLICIES.items()):
        model = helpers.compile_model(helpers.mlp(policy), optimizer())
        for variable in model.weights:
            variable.assign(initial[variable.path])
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
        for key, value in helpers.weights(model).items():
            results[f"{name}:{key}"] = value
        results[f"{name}:describe"] = np.array(
            model.gradient_policy.describe(model)
        )
    return results


def main(init_path, out_path):
    initial = dict(np.load(init_path))
    np.savez(out_path, **train(initial))


if __name__ == "__main__":
    main(*sys.argv[1:])
