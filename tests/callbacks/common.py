"""Data and models shared by the callback tests."""

import keras
import numpy as np
import tensorflow as tf

from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import mlp


def full_batch(n=64, seed=0):
    """One deterministic batch, repeated forever: step k sees the same data."""
    x, y = classification_data(n, seed=seed)
    return x, y, tf.data.Dataset.from_tensors((x, y)).repeat()


def model(kind="slim", optimizer=None, steps_per_execution=1, policy=None):
    cls = keras.Model if kind == "keras" else None
    kwargs = {"cls": cls} if cls else {"policy": policy}
    return compile_model(
        mlp(**kwargs),
        optimizer or keras.optimizers.Adam(0.01),
        steps_per_execution=steps_per_execution,
    )


def fit(model, data, steps, callbacks=(), epochs=1):
    return model.fit(
        data,
        epochs=epochs,
        steps_per_epoch=steps,
        verbose=0,
        shuffle=False,
        callbacks=list(callbacks),
    )


def loss_on(model, x, y):
    """The compiled loss of the current weights on (x, y), as a step sees it."""
    return float(model.compute_loss(x, y, model(x, training=True)).numpy())


def all_finite(model):
    return all(np.all(np.isfinite(w)) for w in model.get_weights())
