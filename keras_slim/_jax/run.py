"""The run on JAX: what one `SlimModel.fit` call shares with its train
function and keras_slim's callbacks, in one object."""

import inspect
import logging

import jax
import keras
import numpy as np

from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim import _run
from keras_slim import _signals
from keras_slim._jax import step as step_lib

__all__ = ["Run", "Tracker", "attach", "current", "input_kind", "of"]

#: `input_kind` of a `tf.data.Dataset`.
TF_DATA = "a tf.data.Dataset"

logger = logging.getLogger("keras_slim")


class Run:
    """The state of one `fit` call of a `SlimModel` on JAX.

    Keras's JAX `fit` keeps the variables' values outside the variables
    during an epoch; a callback that reads `self.model` copies all of them
    back (`Callback.model` calls `jax_state_sync`). keras_slim's callbacks
    read what they need here instead: the global step counted on the host
    by the train function, the logs and state of the last call, and the
    run's stop signals. The train function also follows the run's
    instructions: batches to pass over on a resume (`skip_batches`) and a
    run at its target (`halted`).

    Args:
        model: The `SlimModel` being fitted.

    Attributes:
        model: The model.
        batches: Micro-batches the optimizer has seen (its raw
            `iterations`), counted on the host from the first batch on;
            `None` before it.
        per_step: Micro-batches per global step (Keras's
            `gradient_accumulation_steps`, else 1).
        skip_batches: Batches the train function reads and passes over
            without a step (a resumed run catching up with its position
            in the epoch).
        halted: Whether the train function runs no step and reads no batch
            (a run already at its `StopAtStep` target).
        stop_batches: The micro-batch count the train function stops at
            (`stop_at`), or `None`.
        no_step: Whether the last call of the train function ran no step.
        batches_run: How many batches the last call ran a step on.
        logs: The logs the last step returned (device values), or `None`.
        trace_step: The global step `Trace` is profiling, or `None`: the
            train function names its calls in the trace by it.
        summaries: The `SummaryPlan` of what `Summaries` writes from
            inside the step (gradients, activations), or `None`.
        summary_wanted: Whether the next call of the train function runs
            the summarizing step (`Summaries` writes at its end).
        summary_outputs: What the last summarizing step returned (device
            values), or `None`.
        epoch: Keras's current epoch.
        batch_in_epoch: Batches of the current epoch read so far.
        epoch_ended: Whether Keras's current epoch has read all its data
            (its `on_epoch_end` ran, not on a stop).
        rollbacks_left: How many more failing steps the train function
            passes over (`NanLossGuard(rollback=n)`).
        rollbacks: The `NanLossDuringTrainingError`s passed over.
        input_kind: What the fit reads: "arrays", "py_dataset", "a Python
            generator", "a tf.data.Dataset", or another kind's name.
        input: The fit's `x`.
        steps_per_epoch: The fit's `steps_per_epoch`, or `None`.
        signals: The run's `StopSignals` (SIGTERM, SIGINT).
        checkpoints: The run's `Checkpoints` callback, or `None`.
        resumed_from: The checkpoint a run resumed from, or `None`.

    Example:
    ```python
    run = keras_slim._jax.run.of(model)  # in a callback's on_train_begin
    run.step  # the global step, without a sync
    ```
    """

    def __init__(self, model):
        self.model = model
        self.batches = None
        inner = _keras_optimizer.inner_optimizer(model.optimizer)
        self.per_step = getattr(inner, "gradient_accumulation_steps", 0) or 1
        self.skip_batches = 0
        self.halted = False
        self.no_step = False
        self.batches_run = 0
        self.stop_batches = None
        self.logs = None
        self.trace_step = None
        self.summaries = None
        self.summary_wanted = False
        self.summary_outputs = None
        self.epoch = 0
        self.batch_in_epoch = 0
        self.signals = _signals.StopSignals()
        self.checkpoints = None
        self.resumed_from = None
        self.epoch_ended = False
        self.rollbacks_left = 0
        self.rollbacks = []
        self.input_kind = "arrays"
        self.input = None
        self.steps_per_epoch = None
        self._at_end = []
        self._after_call = []
        self._returned = None
        self._tracker = None

    def start(self):
        """Reads the optimizer's step once, before the first batch runs
        (the variables hold their values until the first call)."""
        if self.batches is None:
            counter = _keras_optimizer.micro_step_counter(self.model.optimizer)
            self.batches = int(counter.value)

    @property
    def step(self):
        """The global step (`optimizer.iterations`), from the host count."""
        if self.batches is None:
            self.start()
        return self.batches // self.per_step

    def stop_at(self, step):
        """Runs no step past the global step `step`: the train function
        stops there, whatever `steps_per_execution`, and a run already
        there reads no batch.

        Args:
            step: The global step to stop at.
        """
        self.stop_batches = step * self.per_step
        self.halted = self.batches >= self.stop_batches

    def at_end(self, function):
        """Calls `function()` when the fit ends, however it ends (Keras
        calls no callback when a step or a callback raised)."""
        self._at_end.append(function)

    def after_each_call(self, function):
        """Calls `function()` after each call of the train function, in
        `fit`'s loop, before Keras's `on_train_batch_end`.

        keras_slim's callbacks act there, not in `on_train_batch_end`:
        Keras's `fit` waits for each step's logs (it converts them to
        Python floats) before it calls a callback that implements that
        hook, which keeps the host from dispatching the next step while
        the device runs this one (on a GPU, the MLP of
        bench/jax_services_overhead.py ran at 0.57x plain `fit` so). A
        function called here reads the run (the host step, the call's
        logs and state) and waits for the device only for a value it
        uses.

        Args:
            function: A callable of no argument.
        """
        self._after_call.append(function)

    def call_ended(self, state):
        """Runs the `after_each_call` functions, `state()` being the one
        the call returned (Keras holds it only once the call is back).

        Args:
            state: The state the call returned.
        """
        if not self._after_call:
            return
        self._returned = state
        try:
            for function in self._after_call:
                function()
        finally:
            self._returned = None

    def close(self):
        """Runs the `at_end` functions, newest first, and releases the
        signals."""
        while self._at_end:
            self._at_end.pop()()
        self.signals.release()

    def check(self):
        """Raises now for a step that failed the numeric check, if one
        did (the train function reads the verdict a call late or more
        otherwise): one host read.

        Raises:
            NanLossDuringTrainingError: naming the step.
        """
        self.model.train_function.check()

    def counters_to_json(self):
        """The step's counters (skipped steps, the loss scale's
        overflows), as JSON lists."""
        counters = self.model.train_function.counters
        ints, error = step_lib.host_counters(counters)
        return {"ints": ints.tolist(), "error": error.tolist()}

    def counters_from(self, saved):
        """Restores the step's counters `counters_to_json` gave."""
        self.model.train_function.restore_counters(
            saved["ints"], saved["error"]
        )

    def rolled_back(self, error):
        """Counts a failing step passed over (`NanLossGuard(rollback=n)`):
        it did not advance the optimizer's step, and is logged.

        Args:
            error: Its `NanLossDuringTrainingError`.
        """
        self.rollbacks_left -= 1
        self.rollbacks.append(error)
        self.batches -= 1
        logger.warning(
            "Non-finite %s at global step %d (epoch %d, batch %d of the "
            "epoch): the step changed nothing; going on from the state "
            "before it, past that batch (rollback %d of %d).",
            error.cause,
            error.step,
            self.epoch,
            self.batch_in_epoch - 1,
            len(self.rollbacks),
            len(self.rollbacks) + self.rollbacks_left,
        )

    def loss_totals(self, on_device=False):
        """The loss tracker's `(total, count)` as of the last call, on the
        host (two numbers read): the loss of the steps between two reads
        is the difference's ratio, their examples its count.

        Args:
            on_device: Whether to leave them on the device, copied into a
                new array (the next step donates the state's): no wait.

        Returns:
            A numpy array of two floats; with `on_device`, a JAX array.
        """
        if self._tracker is None:
            tracker = _keras.loss_tracker(self.model)
            positions = {
                id(v): i for i, v in enumerate(self.model.metrics_variables)
            }
            self._tracker = [
                positions[id(tracker.total)],
                positions[id(tracker.count)],
            ]
        metrics = self.state()[3]
        if on_device:
            return _pair(*(metrics[i] for i in self._tracker))
        return np.array([float(metrics[i]) for i in self._tracker])

    def loss_scale(self):
        """The loss scale of a `LossScaleOptimizer` as of the last call, or
        `None` (one host read)."""
        optimizer = self.model.optimizer
        scale = getattr(optimizer, "dynamic_scale", None)
        if scale is None:
            return None
        index = next(i for i, v in enumerate(optimizer.variables) if v is scale)
        return float(self.state()[2][index])

    def ran(self, batches_read, batches_run):
        """Counts one call of the train function.

        Args:
            batches_read: Batches the call took from the iterator.
            batches_run: How many of them ran a step.
        """
        self.batches += batches_run
        self.batches_run = batches_run
        self.batch_in_epoch += batches_read
        self.no_step = batches_run == 0

    def state(self):
        """The values of the model's four variable lists as of the last
        call: the call's own in an `after_each_call` function, what
        Keras's loop holds during an epoch, else the variables'.

        Returns:
            `(trainable, non_trainable, optimizer, metrics)` lists.
        """
        if self._returned is not None:
            return tuple(list(values) for values in self._returned)
        held = getattr(self.model, "_jax_state", None)
        model = self.model
        if held and not getattr(model, "_jax_state_synced", True):
            names = ("trainable", "non_trainable", "optimizer", "metrics")
            return tuple(list(held[f"{n}_variables"]) for n in names)
        return (
            [v.value for v in model.trainable_variables],
            [v.value for v in model.non_trainable_variables],
            [v.value for v in model.optimizer.variables],
            [v.value for v in model.metrics_variables],
        )


