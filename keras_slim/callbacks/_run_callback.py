"""`RunCallback`: the base of keras_slim's callbacks, which use the run."""

import keras

from keras_slim import _run


class RunCallback(keras.callbacks.Callback):
    """A callback that works with the run of its `fit` call.

    The `fit` that starts a run (`SlimModel.fit`, `keras_slim.train`)
    hands it over before `on_train_begin` (`use_run`); a plain
    `keras.Model.fit` hands nothing, and the run is then found by the
    model (`keras_slim._run.of`). Subclasses call `super()` first in
    `on_train_begin` and use `self._run` from then on.

    Example:
    ```python
    class Chief(RunCallback):
        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            print(self._run.is_chief)
    ```
    """

    _handed = None
    _run = None

    def use_run(self, run):
        """Takes the run of the coming `fit` (`None` once it ended).

        Args:
            run: A `Run`, or `None`.
        """
        self._handed = run

    def on_train_begin(self, logs=None):
        self._run = self._handed or _run.of(self.model, self.params)
