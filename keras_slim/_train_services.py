"""The services `keras_slim.train` runs: keras_slim's callbacks, as
`slim.learning.train` assembled its Supervisor, summary and trace hooks.
"""

import math

from keras_slim import _strategy
from keras_slim._train_checks import known_length
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import LogEveryNSteps
from keras_slim.callbacks import NanLossGuard
from keras_slim.callbacks import StepCallback
from keras_slim.callbacks import StopAtStep
from keras_slim.callbacks import Summaries
from keras_slim.callbacks import Trace
from keras_slim.callbacks._step_loss import StepLoss
from keras_slim.callbacks._step_loss import records_step_losses


class LastStepLoss(StepCallback):
    """Records the loss of the last step run (what TF-Slim's train returns).

    The tracker is read around a batch only when that batch may be the last:
    when the stop step is known (`number_of_steps`, or finite data of known
    `length`). For data of unknown length, around every batch.

    Args:
        number_of_steps: The global step training stops at, or `None`.
        steps: The steps this run makes, or `None`.
        length: The number of batches of the data, or `None` if unknown
            or infinite.
    """

    def __init__(self, number_of_steps, length, steps=None):
        super().__init__()
        self._number_of_steps = number_of_steps
        self._length = length
        self._steps = steps
        self.loss = None
        #: Calls of the train function that ended in this run.
        self.batches = 0

    def step_multiples(self, model):
        # The loss of the last step, not of the last call's steps: a model
        # that records each step's loss gives it at any steps per call.
        return [] if records_step_losses(model) else [1]

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._step_loss = StepLoss(self.model, self._run)

    def on_first_batch(self, step):
        last = self._number_of_steps
        if self._steps is not None:
            last = step + self._steps
        if self._length is not None:
            last = min(step + self._length, last or math.inf)
        self._last_step = last

    def on_train_batch_begin(self, batch, logs=None):
        super().on_train_batch_begin(batch, logs)
        if self._last_step is None or self.next_step >= self._last_step:
            self._step_loss.mark()

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        self.batches += 1
        if self._step_loss.marked:
            loss, _ = self._step_loss.since_mark()
            if loss is not None:
                self.loss = loss
            elif logs and "loss" in logs:
                self.loss = logs["loss"]


def make(settings, *, is_chief, strategy, dataset):
    """The callbacks of one `train` run, in the order they must run.

    Args:
        settings: `train`'s checked arguments (`_train_checks.checked`).
        is_chief: Whether this process writes.
        strategy: The model's strategy.
        dataset: The data `fit` reads (`_train_checks.training_data`).

    Returns:
        `(callbacks, last_step_loss)`: the list, and its `LastStepLoss`.
    """
    # StopAtStep first: a run already at `number_of_steps` is stopped
    # before the other services act on its (empty) first batch.
    services = _stops(settings) + _checkpoints(settings)
    services += _writers(settings, is_chief, strategy)
    services.append(
        NanLossGuard(
            fail=settings.fail_on_nan_loss, rollback=settings.rollback_on_nan
        )
    )
    if settings.log_every_n_steps is not None:
        services.append(LogEveryNSteps(settings.log_every_n_steps))
    coordinated = _strategy.mode(strategy).needs_coordinator
    last_loss = LastStepLoss(
        settings.number_of_steps,
        None if coordinated else known_length(dataset, settings),
        steps=settings.steps,
    )
    services.append(last_loss)
    return services, last_loss


def _stops(settings):
    stops = []
    if settings.number_of_steps is not None:
        stops.append(StopAtStep(last_step=settings.number_of_steps))
    if settings.steps is not None:
        stops.append(StopAtStep(num_steps=settings.steps))
    return stops


def _checkpoints(settings):
    services = []
    if settings.logdir is not None:
        services.append(
            Checkpoints(
                settings.logdir,
                every_n_secs=settings.save_interval_secs,
                every_n_steps=settings.save_interval_steps,
                max_to_keep=settings.keep_checkpoint_max,
                keep_checkpoint_every_n_hours=(
                    settings.keep_checkpoint_every_n_hours
                ),
            )
        )
    if settings.warm_start is not None:
        services.append(settings.warm_start)
    return services


def _writers(settings, is_chief, strategy):
    """Summaries and traces: the chief's, as in TF-Slim."""
    s = settings
    if s.logdir is None:
        return []
    summaries = s.save_summaries_secs is not None or (
        s.save_summaries_steps is not None
    )
    in_step = s.summarize_activations or s.summarize_gradients
    several = _strategy.mode(strategy).workers_in_lockstep
    if not is_chief:
        if not (summaries and in_step and several):
            return []
        # Writes nothing here, but traces the chief's in-step summary
        # branch, so that the workers' collectives line up.
        return [_summaries(s, histograms=False)]
    writers = [_summaries(s, histograms=s.summarize_variables)]
    if not summaries:
        writers = []
    if s.trace_every_n_steps is not None:
        writers.append(Trace(s.logdir, every_n_steps=s.trace_every_n_steps))
    return writers


def _summaries(settings, *, histograms):
    return Summaries(
        settings.logdir,
        every_n_steps=settings.save_summaries_steps,
        every_n_secs=settings.save_summaries_secs,
        histograms=histograms,
        activations=settings.summarize_activations,
        gradients=settings.summarize_gradients,
    )