@jax.jit
def _pair(total, count):
    """`[total, count]`, one new array (compiled once: `jnp.stack` alone
    would dispatch its parts one by one, several times the cost)."""
    return jax.numpy.stack([total, count])


def attach(model, run):
    """Makes `run` the model's current run (`None`: no run), on the one
    attribute keras_slim sets on a model (`keras_slim/_run.py`'s)."""
    setattr(model, _run._ATTRIBUTE, run)


def current(model):
    """The model's current `Run` on JAX, or `None` (outside its `fit`, or
    in `train_on_batch`)."""
    run = getattr(model, _run._ATTRIBUTE, None)
    return run if isinstance(run, Run) else None


def of(model):
    """The current run of a `SlimModel` being fitted on JAX.

    Args:
        model: The model a callback was set to.

    Returns:
        The `Run`.

    Raises:
        ValueError: for a model that is not a `SlimModel`, or outside its
            `fit`.
    """
    run = current(model)
    if run is not None:
        return run
    if not hasattr(model, "step_plan"):
        raise ValueError(
            "Invalid value for argument `model`: a "
            f"{type(model).__name__}. On Keras's JAX backend keras_slim's "
            "callbacks follow the step of a keras_slim.SlimModel: build "
            "the model as keras_slim.SlimModel(inputs, outputs) (with no "
            "policy it trains as keras.Model does)."
        )
    raise RuntimeError(
        "keras_slim's callbacks run inside SlimModel.fit; call model.fit "
        "with them in `callbacks`."
    )


