"""`StepCounter`: the global step, followed on the host."""


def steps_in_batch(begin, end):
    """The number of steps Keras ran between batch indices `begin`, `end`."""
    return int(end) - int(begin) + 1


class StepCounter:
    """The global step, counted on the host between explicit reads.

    Callbacks need the global step (`model.optimizer.iterations`) on every
    batch, but reading a variable waits for the device. A `StepCounter`
    reads it when asked (`sync`) and in between counts the steps each
    call of the train function ran. `StepCallback.counter` is one.

    Args:
        run: The `RunView` of the fit, which reads the global step.

    Attributes:
        step: The global step as last read or counted, or `None` before
            the first `sync`.

    Example:
    ```python
    counter = StepCounter(callback.run)
    counter.sync()  # reads optimizer.iterations
    counter.advance(begin=0, end=3)  # a call of 4 steps
    ```
    """

    def __init__(self, run):
        self._run = run
        self.step = None
        self._batches = None
        self._k = 1

    def sync(self):
        """Reads the global step; returns it."""
        # Calls run batches: k of them make a global step under Keras's
        # `gradient_accumulation_steps` (whose `iterations` is batches
        # over k). One read of the device.
        self._batches, self._k = self._run.batch_count()
        self.step = self._batches // self._k
        return self.step

    @property
    def batches(self):
        """The batches applied so far, as last read or counted: the global
        step times `batches_per_step`, plus a step's micro-batches."""
        return self._batches

    @property
    def batches_per_step(self):
        """The batches of one global step: Keras's
        `gradient_accumulation_steps`, else 1 (as of the last `sync`)."""
        return self._k

    def next_step(self, steps_per_execution):
        """The global step after the coming call, if it runs in full.

        Args:
            steps_per_execution: The steps of the coming call.

        Returns:
            An int.
        """
        return (self._batches + steps_per_execution) // self._k

    def advance(self, begin, end):
        """Counts the steps of a finished call; returns the new step.

        Args:
            begin: Keras's batch index at the call's beginning.
            end: Keras's batch index at its end.

        Returns:
            An int.
        """
        self._batches += steps_in_batch(begin, end)
        self.step = self._batches // self._k
        return self.step
