"""`keras_slim.train` on Keras's JAX backend: the same arguments, the
services of keras_slim/_jax/callbacks/ around `SlimModel.fit`."""

import collections.abc
import math
import warnings

import keras
import numpy as np

from keras_slim import _train_checks
from keras_slim import callbacks as callbacks_lib
from keras_slim import checks
from keras_slim._jax.callbacks._base import RunCallback

__all__ = ["train"]

#: Keras's `epochs` for data read pass after pass until a step target
#: (`StopAtStep` ends the run; the position is Keras's epoch and batch).
_UNTIL_STOPPED = 2**62


def train(model, args):
    """`keras_slim.train` on JAX (keras_slim/learning.py documents it).

    Args:
        model: A compiled `keras_slim.SlimModel`.
        args: `train`'s arguments, as a dict.

    Returns:
        The loss of the last step as a float, or `None` when no step ran.

    Raises:
        ValueError: before any step, for an argument or data that does
            not fit, as on TensorFlow, and for a model that is not a
            `SlimModel`.
    """
    if not hasattr(model, "step_plan"):
        raise ValueError(
            "keras_slim.train on Keras's JAX backend trains a "
            f"keras_slim.SlimModel; received a {type(model).__name__}. "
            "Build it as keras_slim.SlimModel(inputs, outputs) (with no "
            "policy it trains as keras.Model does)."
        )
    settings = _train_checks.checked(model, args)
    x, y, batch_size = _data(settings)
    last_loss = LastStepLoss(settings)
    services = _services(settings) + [last_loss]
    epochs = _UNTIL_STOPPED if _repeats(settings, x) else 1
    with warnings.catch_warnings():
        # Running out of finite data is how train() stops (slim's
        # OutOfRangeError), not something to warn about.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        model.fit(
            x, y, batch_size=batch_size, epochs=epochs, shuffle=False,
            verbose=0, callbacks=services + list(settings.callbacks or []),
        )  # fmt: skip
    return last_loss.loss


def _repeats(settings, x):
    """Arrays and a PyDataset are read again until a step target, as on
    TensorFlow; a dataset or a generator as far as it goes."""
    bounded = settings.number_of_steps is not None or settings.steps
    rereadable = isinstance(x, keras.utils.PyDataset) or not (
        isinstance(x, collections.abc.Iterator) or _kind(x) is not None
    )
    return bool(bounded) and rereadable


def _data(settings):
    """`(x, y, batch_size)` for `fit`, checked before any step."""
    data, batch_size = settings.data, settings.batch_size
    if isinstance(data, (tuple, list)) and len(data) == 2:
        _train_checks.check_arrays(*data)
        batch_size = checks.positive_int_or_none("batch_size", batch_size)
        if batch_size is None:
            raise ValueError(
                "`batch_size` is not set. Pass `batch_size` to "
                "keras_slim.train when `data` is a tuple (x, y) of arrays."
            )
        return data[0], data[1], batch_size
    kind = _kind(data)
    if kind is None:
        raise _train_checks.invalid_data(data)
    checks.no_batch_size_for_dataset(batch_size, kind=kind)
    if isinstance(data, keras.utils.PyDataset) and len(data) == 0:
        raise ValueError(
            "`data` yields no batch: the PyDataset is empty (its length is "
            f"0), so there is nothing to train on. Received: data={data!r}"
        )
    if isinstance(data, collections.abc.Iterator) and not (
        isinstance(data, collections.abc.Generator)
    ):
        data = (batch for batch in data)  # Keras's fit takes generators
    return data, None, None


def _kind(data):
    if isinstance(data, keras.utils.PyDataset):
        return "a keras.utils.PyDataset"
    if isinstance(data, collections.abc.Iterator):
        return "a generator"
    if type(data).__module__.startswith("tensorflow"):
        return "a dataset"
    return None


def _services(settings):
    """The callbacks of one run, in the order they must run (as
    keras_slim/_train_services.py orders them on TensorFlow)."""
    s = settings
    services = []
    if s.number_of_steps is not None:
        services.append(callbacks_lib.StopAtStep(last_step=s.number_of_steps))
    if s.steps is not None:
        services.append(callbacks_lib.StopAtStep(num_steps=s.steps))
    if s.logdir is not None:
        services.append(
            callbacks_lib.Checkpoints(
                s.logdir,
                every_n_secs=s.save_interval_secs,
                every_n_steps=s.save_interval_steps,
                max_to_keep=s.keep_checkpoint_max,
                keep_checkpoint_every_n_hours=s.keep_checkpoint_every_n_hours,
            )
        )
    if s.warm_start is not None:
        services.append(s.warm_start)
    services += _writers(s)
    services.append(
        callbacks_lib.NanLossGuard(
            fail=s.fail_on_nan_loss, rollback=s.rollback_on_nan
        )
    )
    if s.log_every_n_steps is not None:
        services.append(callbacks_lib.LogEveryNSteps(s.log_every_n_steps))
    return services


def _writers(s):
    """Summaries and traces, with a logdir."""
    if s.logdir is None or s.is_chief is False:
        return []
    writers = []
    if s.save_summaries_secs is not None or s.save_summaries_steps:
        writers.append(
            callbacks_lib.Summaries(
                s.logdir,
                every_n_steps=s.save_summaries_steps,
                every_n_secs=s.save_summaries_secs,
                histograms=s.summarize_variables,
                activations=s.summarize_activations,
                gradients=s.summarize_gradients,
            )
        )
    if s.trace_every_n_steps is not None:
        writers.append(
            callbacks_lib.Trace(s.logdir, every_n_steps=s.trace_every_n_steps)
        )
    return writers


class LastStepLoss(RunCallback):
    """The loss of the last step run, what TF-Slim's `train` returns:
    the loss tracker's total and count copied on the device around a
    call only when it may be the last (the stop step known), else around
    every call, and read on the host once, when `loss` is asked for (a
    read after every call would make the host wait for each step).

    Args:
        settings: `train`'s checked arguments.
    """

    def __init__(self, settings):
        super().__init__()
        self._settings = settings
        self._totals = None

    @property
    def loss(self):
        """The last step's loss as a float, or `None` before a step ran."""
        if self._totals is None:
            return None
        before, after = (np.asarray(t, np.float64) for t in self._totals)
        total, count = after - before
        return float(total / count) if count else None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._last = None
        self._mark = None

    def on_train_batch_begin(self, batch, logs=None):
        run = self.run
        if self._last is None:
            s = self._settings
            self._last = s.number_of_steps or math.inf
            if s.steps is not None:
                self._last = run.step + s.steps
        reach = (run.batches + self._model.steps_per_execution) // (
            run.per_step
        )
        self._mark = (
            run.loss_totals(on_device=True)
            if reach >= self._last or (self._last == math.inf)
            else None
        )

    def after_call(self):
        if self._mark is None or self.run.no_step:
            return
        self._totals = (self._mark, self.run.loss_totals(on_device=True))
