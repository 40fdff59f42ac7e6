"""`SlimModel`'s train function: one object, bound to each run."""

import contextlib
import dataclasses
import functools
import math
import re
import threading

import keras

from keras_slim import _keras
from keras_slim import _strategy
from keras_slim._backend import tensorflow as tf
from keras_slim._fit import input_cache
from keras_slim._fit import loops
from keras_slim._fit import step_options
from keras_slim._step import loss_scale
from keras_slim._step import skipped as skipped_lib
from keras_slim._step.gate import NONFINITE
from keras_slim.errors import NanLossDuringTrainingError

_NONFINITE_RE = re.compile(
    re.escape(NONFINITE) + r"\]\s*\[([^\]]*)\](?:\s*\[([^\]]*)\])?"
)


def translate_nonfinite(function, optimizer):
    """Wraps a function so the in-graph NaN check raises our error.

    The failing step updated nothing, `iterations` included, so the step
    that failed is `iterations + 1`, read on the host only then.

    Args:
        function: A function that runs train steps.
        optimizer: The model's optimizer.

    Returns:
        The wrapped function.
    """

    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except tf.errors.InvalidArgumentError as e:
            match = _NONFINITE_RE.search(str(e))
            if match is None:
                raise
            step = int(optimizer.iterations.numpy()) + 1
            loss, squares = match.group(1), match.group(2)
            loss_finite = math.isfinite(float(loss))
            raise NanLossDuringTrainingError(
                step,
                loss,
                cause="loss" if not loss_finite else "gradient",
                # The step reports the squared norm (no sqrt in the graph).
                gradient_norm=None
                if squares is None
                else math.sqrt(float(squares)),
            ) from None

    return wrapped


class _Compiled:
    """The functions of one set of step options: Keras's, and keras_slim's
    loops; and the `StepPlan` their step runs, built on first trace. `mode`
    is the deployment `Mode` (`Run.mode`)."""

    def __init__(self, model, options, mode):
        self._model = model
        self.options = options
        self._keras = None
        self._plan = None
        # Replicas trace the step in threads of their own.
        self._plan_lock = threading.Lock()
        # Under XLA, keras_slim's loop runs even one step per call: it
        # fails a step on the verdict the compiled step returns.
        self.multi_step = (
            model.steps_per_execution > 1
            or bool(model.jit_compile)
            or mode.runs_steps_in_a_loop
        ) and not model.run_eagerly
        # tf.functions: each is traced on its first call only.
        self.on_iterator, self.on_host, self.on_blocks, self.on_python = (
            loops.multi_step_functions(model, model.train_step, mode=mode)
        )

    def plan(self):
        """The `StepPlan` of these options, built once, when the step is
        first traced (the policy is resolved then)."""
        with self._plan_lock:
            if self._plan is None:
                self._plan = self._model.make_step_plan(self.options)
            return self._plan

    @property
    def keras(self):
        """Keras's own train function, made on first use."""
        if self._keras is None:
            self._keras = _keras_train_function(self._model)
        return self._keras


def _keras_train_function(model):
    """Keras's own train function for the model's current settings."""
    ours = model.train_function
    keras.Model.make_train_function(model, force=True)
    function = model.train_function
    model.train_function = ours
    return function


