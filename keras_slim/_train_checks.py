"""The checks of `keras_slim.train`'s arguments and data, before any step."""

import argparse
import collections.abc
import math
import os
import reprlib
import sys
import types

import keras
import numpy as np

from keras_slim import _backend
from keras_slim import _keras_optimizer
from keras_slim import _strategy
from keras_slim import checks
from keras_slim._backend import tensorflow as tf
from keras_slim.callbacks import WarmStart

#: `train`'s defaults that mean "not asked for" when there is no logdir.
DEFAULT_SECS = 600
DEFAULT_KEEP = 5

#: Keras's `epochs` for a PyDataset read until a step target: a pass per
#: epoch, as many as the run needs (`StopAtStep` ends it).
_UNTIL_STOPPED = sys.maxsize

_INT_ARGUMENTS = (
    "number_of_steps",
    "steps",
    "log_every_n_steps",
    "save_summaries_steps",
    "save_interval_steps",
    "trace_every_n_steps",
    "keep_checkpoint_max",
    "startup_delay_steps",
    "rollback_on_nan",
)


_SUMMARY_FLAGS = (
    "summarize_variables",
    "summarize_activations",
    "summarize_gradients",
)


def _check_arguments(args):
    """Checks `train`'s arguments, each error naming the one passed, and
    returns them with numpy integers made Python ints."""
    checks.positive_int_or_none("number_of_steps", args["number_of_steps"])
    checks.positive_int_or_none("steps", args["steps"])
    if args["steps"] is not None and args["number_of_steps"] is not None:
        raise ValueError(
            "Cannot provide both `steps` (steps to run now) and "
            "`number_of_steps` (the global step to stop at), as "
            "contrib.learn's fit. Received: "
            f"steps={args['steps']!r}, "
            f"number_of_steps={args['number_of_steps']!r}"
        )
    hours = args["keep_checkpoint_every_n_hours"]
    checks.positive_number_or_none("keep_checkpoint_every_n_hours", hours)
    checks.positive_int_or_none("log_every_n_steps", args["log_every_n_steps"])
    for name in ("save_summaries_secs", "save_interval_secs"):
        checks.positive_number_or_none(name, args[name])
    for name in ("save_summaries_steps", "save_interval_steps"):
        checks.positive_int_or_none(name, args[name])
    checks.positive_int_or_none(
        "trace_every_n_steps", args["trace_every_n_steps"]
    )
    checks.checkpoints_to_keep(
        "keep_checkpoint_max", args["keep_checkpoint_max"]
    )
    delay = args["startup_delay_steps"]
    if not checks.is_int(delay) or delay < 0:
        raise checks.invalid(
            "startup_delay_steps", delay, "a non-negative integer"
        )
    checks.boolean("fail_on_nan_loss", args["fail_on_nan_loss"])
    checks.non_negative_int("rollback_on_nan", args["rollback_on_nan"])
    if args["rollback_on_nan"] and not args["fail_on_nan_loss"]:
        raise ValueError(
            "`rollback_on_nan` rolls back instead of failing: it needs "
            "fail_on_nan_loss=True. Received: fail_on_nan_loss=False, "
            f"rollback_on_nan={args['rollback_on_nan']!r}"
        )
    if args["rollback_on_nan"] and args["logdir"] is None:
        raise ValueError(
            "Cannot provide `rollback_on_nan` because logdir=None: it rolls "
            "back to the last checkpoint. Received: "
            f"rollback_on_nan={args['rollback_on_nan']!r}"
        )
    for name in _SUMMARY_FLAGS:
        if name == "summarize_activations":
            checks.boolean_or_names(name, args[name])
        else:
            checks.boolean(name, args[name])
    if args["is_chief"] is not None:
        checks.boolean("is_chief", args["is_chief"])
    return {
        name: int(args[name]) if args[name] is not None else None
        for name in _INT_ARGUMENTS
    }


def _check_logdir(args):
    """TF-Slim's errors for what needs a logdir when there is none."""
    if args["logdir"] is not None:
        return
    needs_logdir = {
        "save_summaries_steps": args["save_summaries_steps"] is not None,
        "trace_every_n_steps": args["trace_every_n_steps"] is not None,
        "save_interval_steps": args["save_interval_steps"] is not None,
        "save_summaries_secs": args["save_summaries_secs"]
        not in (None, DEFAULT_SECS),
        "save_interval_secs": args["save_interval_secs"]
        not in (None, DEFAULT_SECS),
        "keep_checkpoint_max": args["keep_checkpoint_max"] != DEFAULT_KEEP,
        "keep_checkpoint_every_n_hours": (
            args["keep_checkpoint_every_n_hours"] is not None
        ),
        **{name: args[name] for name in _SUMMARY_FLAGS},
    }
    for name, asked in needs_logdir.items():
        if asked:
            raise ValueError(
                f"Cannot provide `{name}` because logdir=None. Received: "
                f"{name}={args[name]!r}. Pass a `logdir` to write "
                "checkpoints, summaries or traces."
            )


