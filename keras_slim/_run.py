"""The run: what one `fit` call needs, in one explicit object.

Keras's `fit` stays the controller (its epoch loop, its callbacks); the
`Run` holds the state keras_slim's pieces share during one call, so that
modules that never import each other talk through it, not through
attributes on the model (Orbit's split between its controller and its
runner):

- `feed`: the data feed, which decides what Keras iterates and what the
  train function reads (`keras_slim/_fit/feed.py`);
- `records`: each step's loss-tracker state from the last multi-step call
  (`keras_slim/_fit/loops.py`), read by `StepLoss`;
- `step_summaries`: the in-step summaries hook `Summaries` installs;
- `raise_on_nonfinite`: the NaN mode `NanLossGuard` asks for;
- `no_step`: `StopAtStep`'s request that the next call run no step;
  `phantom`: the call runs no step because a resumed run is catching up
  with Keras's count of the steps in its epoch (`keras_slim/_fit/
  position.py`);
- `settle()`: waits for steps in flight (parameter servers);
- `resumed_from`: the checkpoint `Checkpoints` restored (`WarmStart` steps
  aside for it);
- `is_chief`: whether this process writes (the strategy's answer, or
  `keras_slim.train(is_chief=...)`);
- `stop_signal`: the SIGTERM or SIGINT received while `Checkpoints` runs
  (`catch_signals`), which saves and stops at the end of the call.

`SlimModel.fit` and `keras_slim.train` start a run explicitly (`start`).
A plain `keras.Model` has no keras_slim `fit`, so the first keras_slim
callback to ask for the run (`of`) starts one for that `fit` call: all the
callbacks of one call share Keras's `params` dict, which tells one call
from the next.
"""

import contextlib
import logging
import signal
import threading

from keras_slim import _strategy

logger = logging.getLogger("keras_slim")

_SIGNALS = (signal.SIGTERM, signal.SIGINT)

# The one attribute keras_slim sets on a model: its current run.
_ATTRIBUTE = "_keras_slim_run"


class Run:
    """The state of one `fit` call.

    Args:
        model: The Keras model being fitted.
        is_chief: Whether this process writes checkpoints, summaries and
            traces; `None` asks the model's strategy. Defaults to `None`.

    Example:
    ```python
    with keras_slim._run.start(model) as run:
        model.fit(dataset, callbacks=[...])  # callbacks ask `run`
    ```
    """

    def __init__(self, model, *, is_chief=None):
        self.model = model
        self._chief = is_chief
        self.feed = None
        self.records = None
        #: Under parameter servers, worker i starts at global step i times
        #: this (`keras_slim.train`'s `startup_delay_steps`).
        self.startup_delay_steps = 0
        #: The model's `SkippedSteps` while non-finite steps are skipped
        #: (`keras_slim/_fit/skipped.py`), else `None`.
        self.skipped_steps = None
        self.step_summaries = None
        self.raise_on_nonfinite = True
        self.no_step = False
        self.phantom = False
        self.resumed_from = None
        self._settle = None
        self._params = None
        self._explicit = False
        self.stop_signal = None
        self.saving = False
        self._abort_after_save = False
        self._saved_handlers = None
        self._at_end = []
        self.training_weights = None

    @property
    def is_chief(self):
        """Whether this process writes checkpoints, summaries and traces."""
        return _strategy.is_chief(
            self.model.distribute_strategy, override=self._chief
        )

    def set_settle(self, wait):
        """Sets the function that waits for the steps in flight (or `None`).

        Args:
            wait: A function of no argument, or `None`.
        """
        self._settle = wait

    def settle(self):
        """Waits for the steps in flight, where steps run asynchronously.

        Under `ParameterServerStrategy` `fit` schedules steps on the
        workers and goes on; a callback that reads the global step or the
        loss first waits for them (the coordinator's `join`). Elsewhere a
        step is done when its batch ends, and this does nothing.
        """
        if self._settle is not None:
            self._settle()

    def request_no_step(self):
        """Asks that the next call of the train function run no step.

        `StopAtStep` asks when its target is already reached before the
        first batch. keras_slim's train function reads the request; for a
        model whose train function is Keras's own, the run wraps it for
        that one call (the one place keras_slim touches a plain model's
        `train_function`).
        """
        self.no_step = True
        function = self.model.train_function
        if function is None or getattr(function, "reads_the_run", False):
            return

        def no_step(iterator):
            del iterator
            self.model.train_function = function
            return {}

        self.model.train_function = no_step

    @property
    def runs_no_step(self):
        """Whether the coming call of the train function runs no step."""
        return self.no_step or self.phantom

    def resumed(self, path):
        """Records that `Checkpoints` restored `path` (or started afresh).

        The feed's restored input position then tells Keras's epoch loop
        where to go on (`keras_slim/_fit/position.py`).

        Args:
            path: The checkpoint restored, or `None`.
        """
        self.resumed_from = path
        if path is not None and self.feed is not None:
            self.feed.resume(self.model)

    def catch_signals(self):
        """Makes SIGTERM and SIGINT stop training at the end of the call.

        The first signal is recorded (`stop_signal`); the call of the
        train function in flight finishes, and `Checkpoints` saves and
        raises `keras_slim.TrainingPreemptedError`. A second SIGINT raises
        `KeyboardInterrupt` at once, or just after a save being written.
        The previous handlers come back with `release_signals` (at the end
        of the run at the latest). Only the main thread can catch signals;
        elsewhere this does nothing.
        """
        if self._saved_handlers is not None:
            return
        if threading.current_thread() is not threading.main_thread():
            return
        self._saved_handlers = {s: signal.getsignal(s) for s in _SIGNALS}
        for number in _SIGNALS:
            signal.signal(number, self._on_signal)

    def _on_signal(self, number, frame):
        del frame
        name = signal.Signals(number).name
        if self.stop_signal is None:
            self.stop_signal = name
            logger.warning(
                "%s received: finishing the current call, then saving a "
                "checkpoint and stopping (a second SIGINT aborts).",
                name,
            )
            return
        if number == signal.SIGINT:
            if self.saving:
                self._abort_after_save = True
                return
            self.release_signals()
            raise KeyboardInterrupt

    def saved(self):
        """Called when a save ends: a second SIGINT during it aborts now."""
        if self._abort_after_save:
            self._abort_after_save = False
            self.release_signals()
            raise KeyboardInterrupt

    def keep_training_weights(self):
        """Keeps the training weights Keras's `fit` replaces by averages.

        With an optimizer's moving averages (`use_ema`), Keras's `fit`
        writes the averages into the model's weights before
        `on_train_end`. While the run lasts, the optimizer's
        `finalize_variable_values` first copies the training weights into
        `training_weights` (pairs of variable and value), so `Checkpoints`
        saves them as the weights and the averages apart.
        """
        optimizer = self.model.optimizer
        if not getattr(optimizer, "use_ema", False):
            return
        if "finalize_variable_values" in vars(optimizer):
            return
        original = optimizer.finalize_variable_values

        def finalize_variable_values(var_list):
            self.training_weights = [(v, v.numpy()) for v in var_list]
            return original(var_list)

        # On this instance, for this run only: not state to track.
        vars(optimizer)["finalize_variable_values"] = finalize_variable_values
        self.at_end(self.forget_training_weights)

    def forget_training_weights(self):
        """Undoes `keep_training_weights`."""
        vars(self.model.optimizer).pop("finalize_variable_values", None)

    def at_end(self, function):
        """Runs `function` when the run ends, even on an error (a run
        `start` started; a callback of a plain model's `fit` also calls it
        from `on_train_end`).

        Args:
            function: A function of no argument.
        """
        self._at_end.append(function)

    def end(self):
        """Runs what `at_end` registered and puts the signals back."""
        functions, self._at_end = self._at_end, []
        for function in functions:
            function()
        self.release_signals()

    def release_signals(self):
        """Puts back the signal handlers `catch_signals` replaced."""
        handlers, self._saved_handlers = self._saved_handlers, None
        for number, handler in (handlers or {}).items():
            signal.signal(number, handler)

    def take_no_step(self):
        """Returns whether a call must run no step, clearing the request."""
        requested, self.no_step = self.no_step, False
        return requested


