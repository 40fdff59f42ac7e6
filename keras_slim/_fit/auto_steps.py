"""Choosing `steps_per_execution` for a `SlimModel.fit` left to choose it.
docs/design.md ("Steps per call, chosen per fit") says how and why.
"""

import math

import keras
import numpy as np

from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim import _strategy
from keras_slim._backend import tensorflow as tf
from keras_slim._step import accumulate

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
    mode = _strategy.mode(model.distribute_strategy)
    if mode.runs_one_step_per_call:
        return 1
    if mode.needs_coordinator:
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
    if _strategy.mode(strategy).sync is not None:
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

    What the callbacks ask for (`step_multiples`), and then the model's
    global step when `fit` begins; `None` when a callback acts on batches
    without saying which.
    """
    constraints = []
    for callback in kwargs.get("callbacks") or []:
        # keras_slim's StepCallbacks, or any callback that says the same.
        if hasattr(callback, "step_multiples"):
            constraints += callback.step_multiples(model)
        elif acts_on_batches(callback):
            return None
    if not constraints:
        return constraints  # no global step to meet: any start will do
    # A model trained before starts at its step: calls must end on the
    # global steps the callbacks ask for, as if it had started at 0.
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None:
        return constraints
    # Calls run batches: under gradient accumulation, global step g ends
    # at batch g * k (`keras_slim/_step/accumulate.py`).
    k = accumulate.steps(optimizer) or 1
    constraints = [k * int(c) for c in constraints]
    start = int(_keras_optimizer.micro_step_counter(optimizer).numpy())
    return [start, *constraints] if start > 0 else constraints


def _largest_dividing(constraints, most):
    """The largest count up to `most` dividing every constraint."""
    common = 0
    for value in constraints:
        common = math.gcd(common, int(value))
    if common == 0:
        return most
    return max(d for d in range(1, most + 1) if common % d == 0)