def _warm_start(value):
    """`None`, a WarmStart, or a checkpoint path made into one."""
    if value is None or isinstance(value, WarmStart):
        return value
    if isinstance(value, (str, os.PathLike)):
        return WarmStart(value)
    raise checks.invalid(
        "warm_start",
        value,
        "a keras_slim.callbacks.WarmStart, a checkpoint path, or None",
    )


def _dataset(data, batch_size, repeat):
    if isinstance(data, tf.data.Dataset):
        checks.no_batch_size_for_dataset(batch_size)
        if int(data.cardinality().numpy()) == 0:
            raise ValueError(
                "`data` yields no batch: the dataset is empty (its "
                "cardinality is 0), so there is nothing to train on. "
                f"Received: data={data!r}"
            )
        return data
    if isinstance(data, keras.utils.PyDataset):
        checks.no_batch_size_for_dataset(
            batch_size, kind="a keras.utils.PyDataset"
        )
        if data.num_batches == 0:
            raise ValueError(
                "`data` yields no batch: the PyDataset is empty (its "
                "length is 0), so there is nothing to train on. "
                f"Received: data={data!r}"
            )
        return data
    if isinstance(data, collections.abc.Iterator):
        checks.no_batch_size_for_dataset(batch_size, kind="a generator")
        if isinstance(data, types.GeneratorType):
            return data
        # Keras's fit takes generators, not other iterators.
        return (batch for batch in data)
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise invalid_data(data)
    check_arrays(*data)
    batch_size = checks.positive_int_or_none("batch_size", batch_size)
    if batch_size is None:
        raise ValueError(
            "`batch_size` is not set. Pass `batch_size` to "
            "keras_slim.train when `data` is a tuple (x, y) of arrays."
        )
    dataset = tf.data.Dataset.from_tensor_slices(tuple(data))
    dataset = dataset.batch(batch_size)
    return dataset.repeat() if repeat else dataset


def invalid_data(data):
    """The error for `data` of a kind `train` does not take (both
    backends' `train` raise it), naming the kinds it takes."""
    return ValueError(
        "Invalid value for argument `data`. Received: "
        f"data={reprlib.repr(data)} (of type {type(data).__name__}). "
        "Expected a tf.data.Dataset of (x, y) batches, a "
        "keras.utils.PyDataset of them, a Python generator of them, or a "
        "tuple (x, y) of arrays with `batch_size`."
    )


def check_arrays(x, y):
    """x and y: as many examples each, at least one."""
    lengths = {}
    for name, value in (("x", x), ("y", y)):
        leaves = keras.tree.flatten(value)
        sizes = {
            int(np.shape(leaf)[0]) if np.ndim(leaf) else 1 for leaf in leaves
        }
        if len(sizes) != 1:
            raise ValueError(
                f"The arrays of `{name}` differ in length: {sorted(sizes)} "
                "examples. Each array of x and y needs one row per example."
            )
        lengths[name] = sizes.pop()
    if lengths["x"] != lengths["y"]:
        raise ValueError(
            "x and y differ in length: x has "
            f"{lengths['x']} examples, y has {lengths['y']}. Each example "
            "needs its target."
        )
    if lengths["x"] == 0:
        raise ValueError(
            "`data` yields no batch: x and y have 0 examples, so there is "
            "nothing to train on."
        )


def _check_learning_rate(optimizer):
    """A learning rate that is not a finite number, or a constant one that
    is not positive, fails before the first step."""
    inner = _keras_optimizer.inner_optimizer(optimizer)
    configured = inner.get_config().get("learning_rate")
    try:
        value = float(keras.ops.convert_to_numpy(inner.learning_rate))
    except (TypeError, ValueError):
        return
    constant = isinstance(configured, (int, float))
    if not math.isfinite(value) or (constant and value <= 0):
        raise ValueError(
            "The optimizer's learning rate must be a positive finite number. "
            f"Received: learning_rate={value} ({type(inner).__name__})."
        )


def _repeats(settings):
    """Whether `train` reads array or PyDataset data again until its step
    target: when a step count bounds the run."""
    return settings.number_of_steps is not None or settings.steps is not None


def epochs(settings, data):
    """Keras's `epochs` for `train`'s `fit` on `data`.

    One, but a PyDataset read until the step target is read an epoch per
    pass, as many as the run needs: its position is Keras's epoch and the
    batch index in it, which checkpoints save.

    Args:
        settings: What `checked` returned.
        data: What `training_data` returned.

    Returns:
        A positive integer.
    """
    if isinstance(data, keras.utils.PyDataset) and _repeats(settings):
        return _UNTIL_STOPPED
    return 1


def known_length(data, settings):
    """The batches `train` reads from `data` before it runs out, or `None`
    if unknown or endless.

    Args:
        data: What `training_data` returned.
        settings: What `checked` returned.

    Returns:
        A non-negative integer, or `None`.
    """
    if isinstance(data, keras.utils.PyDataset):
        return None if _repeats(settings) else data.num_batches
    if not isinstance(data, tf.data.Dataset):
        return None  # a generator
    cardinality = int(data.cardinality().numpy())
    return cardinality if cardinality >= 0 else None


