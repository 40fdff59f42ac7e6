"""Choosing `steps_per_execution` for `SlimModel.fit` when left to it.

Keras's `fit` costs about a millisecond of host work per call of the
train function (the loop, the callbacks, the logs); on small models that
is most of a step. Several steps per call remove it, but change what
batch-level callbacks see. So a `SlimModel` compiled without
`steps_per_execution` picks one for each `fit`:

- 1 when a callback acts on batches and is not one of keras_slim's step
  callbacks (those count global steps, whatever runs per call), or when
  the strategy is multi-worker, or parameter-server with synchronous
  steps;
- 1 for a dataset of unknown length (its end must end a call);
- else the largest count up to `MAX_STEPS` that divides every step a
  callback must see exactly (the step-based intervals of `Checkpoints`
  and `Summaries`, `StopAtStep`'s target and the step it starts from, any
  step `Trace` traces, which forces 1), the model's global step when `fit`
  begins, and the epoch's length, so each of them still falls on the end
  of a call. Losses of single steps (`LogEveryNSteps`, the last step's
  loss of `train`) constrain nothing: a `SlimModel` records each step's
  loss in the call (`keras_slim/_fit/loops.py`).

Under `ParameterServerStrategy` (asynchronous steps) the count is the
steps of one scheduled call on a worker, chosen by the same rule, with two
differences: scheduled calls record no single step's loss, so
`LogEveryNSteps`'s interval is a constraint; and a call holds at most
`steps_per_epoch / workers` steps, so every worker gets a call in each
epoch. One call per step costs a round trip from the coordinator to a
worker per step, most of a small model's step (bench/ps_throughput.py).
"""

import math

import keras
import numpy as np
import tensorflow as tf

from keras_slim import _keras
from keras_slim import _strategy

MAX_STEPS = 32

_BATCH_HOOKS = (
    "on_batch_begin",
    "on_batch_end",
    "on_train_batch_begin",
    "on_train_batch_end",
)


def acts_on_batches(callback):
    """Whether a callback overrides a training batch hook (or sets one)."""
    base = keras.callbacks.Callback
    for hook in _BATCH_HOOKS:
        if hook in vars(callback):  # LambdaCallback sets them per instance
            return True
        if getattr(type(callback), hook) is not getattr(base, hook):
            return True
    return False


_UNKNOWN = "unknown"


def _epoch_length(x, kwargs):
    """The epoch's steps; `None` if endless, `_UNKNOWN` if not known."""
    if kwargs.get("steps_per_epoch"):
        return int(kwargs["steps_per_epoch"])
    if isinstance(x, tf.data.Dataset):
        cardinality = int(x.cardinality().numpy())
        if cardinality == tf.data.INFINITE_CARDINALITY:
            return None  # ended by a callback (StopAtStep), not by data
        return cardinality if cardinality > 0 else _UNKNOWN
    if isinstance(x, np.ndarray):
        batch_size = kwargs.get("batch_size") or 32
        return math.ceil(len(x) / batch_size)
    return None


def choose(model, x, kwargs):
    """The steps per execution for one `fit` call.

    Args:
        model: The `SlimModel`.
        x: `fit`'s data argument.
        kwargs: `fit`'s other keyword arguments.

    Returns:
        A positive int.
    """
    strategy = model.distribute_strategy
    kind = _strategy.kind(strategy)
    if kind == _strategy.MULTI_WORKER:
        return 1
    if kind == _strategy.PARAMETER_SERVER:
        return _on_parameter_servers(model, kwargs)
    if x is not None and not isinstance(x, (tf.data.Dataset, np.ndarray)):
        return 1  # generators, PyDatasets: their length is their own
    constraints = _callback_steps(model, kwargs)
    if constraints is None:
        return 1
    length = _epoch_length(x, kwargs)
    if length is _UNKNOWN:
        return 1  # the end of the data must end a call exactly
    if length is not None:
        constraints.append(length)
    return _largest_dividing(constraints, MAX_STEPS)


def _on_parameter_servers(model, kwargs):
    """The steps per scheduled call under `ParameterServerStrategy`."""
    strategy = model.distribute_strategy
    if _strategy.sync_settings(strategy) is not None:
        return 1  # each synchronous step is its own round
    constraints = _callback_steps(model, kwargs)
    if constraints is None:
        return 1
    steps = kwargs.get("steps_per_epoch")
    if not steps:
        return 1  # fit fails on it, naming the argument
    constraints.append(int(steps))
    workers = _keras.parameter_server_cluster(strategy).get("worker", [])
    cap = max(1, int(steps) // max(1, len(workers)))
    return _largest_dividing(constraints, min(cap, MAX_STEPS))


def _callback_steps(model, kwargs):
    """The steps that must end a call, or `None` if calls must be single.

    The model's global step when `fit` begins, and what the callbacks
    ask for (`step_multiples`); `None` when a callback acts on batches
    without saying which.
    """
    # A model trained before starts at its step: calls must end on the
    # same global steps as if it had started at 0.
    optimizer = getattr(model, "optimizer", None)
    start = int(optimizer.iterations.numpy()) if optimizer is not None else 0
    constraints = [start] if start > 0 else []
    for callback in kwargs.get("callbacks") or []:
        # keras_slim's StepCallbacks, or any callback that says the same.
        if hasattr(callback, "step_multiples"):
            constraints += callback.step_multiples(model)
        elif acts_on_batches(callback):
            return None
    return constraints


def _largest_dividing(constraints, most):
    """The largest count up to `most` dividing every constraint."""
    common = 0
    for value in constraints:
        common = math.gcd(common, int(value))
    if common == 0:
        return most
    return max(d for d in range(1, most + 1) if common % d == 0)
