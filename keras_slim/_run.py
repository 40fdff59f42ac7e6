"""The run: what one `fit` call shares, in one object passed to its users."""

import contextlib

from keras_slim import _keras
from keras_slim import _signals
from keras_slim import _strategy

# The one attribute keras_slim sets on a model: its current run, and who
# started it (`_STARTED`, or the `params` of a plain model's fit).
_ATTRIBUTE = "_keras_slim_run"
_STARTED = object()


class Run:
    """The state of one `fit` call.

    Args:
        model: The Keras model being fitted.
        is_chief: Whether this process writes checkpoints, summaries and
            traces; `None` asks the model's strategy. Defaults to `None`.

    Attributes:
        model: The model.
        mode: The deployment `Mode` of the model's strategy
            (`keras_slim/_strategy.py`), decided once for the run and
            handed to the feed, the loops and the train function.
        feed: The data feed (`keras_slim/_fit/feed.py`), or `None` for a
            plain model.
        position: The feed's `InputPosition` (`keras_slim/_fit/
            position.py`): where the data stands, saved in checkpoints;
            `None` for a plain model.
        records: Each step's loss-tracker state of the last multi-step
            call (`keras_slim/_fit/loops.py`), or `None`.
        resumed_from: The checkpoint `Checkpoints` restored, or `None`.
        startup_delay_steps: Under parameter servers, worker i starts at
            global step i times this (`keras_slim.train`'s).
        signals: The run's `StopSignals` (SIGTERM, SIGINT).
        checkpoints: The run's `Checkpoints` callback, or `None`; set at
            its train begin.
        rollback: The run's `Rollback` (`keras_slim/_fit/rollback.py`),
            set by `NanLossGuard(rollback=n)` before the first batch, with
            the functions of `checkpoints` it needs; else `None`.

    Example:
    ```python
    with keras_slim._run.start(model) as run:
        ...  # hand `run` to the train function, the feed, the callbacks
    ```
    """

    def __init__(self, model, *, is_chief=None):
        self.model = model
        self.mode = _strategy.mode(model.distribute_strategy)
        self.chief_override = is_chief
        self.feed = None
        self.position = None
        self.records = None
        self._step_options = None
        self._fix_step_options = None
        self.resumed_from = None
        self.startup_delay_steps = 0
        self.signals = _signals.StopSignals()
        self.checkpoints = None
        self.rollback = None
        self._no_step = False
        self._settle = None
        self._at_end = []

    @property
    def is_chief(self):
        """Whether this process writes checkpoints, summaries and traces."""
        if self.chief_override is not None:
            return bool(self.chief_override)
        return self.mode.chief

    @property
    def step_options(self):
        """The `StepOptions` of the run's step (`keras_slim/_fit/
        step_options.py`), or `None` for a plain model's `fit` (its step is
        Keras's).

        What the fit's callbacks declared, fixed by the train function
        bound to the run at the first read: the run's first batch or the
        train function's first call, after every callback's
        `on_train_begin`.
        """
        if self._step_options is None and self._fix_step_options:
            self._step_options = self._fix_step_options()
        return self._step_options

    def fix_step_options_with(self, fix):
        """Sets the function that fixes the step options at their first
        read (the bound train function's), or `None`.

        Args:
            fix: A function of no argument returning a `StepOptions`, or
                `None`.
        """
        self._fix_step_options = fix
        self._step_options = None

    @property
    def no_step(self):
        """Whether the coming call of the train function runs no step.

        Set by `StopAtStep` when its target is reached before the first
        batch, and for each call of a resumed run that catches up with
        Keras's count of its epoch (`keras_slim/_fit/position.py`);
        cleared when that call ends. A `SlimModel`'s train function reads
        it; a plain model's Keras train function is made to skip its next
        call (`keras_slim._keras.run_no_step_in_next_call`).
        """
        return self._no_step

    @no_step.setter
    def no_step(self, value):
        self._no_step = bool(value)
        function = self.model.train_function
        if self._no_step and not getattr(function, "reads_the_run", False):
            _keras.run_no_step_in_next_call(self.model, then=self._stepped)

    def _stepped(self):
        self._no_step = False

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

    def global_step(self):
        """`model.optimizer.iterations` as an int, once the steps in flight
        settled."""
        self.settle()
        return int(self.model.optimizer.iterations.numpy())

    def batch_count(self):
        """`(batches, k)`: the batches applied so far, and the batches of
        one global step (`gradient_accumulation_steps`, else 1); read
        once the steps in flight settled."""
        from keras_slim._step import accumulate  # TensorFlow's step

        self.settle()
        return accumulate.batch_count(self.model.optimizer)

    def resumed(self, path):
        """Records that `Checkpoints` restored `path` (or started afresh).

        Args:
            path: The checkpoint restored, or `None`.
        """
        self.resumed_from = path

    def at_end(self, function):
        """Runs `function` when the run ends, even on an error (a run
        `start` started; a plain model's run ends with its callbacks).

        Args:
            function: A function of no argument.
        """
        self._at_end.append(function)

    def end(self):
        """Runs what `at_end` registered and puts the signals back."""
        functions, self._at_end = self._at_end, []
        try:
            for function in functions:
                function()
        finally:
            self.signals.release()


def of(model, params):
    """The run of a plain model's `fit` call, started on first use.

    Args:
        model: A Keras model.
        params: The asking callback's `params` (Keras gives all the
            callbacks of one `fit` call the same dict).

    Returns:
        The `Run`.
    """
    # A lookup by model: a plain model's `fit` is Keras's, which hands
    # keras_slim nothing; its callbacks meet here.
    run, owner = vars(model).get(_ATTRIBUTE, (None, None))
    if run is not None and (owner is _STARTED or owner is params):
        return run
    run = Run(model)
    vars(model)[_ATTRIBUTE] = (run, params)
    return run


@contextlib.contextmanager
def start(model, *, is_chief=None):
    """Starts the run of a `fit` call, or joins the one already started.

    `keras_slim.train` starts one and calls `model.fit`; a `SlimModel`'s
    `fit` then joins it rather than starting another.

    Args:
        model: The Keras model.
        is_chief: As for `Run`.

    Yields:
        The `Run`.
    """
    # A lookup by model: `keras_slim.train` calls `model.fit`, which a
    # subclass may override, so the fit finds train's run by its model.
    run, owner = vars(model).get(_ATTRIBUTE, (None, None))
    if run is not None and owner is _STARTED:
        if is_chief is not None:
            run.chief_override = is_chief
        yield run
        return
    run = Run(model, is_chief=is_chief)
    vars(model)[_ATTRIBUTE] = (run, _STARTED)
    try:
        yield run
    finally:
        vars(model).pop(_ATTRIBUTE, None)
        run.end()


@contextlib.contextmanager
def handed_to(callbacks, run):
    """Hands `run` to the callbacks that take one (`use_run`) for a fit.

    Args:
        callbacks: The fit's callbacks.
        run: The fit's `Run`.

    Yields:
        Nothing; the callbacks let go of the run after.
    """
    takers = [c for c in callbacks if hasattr(c, "use_run")]
    for callback in takers:
        callback.use_run(run)
    try:
        yield
    finally:
        for callback in takers:
            callback.use_run(None)
