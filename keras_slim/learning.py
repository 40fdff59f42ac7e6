"""`keras_slim.train`: TF-Slim's `slim.learning.train` on `model.fit`.

The loop is Keras's `fit`; the services are keras_slim's callbacks:
`Checkpoints` (restore at begin, save on intervals and at the end),
`StopAtStep(last_step=number_of_steps)`, `NanLossGuard` and
`LogEveryNSteps`. What `train` adds is TF-Slim's contract: train up to a
global step, stop when finite data runs out, and return the loss of the
last step.
"""

import math
import os
import warnings

import keras
import numpy as np
import tensorflow as tf

from keras_slim import _run
from keras_slim import _strategy
from keras_slim import _validation
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import LogEveryNSteps
from keras_slim.callbacks import NanLossGuard
from keras_slim.callbacks import StepCallback
from keras_slim.callbacks import StopAtStep
from keras_slim.callbacks import Summaries
from keras_slim.callbacks import Trace
from keras_slim.callbacks import WarmStart
from keras_slim.callbacks._step_loss import StepLoss
from keras_slim.callbacks._step_loss import records_step_losses

__all__ = ["train"]

_DEFAULT_SECS = 600
_DEFAULT_KEEP = 5


class _LastStepLoss(StepCallback):
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


_INT_ARGUMENTS = (
    "number_of_steps",
    "steps",
    "log_every_n_steps",
    "save_summaries_steps",
    "save_interval_steps",
    "trace_every_n_steps",
    "keep_checkpoint_max",
    "startup_delay_steps",
)


_SUMMARY_FLAGS = (
    "summarize_variables",
    "summarize_activations",
    "summarize_gradients",
)


def _check_arguments(args):
    """Checks `train`'s arguments, each error naming the one passed, and
    returns them with numpy integers made Python ints."""
    _validation.positive_int_or_none("number_of_steps", args["number_of_steps"])
    _validation.positive_int_or_none("steps", args["steps"])
    if args["steps"] is not None and args["number_of_steps"] is not None:
        raise ValueError(
            "Cannot provide both `steps` (steps to run now) and "
            "`number_of_steps` (the global step to stop at), as "
            "contrib.learn's fit. Received: "
            f"steps={args['steps']!r}, "
            f"number_of_steps={args['number_of_steps']!r}"
        )
    hours = args["keep_checkpoint_every_n_hours"]
    _validation.positive_number_or_none("keep_checkpoint_every_n_hours", hours)
    _validation.positive_int_or_none(
        "log_every_n_steps", args["log_every_n_steps"]
    )
    for name in ("save_summaries_secs", "save_interval_secs"):
        _validation.positive_number_or_none(name, args[name])
    for name in ("save_summaries_steps", "save_interval_steps"):
        _validation.positive_int_or_none(name, args[name])
    _validation.positive_int_or_none(
        "trace_every_n_steps", args["trace_every_n_steps"]
    )
    _validation.checkpoints_to_keep(
        "keep_checkpoint_max", args["keep_checkpoint_max"]
    )
    delay = args["startup_delay_steps"]
    if not _validation.is_int(delay) or delay < 0:
        raise _validation.invalid(
            "startup_delay_steps", delay, "a non-negative integer"
        )
    _validation.boolean("fail_on_nan_loss", args["fail_on_nan_loss"])
    for name in _SUMMARY_FLAGS:
        _validation.boolean(name, args[name])
    if args["is_chief"] is not None:
        _validation.boolean("is_chief", args["is_chief"])
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
        not in (None, _DEFAULT_SECS),
        "save_interval_secs": args["save_interval_secs"]
        not in (None, _DEFAULT_SECS),
        "keep_checkpoint_max": args["keep_checkpoint_max"] != _DEFAULT_KEEP,
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
    raise _validation.invalid(
        "warm_start",
        value,
        "a keras_slim.callbacks.WarmStart, a checkpoint path, or None",
    )


def _dataset(data, batch_size, repeat):
    if isinstance(data, tf.data.Dataset):
        _validation.no_batch_size_for_dataset(batch_size)
        if int(data.cardinality().numpy()) == 0:
            raise ValueError(
                "`data` yields no batch: the dataset is empty (its "
                "cardinality is 0), so there is nothing to train on. "
                f"Received: data={data!r}"
            )
        return data
    if not isinstance(data, (tuple, list)) or len(data) != 2:
        raise _validation.invalid(
            "data",
            type(data).__name__,
            "a tf.data.Dataset of (x, y) batches, or a tuple (x, y) of "
            "arrays with `batch_size`",
        )
    _check_arrays(*data)
    batch_size = _validation.positive_int_or_none("batch_size", batch_size)
    if batch_size is None:
        raise ValueError(
            "`batch_size` is not set. Pass `batch_size` to "
            "keras_slim.train when `data` is a tuple (x, y) of arrays."
        )
    dataset = tf.data.Dataset.from_tensor_slices(tuple(data))
    dataset = dataset.batch(batch_size)
    return dataset.repeat() if repeat else dataset


