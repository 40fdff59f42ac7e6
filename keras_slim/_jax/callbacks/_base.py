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

    What a subclass does after each call of the train function goes in
    `after_call`, not in `on_train_batch_end`: Keras's `fit` waits for
    each step's logs before it calls a callback that implements
    `on_train_batch_end` (`Run.after_each_call` says why that costs), and
    `after_call` is called in the loop with nothing waited for.

    Raises:
        ValueError: at train begin, for a model that is not a
            `keras_slim.SlimModel`.

    Example:
    ```python
    class EveryCall(RunCallback):
        def after_call(self):
            print(self.run.step)  # counted on the host: no wait
    ```
    """

    #: The `Run` of the current fit (from `on_train_begin`).
    run = None

    def on_train_begin(self, logs=None):
        self.run = run_lib.of(self._model)
        if type(self).after_call is not RunCallback.after_call:
            self.run.after_each_call(self.after_call)

    def after_call(self):
        """Called after each call of the train function that this fit
        makes, before Keras's `on_train_batch_end`; `self.run.state()` is
        the state the call returned. Does nothing here."""
