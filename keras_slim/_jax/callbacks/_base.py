"""`RunCallback`: the base of keras_slim's callbacks on JAX."""

import keras

from keras_slim._jax import run as run_lib


class RunCallback(keras.callbacks.Callback):
    """A callback that follows a `SlimModel`'s run on JAX.

    From `on_train_begin` on, `self.run` is the fit's `Run`
    (`keras_slim/_jax/run.py`): the global step counted on the host, the
    last call's logs and state. Subclasses read them there and never
    `self.model` during the fit: on JAX that copies the whole state back
    to the model (`Callback.model` syncs it), once per access.

    Raises:
        ValueError: at train begin, for a model that is not a
            `keras_slim.SlimModel`.
    """

    #: The `Run` of the current fit (from `on_train_begin`).
    run = None

    def on_train_begin(self, logs=None):
        self.run = run_lib.of(self._model)
