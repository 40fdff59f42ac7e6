"""`RunView`: what a callback may read of its `fit` call's run."""


class RunView:
    """A read-only view of the run of one `fit` call.

    keras_slim keeps what its pieces share during one `fit` (the train
    function, the data feed, the callbacks) in one object, the run, which
    the `fit` hands to the callbacks. `StepCallback.run` gives a callback
    this view of it: what a callback may rely on, and nothing it could
    break.

    Args:
        run: The run (made by keras_slim's `fit`, never by users).

    Example:
    ```python
    class Announce(keras_slim.callbacks.StepCallback):
        def on_train_begin(self, logs=None):
            super().on_train_begin(logs)
            if self.run.is_chief and self.run.resumed_from:
                print("resumed from", self.run.resumed_from)
    ```
    """

    def __init__(self, run):
        self._run = run

    @property
    def is_chief(self):
        """Whether this process writes checkpoints, summaries and traces:
        the chief worker, the coordinator, or the only process (or what
        `keras_slim.train(is_chief=...)` says)."""
        return self._run.is_chief

    @property
    def resumed_from(self):
        """The checkpoint `Checkpoints` restored at the start of this `fit`
        (known after its `on_train_begin`), or `None`."""
        return self._run.resumed_from

    @property
    def latest_checkpoint(self):
        """The newest checkpoint `Checkpoints` saved or restored in this
        `fit` (on the chief; a saving callback's `on_train_batch_end` and
        `on_train_end` run before those of the callbacks passed after
        it), or `None`."""
        checkpoints = self._run.checkpoints
        return None if checkpoints is None else checkpoints.latest_checkpoint

    @property
    def stop_signal(self):
        """The name of the signal that asked training to stop
        (`"SIGTERM"`, `"SIGINT"`), while `Checkpoints` catches them; else
        `None`."""
        return self._run.signals.received

    @property
    def no_step(self):
        """Whether the coming call of the train function runs no step: a
        run already at its `StopAtStep` target, or a resumed run catching
        up with Keras's count of its epoch."""
        return self._run.no_step

    def global_step(self):
        """The global step (`model.optimizer.iterations`), read now.

        Under parameter servers, the steps in flight settle first.

        Returns:
            An int.
        """
        return self._run.global_step()

    def batch_count(self):
        """`(batches, k)`: the batches applied so far and the batches of
        one global step (Keras's `gradient_accumulation_steps`, else 1),
        read now.

        Returns:
            A pair of ints.
        """
        return self._run.batch_count()
