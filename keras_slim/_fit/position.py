"""Where Keras's epoch loop stands, for checkpoints and resumed runs.

A checkpoint holds the input position: Keras's epoch and the steps run in
it (`feed.DataState`). This callback, which `SlimModel.fit` puts first in
the callback list, counts them on the host from Keras's own hooks. After
a resume, Keras's loop starts at the restored epoch (`Trainer.
_initial_epoch`) but counts the epoch's steps from 0, so the calls that
fall before the restored step run no step (`Run.phantom`): Keras's count
of the epoch, its end and its next pass stay those of the interrupted run,
and the data goes on from the restored iterator.
"""

import keras

from keras_slim import _run


class Position(keras.callbacks.Callback):
    """Counts Keras's epoch and steps into the run's feed.

    Example:
    ```python
    model.fit(data, callbacks=[Position(), *callbacks])  # by _fit.fit
    ```
    """

    def _feed(self):
        run = _run.current(self.model)
        return run, (run.feed if run is not None else None)

    def on_epoch_begin(self, epoch, logs=None):
        _, feed = self._feed()
        if feed is not None:
            feed.epoch = epoch
            feed.step = 0

    def on_train_batch_begin(self, batch, logs=None):
        run, feed = self._feed()
        if feed is None or feed.resume_at is None:
            return
        epoch, step = feed.resume_at
        run.phantom = feed.epoch == epoch and batch < step
        if not run.phantom:
            feed.resume_at = None

    def on_train_batch_end(self, batch, logs=None):
        run, feed = self._feed()
        if feed is not None:
            # Keras's index of the call's last step, in the epoch.
            feed.step = batch + 1
            run.phantom = False
