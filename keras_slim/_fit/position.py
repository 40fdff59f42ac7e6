"""Where Keras's epoch loop stands, for checkpoints and resumed runs.

A checkpoint holds the input position: Keras's epoch and the steps run in
it (`feed.DataState`). This callback, which `SlimModel.fit` puts first in
the callback list, counts them on the host from Keras's own hooks. After
a resume, Keras's loop starts at the restored epoch (`Trainer.
_initial_epoch`) but counts the epoch's steps from 0, so the calls that
fall before the restored step run no step (`Run.no_step`): Keras's count
of the epoch, its end and its next pass stay those of the interrupted run,
and the data goes on from the restored iterator.
"""

import keras


class Position(keras.callbacks.Callback):
    """Counts Keras's epoch and steps into the run's feed.

    Args:
        run: The fit's `Run`, whose feed is counted.

    Example:
    ```python
    model.fit(data, callbacks=[Position(run), *callbacks])  # by _fit.fit
    ```
    """

    def __init__(self, run):
        super().__init__()
        self._run = run

    def on_epoch_begin(self, epoch, logs=None):
        feed = self._run.feed
        feed.epoch = epoch
        feed.step = 0

    def on_train_batch_begin(self, batch, logs=None):
        feed = self._run.feed
        if feed.resume_at is None:
            return
        epoch, step = feed.resume_at
        catching_up = feed.epoch == epoch and batch < step
        if catching_up:
            self._run.no_step = True
        else:
            feed.resume_at = None

    def on_train_batch_end(self, batch, logs=None):
        # Keras's index of the call's last step, in the epoch.
        self._run.feed.step = batch + 1