def checked(model, args):
    """`train`'s arguments, checked against each other and the model.

    Args:
        model: The model passed to `train`.
        args: `train`'s arguments as a dict (its `locals()`).

    Returns:
        An `argparse.Namespace` of the arguments: integers made Python
        ints, `keep_checkpoint_max=0` made `None` (keep all),
        `warm_start` made a `WarmStart` or `None`.

    Raises:
        ValueError: naming the argument, for any that does not fit.
        FileNotFoundError: for a `warm_start` checkpoint that is not there.
    """
    ints = _check_arguments(args)
    _check_logdir(args)
    settings = argparse.Namespace(**{**args, **ints})
    settings.keep_checkpoint_max = settings.keep_checkpoint_max or None
    settings.warm_start = _warm_start(settings.warm_start)
    if getattr(model, "optimizer", None) is None:
        raise ValueError(
            "The model is not compiled. Call `model.compile(optimizer, "
            "loss)` before keras_slim.train."
        )
    if _backend.is_tensorflow():
        from keras_slim._step import apply  # TensorFlow's step

        # Before the learning rate, which a MultiOptimizer does not have.
        apply.check(model.optimizer)
    _check_learning_rate(model.optimizer)
    _check_startup_delay(settings.startup_delay_steps, model)
    callbacks = settings.callbacks
    if callbacks is not None and not all(
        isinstance(c, keras.callbacks.Callback) for c in callbacks
    ):
        raise checks.invalid(
            "callbacks", callbacks, "a list of keras.callbacks.Callback"
        )
    return settings


def _check_startup_delay(delay, model):
    if delay > 0 and not _backend.is_tensorflow():
        raise ValueError(
            "`startup_delay_steps` staggers asynchronous workers on "
            "parameter servers, which Keras's JAX backend does not have: "
            "its devices run one synchronous step. Received: "
            f"startup_delay_steps={delay}"
        )
    if not _backend.is_tensorflow():
        return
    mode = _strategy.mode(model.distribute_strategy)
    if delay > 0 and mode.workers_in_lockstep:
        raise ValueError(
            "`startup_delay_steps` must be 0 under a synchronous "
            "multi-worker strategy (TF-Slim: with `sync_optimizer`). "
            f"Received: startup_delay_steps={delay}"
        )
    if delay > 0 and not mode.workers_apply_own_steps:
        raise ValueError(
            "`startup_delay_steps` staggers asynchronous workers that share "
            "a global step on parameter servers (ParameterServerStrategy, "
            "DeploymentConfig(num_ps_tasks=...)); under this "
            f"{mode.kind} strategy no other worker advances "
            "this process's global step, so waiting would never end. "
            f"Received: startup_delay_steps={delay}"
        )


def training_data(model, settings):
    """The data `train` fits on, checked before any step.

    Arrays are repeated when the run is bounded by a step count (a
    PyDataset then runs an epoch per pass: `epochs`); an iterator that is
    not a generator is read through one (Keras's `fit` takes generators);
    under `ParameterServerStrategy` a dataset function is passed on as it
    is and a step count is required.

    Args:
        model: The model.
        settings: What `checked` returned.

    Returns:
        A `tf.data.Dataset`, a `keras.utils.PyDataset` or a generator, or
        a dataset function under parameter servers.

    Raises:
        ValueError: for data that does not fit (the message names it).
    """
    bounded = _repeats(settings)
    data, batch_size = settings.data, settings.batch_size
    if _strategy.mode(model.distribute_strategy).needs_coordinator:
        # Workers read their own datasets: the step count bounds the run.
        if not bounded:
            raise ValueError(
                "`number_of_steps` or `steps` is required under "
                "ParameterServerStrategy (the end of the workers' data "
                "cannot be seen). Received: number_of_steps=None, steps=None"
            )
        if isinstance(data, (keras.utils.PyDataset, collections.abc.Iterator)):
            raise ValueError(
                "Under ParameterServerStrategy, `data` is a "
                "tf.data.Dataset, a dataset function or a tuple (x, y) of "
                "arrays with `batch_size`, which the workers can read. "
                f"Received: data={reprlib.repr(data)}"
            )
        return data if callable(data) else _dataset(data, batch_size, True)
    dataset = _dataset(data, batch_size, repeat=bounded)
    checks.numeric_inputs(model, dataset)
    return dataset


def check_some_step_ran(model, settings, batches):
    """After `fit`: data of unknown length that yielded no batch is an
    error (no checkpoint was written), unless the run was already at its
    `number_of_steps`.

    Args:
        model: The model.
        settings: What `checked` returned.
        batches: The calls of the train function the run made.

    Raises:
        ValueError: naming the data.
    """
    step = int(model.optimizer.iterations.numpy())
    target = settings.number_of_steps
    if batches == 0 and (target is None or step < target):
        raise ValueError(
            "`data` yielded no batch, so no step ran (global step "
            f"{step}) and no checkpoint was written. Received: "
            f"data={settings.data!r}"
        )