def _check_arrays(x, y):
    """x and y: as many examples each, at least one."""
    lengths = {}
    for name, value in (("x", x), ("y", y)):
        leaves = tf.nest.flatten(value)
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
    inner = getattr(optimizer, "inner_optimizer", optimizer)
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


def _known_length(dataset):
    cardinality = int(dataset.cardinality().numpy())
    return cardinality if cardinality >= 0 else None


def train(
    model,
    data,
    *,
    logdir,
    number_of_steps=None,
    steps=None,
    log_every_n_steps=1,
    save_summaries_secs=600,
    save_summaries_steps=None,
    save_interval_secs=600,
    save_interval_steps=None,
    keep_checkpoint_max=5,
    keep_checkpoint_every_n_hours=None,
    trace_every_n_steps=None,
    summarize_variables=False,
    summarize_activations=False,
    summarize_gradients=False,
    warm_start=None,
    startup_delay_steps=0,
    fail_on_nan_loss=True,
    callbacks=None,
    is_chief=None,
    batch_size=None,
):
    """Trains a compiled model as TF-Slim's `slim.learning.train` did.

    Runs `model.fit` on `data` with keras_slim's callbacks until the global
    step (`model.optimizer.iterations`) reaches `number_of_steps`, or until
    finite data runs out (TF-Slim's `OutOfRangeError` stop). With a
    `logdir`, the latest checkpoint there is restored first, so a rerun
    continues where the last run stopped, checkpoints `model.ckpt-<global
    step>` are saved every `save_interval_secs` seconds and/or
    `save_interval_steps` steps, and once more at the end (by the chief
    only); summaries and traces are written there too. With
    `steps_per_execution > 1`, training stops at the first execution
    boundary at or past `number_of_steps`.

    Args:
        model: A compiled Keras model (a `SlimModel` for gradient policies).
        data: A `tf.data.Dataset` of `(x, y)` batches, or a tuple `(x, y)`
            of arrays together with `batch_size`. Arrays are repeated until
            `number_of_steps` when it is set, else seen once. Under
            `ParameterServerStrategy` also a dataset function
            `input_context -> tf.data.Dataset`, and `number_of_steps` is
            required.
        logdir: Directory for checkpoints, or `None` to write nothing.
        number_of_steps: Positive integer: the global step to stop at, or
            `None` to train until the data runs out (contrib.learn's
            `max_steps`: a rerun after it runs nothing).
            Defaults to `None`.
        steps: Positive integer: how many steps to run in this call, from
            the global step it starts at (after a restore), or `None`.
            contrib.learn's `steps`: a rerun runs that many more. Not with
            `number_of_steps`.
            Defaults to `None`.
        log_every_n_steps: Positive integer or `None`: log the loss of the
            step at global steps that are multiples of it (`LogEveryNSteps`).
            Defaults to `1`.
        save_summaries_secs: Write summaries (`keras_slim.callbacks.
            Summaries`: loss, metrics, learning rate, global_step/sec) every
            this many seconds (`None`: no time trigger).
            Defaults to `600`.
        save_summaries_steps: Write summaries every this many steps.
            Defaults to `None`.
        save_interval_secs: Save a checkpoint every this many seconds
            (`None`: no time trigger).
            Defaults to `600`.
        save_interval_steps: Save a checkpoint every this many steps.
            Defaults to `None`.
        keep_checkpoint_max: How many recent checkpoints to keep; `0` or
            `None` keeps every one (TF1's `Saver`, contrib.learn).
            Defaults to `5`.
        keep_checkpoint_every_n_hours: Positive number or `None`: besides
            the recent ones, keep one checkpoint every this many hours
            (TF1's `Saver`).
            Defaults to `None`.
        trace_every_n_steps: Trace the steps beginning at global steps 0, N,
            2N, ... (`keras_slim.callbacks.Trace`): `tf_trace-<step>.json`
            Chrome traces and TensorBoard profiles in `logdir`.
            Defaults to `None`.
        summarize_variables: Whether the summaries include a histogram
            of every variable (train_image_classifier's).
            Defaults to `False`.
        summarize_activations: Whether they include each layer output's
            histogram and zero fraction (`sparsity/<layer>`), from inside
            the step of a functional `SlimModel`, on the steps that write.
            Defaults to `False`.
        summarize_gradients: Whether they include each gradient's
            histogram and norm after the policy (`create_train_op`'s
            `summarize_gradients`), from inside the step of a `SlimModel`.
            Defaults to `False`.
        warm_start: A `keras_slim.callbacks.WarmStart`, or a checkpoint
            path (directory, prefix or Keras weights file) to restore every
            model variable from: TF-Slim's `init_fn`. It acts before the
            first step, only when no checkpoint of `logdir` was restored.
            Defaults to `None`.
        startup_delay_steps: Non-negative integer. Under
            `ParameterServerStrategy`, TF-Slim's meaning for asynchronous
            workers: worker `i` starts when the global step reaches `i`
            times this (the coordinator runs at most `1 + step // delay`
            workers' calls at once until all of them run). Elsewhere
            there is no global step shared by separate workers to wait
            on, and a value above 0 is a `ValueError`; so it is with
            synchronous steps (`DeploymentConfig(replicas_to_aggregate=
            ...)`), as TF-Slim required with a `sync_optimizer`.
            Defaults to `0`.
        fail_on_nan_loss: Whether a non-finite loss (or, for a
            `SlimModel`, gradient) raises
            `keras_slim.NanLossDuringTrainingError` (`NanLossGuard`);
            `False` goes on training: a `SlimModel` skips such a step,
            which still advances the global step, and a warning counts
            them.
            Defaults to `True`.
        callbacks: More Keras callbacks for `fit`.
            Defaults to `None`.
        is_chief: Whether this process writes checkpoints, summaries and
            traces; `None` asks the distribution strategy (the chief
            worker, or the only process).
            Defaults to `None`.
        batch_size: Positive integer, with array `data` only.
            Defaults to `None`.

    Returns:
        The loss of the last step, as a float (not Keras's running mean of
        the epoch; with `steps_per_execution > 1`, the mean over the last
        execution's steps), or `None` when no step ran (the global step had
        already reached `number_of_steps`).

    Raises:
        ValueError: before any step, for an invalid argument; for
            checkpoint, summary or trace settings with `logdir=None`, as in
            TF-Slim; for `startup_delay_steps > 0` under a synchronous
            multi-worker strategy; for a model that is not compiled; for
            empty data, x and y of different lengths, text for a numeric
            input, or a learning rate that is not finite (or, constant,
            not positive). After `fit`, when data of unknown length
            yielded no batch (no checkpoint is written).
        FileNotFoundError: before any step, for a `warm_start`
            checkpoint that does not exist.
        keras_slim.NanLossDuringTrainingError: for a non-finite loss, when
            `fail_on_nan_loss`.
        keras_slim.TrainingPreemptedError: on SIGTERM or SIGINT, after the
            call in flight finished and `model.ckpt-<step>` was saved (with
            a `logdir`); a rerun resumes from it.
        RuntimeError: before any step, when another process trains in
            `logdir`.

    Example:
    ```python
    final_loss = keras_slim.train(
        model,
        dataset,
        logdir="/tmp/run",
        number_of_steps=1000,
        save_summaries_steps=100,
        save_interval_steps=100,
    )
    ```
    """
    args = dict(locals())
    ints = _check_arguments(args)
    _check_logdir(args)
    number_of_steps, steps = ints["number_of_steps"], ints["steps"]
    log_every_n_steps = ints["log_every_n_steps"]
    save_summaries_steps = ints["save_summaries_steps"]
    save_interval_steps = ints["save_interval_steps"]
    trace_every_n_steps = ints["trace_every_n_steps"]
    keep_checkpoint_max = ints["keep_checkpoint_max"] or None  # 0: all
    startup_delay_steps = ints["startup_delay_steps"]
    warm_start = _warm_start(warm_start)
    if getattr(model, "optimizer", None) is None:
        raise ValueError(
            "The model is not compiled. Call `model.compile(optimizer, "
            "loss)` before keras_slim.train."
        )
    _check_learning_rate(model.optimizer)
    strategy = model.distribute_strategy
    if startup_delay_steps > 0 and _strategy.is_multi_worker(strategy):
        raise ValueError(
            "`startup_delay_steps` must be 0 under a synchronous "
            "multi-worker strategy (TF-Slim: with `sync_optimizer`). "
            f"Received: startup_delay_steps={startup_delay_steps}"
        )
    if startup_delay_steps > 0 and not _strategy.is_parameter_server(strategy):
        raise ValueError(
            "`startup_delay_steps` staggers asynchronous workers that share "
            "a global step on parameter servers (ParameterServerStrategy, "
            "DeploymentConfig(num_ps_tasks=...)); under this "
            f"{_strategy.kind(strategy)} strategy no other worker advances "
            "this process's global step, so waiting would never end. "
            f"Received: startup_delay_steps={startup_delay_steps}"
        )
    if callbacks is not None and not all(
        isinstance(c, keras.callbacks.Callback) for c in callbacks
    ):
        raise _validation.invalid(
            "callbacks", callbacks, "a list of keras.callbacks.Callback"
        )
    is_chief = _strategy.is_chief(strategy, override=is_chief)
    parameter_server = _strategy.is_parameter_server(strategy)
    if parameter_server:
        # Workers read their own datasets: the step count bounds the run.
        if number_of_steps is None and steps is None:
            raise ValueError(
                "`number_of_steps` or `steps` is required under "
                "ParameterServerStrategy (the end of the workers' data "
                "cannot be seen). Received: number_of_steps=None, steps=None"
            )
        dataset = data if callable(data) else _dataset(data, batch_size, True)
    else:
        bounded = number_of_steps is not None or steps is not None
        dataset = _dataset(data, batch_size, repeat=bounded)
        _validation.numeric_inputs(model, dataset)

    # StopAtStep first: a run already at `number_of_steps` is stopped
    # before the other services act on its (empty) first batch.
    services = []
    if number_of_steps is not None:
        services.append(StopAtStep(last_step=number_of_steps))
    if steps is not None:
        services.append(StopAtStep(num_steps=steps))
    if logdir is not None:
        saver = Checkpoints(
            logdir,
            every_n_secs=save_interval_secs,
            every_n_steps=save_interval_steps,
            max_to_keep=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
        )
        services.append(saver)
    if warm_start is not None:
        services.append(warm_start)
    summaries = save_summaries_secs is not None or (
        save_summaries_steps is not None
    )
    in_step = summarize_activations or summarize_gradients
    if logdir is not None and not is_chief and summaries and in_step:
        if _strategy.is_multi_worker(strategy):
            # Writes nothing here, but traces the chief's in-step summary
            # branch, so that the workers' collectives line up.
            services.append(
                Summaries(
                    logdir,
                    every_n_steps=save_summaries_steps,
                    every_n_secs=save_summaries_secs,
                    activations=summarize_activations,
                    gradients=summarize_gradients,
                )
            )
    if logdir is not None and is_chief:
        # As in TF-Slim, only the chief writes summaries and traces.
        if summaries:
            services.append(
                Summaries(
                    logdir,
                    every_n_steps=save_summaries_steps,
                    every_n_secs=save_summaries_secs,
                    histograms=summarize_variables,
                    activations=summarize_activations,
                    gradients=summarize_gradients,
                )
            )
        if trace_every_n_steps is not None:
            services.append(Trace(logdir, every_n_steps=trace_every_n_steps))
    services.append(NanLossGuard(fail=fail_on_nan_loss))
    if log_every_n_steps is not None:
        services.append(LogEveryNSteps(log_every_n_steps))
    last_loss = _LastStepLoss(
        number_of_steps,
        None if parameter_server else _known_length(dataset),
        steps=steps,
    )
    services.append(last_loss)

    with warnings.catch_warnings():
        # Running out of finite data is how train() stops (slim's
        # OutOfRangeError), not something to warn about.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        fit_args = (
            {"steps_per_epoch": number_of_steps or steps}
            if parameter_server
            else {"shuffle": False}
        )
        all_callbacks = services + list(callbacks or [])
        with _run.start(model, is_chief=is_chief) as run:
            run.startup_delay_steps = startup_delay_steps
            with _run.handed_to(all_callbacks, run):
                model.fit(
                    dataset,
                    epochs=1,
                    verbose=0,
                    callbacks=all_callbacks,
                    **fit_args,
                )
    step = int(model.optimizer.iterations.numpy())
    if last_loss.batches == 0 and (
        number_of_steps is None or step < number_of_steps
    ):
        raise ValueError(
            "`data` yielded no batch, so no step ran (global step "
            f"{step}) and no checkpoint was written. Received: data={data!r}"
        )
    return last_loss.loss