class TrainFunction:
    """The train function of a `SlimModel` (see the module docstring).

    Args:
        model: The `SlimModel`.

    Example:
    ```python
    model.train_function = TrainFunction(model)  # in make_train_function
    with model.train_function.bound(run, callbacks):  # by the fit of `run`
        logs = model.train_function(iterator)  # by Keras's fit, per batch
    ```
    """

    #: `Run.no_step` need not replace this function: it reads the run.
    reads_the_run = True

    def __init__(self, model):
        self._model = model
        self._compiled = {}
        self._built = False
        self._skipped = None
        self._overflow_steps = None
        self._run = None
        self._current = None
        # The plan of a step traced outside a run (default options).
        self._default = None
        #: The last input a fit prepared, for the next fit on it.
        self.inputs = input_cache.InputCache()
        self._call = translate_nonfinite(self._run_steps, model.optimizer)

    @contextlib.contextmanager
    def bound(self, run, callbacks=()):
        """Runs the calls made inside for `run`.

        The run's step options are fixed from what `callbacks` declare
        (`step_options.declared`) when first read, after every callback's
        `on_train_begin` (`Run.step_options`).

        Args:
            run: The fit's `Run`.
            callbacks: The fit's callbacks. Defaults to none.

        Yields:
            Nothing.
        """
        self._run, self._current = run, None
        callbacks = list(callbacks)
        run.fix_step_options_with(lambda: self._options(callbacks))
        try:
            yield
        finally:
            self._run, self._current = None, None

    def for_run(self):
        """The compiled functions of the bound run's step options, fixed at
        the latest at the run's first call (after every callback's
        `on_train_begin`).

        Returns:
            The functions, whose `options` the model's step is traced with.
        """
        if self._current is None:
            run = self._run
            options = (
                self._options(new_run=False)
                if run is None
                else run.step_options
            )
            self._current = self._functions(options)
        return self._current

    @property
    def step_options(self):
        """The `StepOptions` the model's step is traced with now (read by
        `SlimModel.train_step` while it is traced)."""
        if self._current is None:
            return step_options.DEFAULT
        return self._current.options

    def step_plan(self):
        """The `StepPlan` the model's step is traced with now: the current
        run's, or one of the default options."""
        if self._current is None:
            if self._default is None:
                self._default = _Compiled(
                    self._model, step_options.DEFAULT, self._mode()
                )
            return self._default.plan()
        return self._current.plan()

    @property
    def overflow_steps(self):
        """The `SkippedSteps` of loss-scale overflows (under a
        `LossScaleOptimizer`, once a step ran; else `None`): the current
        or last run's, kept after it ends."""
        return self._overflow_steps

    def _mode(self):
        """The deployment `Mode`: the bound run's (`Run.mode`); outside a
        run (Keras's `train_on_batch`, a step traced for `describe`), the
        strategy's, decided now."""
        if self._run is not None:
            return self._run.mode
        return _strategy.mode(self._model.distribute_strategy)

    def _options(self, callbacks=(), *, new_run=True):
        """The step options the callbacks declare, with the train
        function's own: the skipped steps' and overflows' counters, XLA's
        deferred check.
        Called once per run."""
        model = self._model
        # XLA compiles keras_slim's loops' step (`loops.step_on_data`),
        # never a step scheduled on parameter servers.
        xla = (
            bool(model.jit_compile)
            and not model.run_eagerly
            and not self._mode().needs_coordinator
        )
        options = step_options.StepOptions(
            **step_options.declared(callbacks, model)
        )
        skipped = None
        if not options.raise_on_nonfinite:
            if self._skipped is None:
                self._skipped = skipped_lib.SkippedSteps(
                    model.distribute_strategy
                )
            self._skipped.reset()
            skipped = self._skipped
        return dataclasses.replace(
            options,
            skipped_steps=skipped,
            defer_check=xla and options.raise_on_nonfinite,
            overflow_steps=self._overflows(reset=new_run),
        )

    def _overflows(self, *, reset):
        """The `SkippedSteps` of loss-scale overflows under a
        `LossScaleOptimizer` (made once, restarted from zero by each run
        when `reset`), else `None`."""
        if loss_scale.dynamic(self._model.optimizer) is None:
            return None
        if self._overflow_steps is None:
            self._overflow_steps = skipped_lib.SkippedSteps(
                self._model.distribute_strategy
            )
        elif reset:
            self._overflow_steps.reset()
        return self._overflow_steps

    def __call__(self, iterator):
        try:
            return self._call(iterator)
        except NanLossDuringTrainingError as error:
            rollback = None if self._run is None else self._run.rollback
            if rollback is None or not rollback.takes(error):
                raise
            return rollback.roll_back(self._call, iterator, error)

    def _build(self, feed, iterator):
        """Builds the model's metrics and optimizer from the data's spec, as
        the first traced step would, before the step is traced (one trace,
        not two), and for a `fit` whose calls all run no step (a run
        resumed at its end), which still reports its epoch's metrics."""
        if self._built:
            return
        spec = (
            feed.element_spec
            if feed is not None and feed.reads_host
            else getattr(iterator, "element_spec", None)
        )
        if spec is None:
            return
        with self._model.distribute_strategy.scope():
            _keras.symbolic_build(self._model, spec)
        self._built = True

    def _functions(self, options):
        key = (options, self._model.steps_per_execution)
        if key not in self._compiled:
            # A summaries hook belongs to one fit: drop the functions of
            # earlier ones.
            for old in [k for k in self._compiled if k[0].step_summaries]:
                del self._compiled[old]
            self._compiled[key] = _Compiled(self._model, options, self._mode())
        return self._compiled[key]

    def _run_steps(self, iterator):
        run = self._run
        feed = run.feed if run is not None else None
        if run is not None and run.no_step:
            if feed is not None and feed.reads_host:
                # The pass starts even if it runs no step: a restored
                # position applies to its iterator.
                feed.source(iterator)
            run.records = None
            run.no_step = False
            self._build(feed, iterator)
            return {}
        # Variables made while tracing (the optimizer's slots, the metrics'
        # state) would make `tf.function` trace the step twice, as Keras's
        # own fit does on the default strategy: build them first.
        self._build(feed, iterator)
        functions = self.for_run()
        outputs, records = self._steps(functions, feed, iterator)
        if run is not None:
            run.records = records
        return outputs

    @staticmethod
    def _steps(functions, feed, iterator):
        """`(logs, records)` of the call's steps, read where the feed says."""
        if feed is not None and feed.reads_host:
            source = feed.source(iterator)
            if feed.reads_blocks:
                return functions.on_blocks(source)
            return functions.on_host(source)
        if feed is not None and feed.position.skips:
            feed.skip(iterator)
        if not functions.multi_step:
            return functions.keras(iterator), None  # Keras's own step
        if not isinstance(
            iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)
        ):
            return functions.on_python(iterator), None  # Python generators
        return functions.on_iterator(iterator)
