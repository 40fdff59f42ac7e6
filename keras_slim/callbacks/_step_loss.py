"""`StepLoss`: the loss of one step, seen from the host."""

import math

import numpy as np

from keras_slim import _keras


def records_step_losses(model):
    """Whether `model`'s multi-step calls record each step's loss (a
    `SlimModel`'s, but under parameter servers), so that a callback
    reading single steps' losses leaves the steps per call free.

    Args:
        model: A Keras model.

    Returns:
        A boolean.
    """
    return bool(getattr(model, "records_step_losses", False))


def _loss_tracker(model):
    # By name: a plain model's own train step may report through another.
    for metric in getattr(model, "metrics", []):
        if metric.name == "loss" and hasattr(metric, "total"):
            return metric
    return None


class StepLoss:
    """The loss (and global batch size) of the steps of one batch.

    Args:
        model: A compiled Keras model whose train step reports its loss
            through a `Mean` metric named `"loss"` (the built-in train step
            and `SlimModel` do).
        run: The fit's `Run`: its records, its settle, its step options
            (the NaN mode), its deployment `Mode`.

    Where the train function records each step (a `SlimModel` running
    several steps per call), `since_mark` gives the loss of the batch's last
    step and `per_step` that of each step, and `mark` reads nothing once a
    call has shown the records; elsewhere `since_mark` gives the mean over
    the batch's steps, from the tracker read at `mark` and at the end.

    Example:
    ```python
    step_loss = StepLoss(model, run)
    step_loss.mark()  # before the batch
    ...  # the train function runs
    loss, examples = step_loss.since_mark()
    ```
    """

    _RECORDED = "recorded"

    def __init__(self, model, run):
        from keras_slim._step import accumulate  # TensorFlow's step

        self._model = model
        self._run = run
        self._tracker = _loss_tracker(model)
        # Under gradient accumulation: the loss of each optimizer step.
        self._step = accumulate.step_loss(model)
        self._mark = None
        self._recorded = False
        self._skipping_from = None
        strategy = model.distribute_strategy
        collective = run.mode.host_reads_collective
        self._local = strategy if collective else None

    @property
    def available(self):
        """Whether the model has a loss tracker to read."""
        return self._tracker is not None

    def _read(self):
        self._run.settle()
        return self._value(self._tracker.total), self._value(
            self._tracker.count
        )

    def _value(self, variable):
        if self._local is None:
            return float(variable.numpy())
        # The backing tf.Variable's local components: no collective.
        parts = self._local.experimental_local_results(
            _keras.backing_variable(variable)
        )
        return float(sum(np.asarray(part) for part in parts))

    def mark(self):
        """Reads the tracker before the steps whose loss is wanted."""
        if not self.available:
            self._mark = None
        elif self._recorded or self._step is not None:
            self._mark = self._RECORDED  # the call's records will tell
        else:
            self._mark = self._read()
            # Where steps may be skipped, the step tells them from calls
            # that ran no step (read only in that mode).
            options = self._run.step_options
            skips = options is not None and not options.raise_on_nonfinite
            self._skipping_from = self._run.global_step() if skips else None

    @property
    def of_one_step(self):
        """Whether `since_mark` gives one global step's examples (under
        gradient accumulation), not those of all the call's steps."""
        return self._step is not None

    @property
    def marked(self):
        """Whether `mark()` was called since the last `since_mark()`."""
        return self._mark is not None

    def per_step(self):
        """Each step's `(loss, examples)` of the last call, where recorded.

        Clears the mark, as `since_mark` does.

        Returns:
            A list with one `(loss, examples)` per step the call ran, in
            order (`(nan, 0)` for a step a `SlimModel` skipped for a
            non-finite loss or gradient, which counts no example), or
            `None` when the train function does not record steps.
        """
        records = self._run.records
        self._recorded = records is not None
        if records is None:
            return None
        self._mark = None
        records = np.asarray(records, dtype=np.float64)
        if records.shape[1] == 3:
            # [total, count, ended] of the last optimizer step: one per
            # micro-batch, the steps' losses in the rows that ended one.
            return [_loss(t, c) for t, c, ended in records[1:] if ended]
        totals = np.diff(records, axis=0)
        return [
            (float(total / count), float(count))
            if count > 0
            else (math.nan, 0.0)
            for total, count in totals
        ]

    def since_mark(self):
        """Returns `(loss, examples)` of the steps since `mark()`.

        Returns:
            Where the train function records each step, the loss and batch
            size of the last step it ran; elsewhere the mean loss of the
            steps since `mark()`, weighted by batch size as Keras weights
            it, and the number of examples they saw: `(nan, 0)` for
            steps a `SlimModel` skipped. Under gradient accumulation,
            the loss and examples of the last optimizer step, over its
            micro-batches. `(None, None)` when nothing was marked.
        """
        if self._mark is None:
            return None, None
        mark = self._mark
        steps = self.per_step()
        self._mark = None
        if steps:
            return steps[-1]
        if self._step is not None:
            # The last completed optimizer step: the global step.
            self._run.settle()
            last = self._step.last
            return _loss(self._value(last.total), self._value(last.count))
        if steps is not None or mark is self._RECORDED:
            return None, None  # the call recorded nothing after all
        total, count = self._read()
        total0, count0 = mark
        examples = count - count0
        if examples < 0:
            # Keras reset its metrics (a new epoch) after the mark.
            return None, None
        if examples == 0:
            # No example counted: steps a SlimModel skipped (they advanced
            # the global step), or a call that ran no step.
            skipped = self._skipping_from is not None and (
                self._run.global_step() > self._skipping_from
            )
            return (math.nan, 0.0) if skipped else (None, None)
        # A non-finite total stays so for the epoch: inf - inf is nan.
        return (total - total0) / examples, examples


def _loss(total, count):
    """`(loss, examples)` of an optimizer step's `total` and `count`:
    `(nan, 0)` for a skipped step (a non-finite micro-batch loss),
    `(None, None)` before the first step."""
    if count <= 0:
        return None, None
    if not math.isfinite(total):
        return math.nan, 0.0
    return float(total / count), float(count)
