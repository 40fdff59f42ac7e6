"""Every private internal of Keras's JAX trainer keras_slim touches.

Pinned by tests_jax/test_keras_internals.py: a Keras upgrade that changes
one fails there first.
"""

import keras

__all__ = ["attach_state", "distribution", "state_shardings"]


def attach_state(model, state):
    """Hands a train call's returned state to Keras's JAX loop.

    `JAXTrainer.fit` keeps the variables' values outside the variables
    during an epoch (`_jax_state`, a dict of the four lists), marks them
    not synced (`_jax_state_synced`) and, in its `finally`, assigns them
    back (`jax_state_sync`). A call that raises after its compiled step
    donated the previous state must leave the state it returned there,
    or the sync would read deleted arrays.

    Args:
        model: The `SlimModel` being trained.
        state: `(trainable, non-trainable, optimizer, metrics)` values.
    """
    trainable, non_trainable, optimizer, metrics = state
    model._jax_state = {
        "trainable_variables": trainable,
        "non_trainable_variables": non_trainable,
        "optimizer_variables": optimizer,
        "metrics_variables": metrics,
    }
    model._jax_state_synced = False


def distribution():
    """The current `keras.distribution.Distribution`, or `None`."""
    return keras.distribution.distribution()


def state_shardings(model):
    """The shardings of the model's four variable lists, for the compiled
    step's outputs under a distribution (`JAXTrainer._get_state_
    sharding_spec`, which also checks them for consistency)."""
    return model._get_state_sharding_spec()