def of(model, params=None):
    """The run of the model's current `fit` call, started if needed.

    Args:
        model: A Keras model.
        params: The asking callback's `params` (Keras gives all the
            callbacks of one `fit` call the same dict); `None` outside a
            callback.

    Returns:
        The `Run`.
    """
    run = current(model)
    if run is not None and (run._explicit or params is None):
        return run
    if run is not None and run._params is params:
        return run
    run = Run(model)
    run._params = params
    vars(model)[_ATTRIBUTE] = run
    return run


def current(model):
    """The model's current run, or `None` (nothing started one).

    Args:
        model: A Keras model.

    Returns:
        A `Run` or `None`.
    """
    return vars(model).get(_ATTRIBUTE)


@contextlib.contextmanager
def start(model, *, is_chief=None):
    """Starts a run for a `fit` call, or joins the one already started.

    `keras_slim.train` starts one and calls `model.fit`; a `SlimModel`'s
    `fit` then joins it rather than starting another.

    Args:
        model: The Keras model.
        is_chief: As for `Run`.

    Yields:
        The `Run`.
    """
    run = current(model)
    if run is not None and run._explicit:
        if is_chief is not None:
            run._chief = is_chief
        yield run
        return
    run = Run(model, is_chief=is_chief)
    run._explicit = True
    vars(model)[_ATTRIBUTE] = run
    try:
        yield run
    finally:
        run.end()
        vars(model).pop(_ATTRIBUTE, None)


def records_step_losses(model):
    """Whether `model`'s multi-step calls record each step's loss.

    True for a `SlimModel` outside `MultiWorkerMirroredStrategy` (where
    its steps per call stay 1 when left to it) and `ParameterServerStrategy`
    (whose scheduled calls record nothing): a callback reading single
    steps' losses through `StepLoss` then leaves the steps per call free.

    Args:
        model: A Keras model.

    Returns:
        A boolean.
    """
    return is_slim_model(model) and not _strategy.is_parameter_server(
        model.distribute_strategy
    )


def is_slim_model(model):
    """Whether `model` is a `keras_slim.SlimModel`.

    Args:
        model: Any object.

    Returns:
        A boolean.
    """
    # Imported here: the model module imports the callbacks, which ask this.
    from keras_slim.model import SlimModel

    return isinstance(model, SlimModel)


def global_step(model):
    """`model.optimizer.iterations` as a Python int, after the steps in
    flight settled.

    Args:
        model: A compiled Keras model.

    Returns:
        An int.
    """
    run = current(model)
    if run is not None:
        run.settle()
    return int(model.optimizer.iterations.numpy())