def input_kind(x):
    """What a `fit` reads, by the kind of its `x`: "arrays" (NumPy or JAX
    arrays, lists or dicts of them), "py_dataset", or a name for the
    others (whose position cannot be saved exactly).

    Args:
        x: `fit`'s `x`.

    Returns:
        A string.
    """
    if isinstance(x, keras.utils.PyDataset):
        return "py_dataset"
    module = type(x).__module__ or ""
    if module.startswith("tensorflow"):
        return TF_DATA
    if inspect.isgenerator(x) or (
        hasattr(x, "__next__") and hasattr(x, "__iter__")
    ):
        return "a Python generator"
    if module.startswith(("grain", "torch")):
        return f"a {type(x).__name__}"
    return "arrays"


class Tracker(keras.callbacks.Callback):
    """The first callback of a `SlimModel.fit` on JAX: keeps the run's
    epoch and host step. It never reads `self.model` (which would sync the
    state); it holds the run.

    Args:
        run: The fit's `Run`.
    """

    def __init__(self, run):
        super().__init__()
        self._fit = run

    def on_epoch_begin(self, epoch, logs=None):
        self._fit.epoch = epoch
        self._fit.batch_in_epoch = 0
        self._fit.epoch_ended = False

    def on_epoch_end(self, epoch, logs=None):
        # Keras ends the epoch on a stop too (`StopAtStep`): its data is
        # then not all read, unless the stop fell on its last batch (the
        # batch count says so, where it is known).
        self._fit.epoch_ended = not self._model.stop_training

    def on_train_batch_begin(self, batch, logs=None):
        self._fit.start()


class WaitingTracker(Tracker):
    """The tracker where JAX computes on the host's CPU: it implements
    `on_train_batch_end`, so Keras's `fit` calls the batch-end callbacks
    in its loop once the step's logs are computed, instead of handing
    each batch's end to a thread pool (what Keras does when no callback
    implements that hook, for the host to dispatch the next step while
    an accelerator runs this one).

    On a CPU the device is the host's own cores, and the hand-off costs
    more than the wait: on 2 cores, plain `keras.Model.fit` of a small
    MLP runs 1.38x as fast with its loop waiting (docs/benchmarks.md).
    On a GPU or a TPU the wait would keep the host from running ahead:
    there the plain `Tracker` is used.

    Args:
        run: The fit's `Run`.
    """

    def on_train_batch_end(self, batch, logs=None):
        pass


def tracker(run):
    """The first callback of a `SlimModel.fit`: a `WaitingTracker` where
    JAX computes on the CPU (`waits_each_step`), else a `Tracker`.

    Args:
        run: The fit's `Run`.

    Returns:
        The callback.

    Example:
    ```python
    callbacks = [run_lib.tracker(run), *user_callbacks]
    ```
    """
    return WaitingTracker(run) if waits_each_step() else Tracker(run)


def waits_each_step():
    """Whether `SlimModel.fit`'s loop waits for each step: where JAX's
    default backend is the CPU."""
    return jax.default_backend() == "cpu"
