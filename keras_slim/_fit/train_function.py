"""`SlimModel`'s train function: one object that reads the run.

Keras's `fit` calls `model.train_function(iterator)` once per batch of
steps. A `SlimModel`'s train function is a `TrainFunction`, made once per
compile and policy, which on each call asks the run (`keras_slim/_run.py`):

- whether to run no step at all (`StopAtStep` at its target);
- which compiled function fits the run: one per NaN mode (raise or skip),
  in-step summaries hook and steps per call, each traced on first use
  while the run holds that state, so no callback rebuilds or replaces
  `model.train_function`;
- where to read the data: Keras's iterator, or the run's feed's blocks;

and leaves each step's loss-tracker records in the run (`Run.records`).
A loss found non-finite by the step's check becomes
`keras_slim.NanLossDuringTrainingError`.
"""

import functools
import math
import re

import keras
import tensorflow as tf

from keras_slim import _keras
from keras_slim import _run
from keras_slim import _strategy
from keras_slim._fit import loops
from keras_slim._fit import skipped as skipped_lib
from keras_slim._optimizer import NONFINITE
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
    """The functions of one run state: Keras's, and keras_slim's loops."""

    def __init__(self, model):
        self._model = model
        self._keras = None
        # Under XLA, keras_slim's loop runs even one step per call: it
        # fails a step on the verdict the compiled step returns.
        self.multi_step = (
            model.steps_per_execution > 1
            or bool(model.jit_compile)
            or _strategy.is_multi_worker(model.distribute_strategy)
        ) and not model.run_eagerly
        # tf.functions: each is traced on its first call only.
        self.on_iterator, self.on_host, self.on_blocks = (
            loops.multi_step_functions(model, model.train_step)
        )

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
    logs = model.train_function(iterator)  # by Keras's fit, per batch
    ```
    """

    #: `Run.request_no_step` need not wrap this function: it reads the run.
    reads_the_run = True

    def __init__(self, model):
        self._model = model
        self._compiled = {}
        self._built = False
        self._skipped = None
        self._call = translate_nonfinite(self._run_steps, model.optimizer)

    def attach_skipped_steps(self, run):
        """Gives a run that skips non-finite steps (`raise_on_nonfinite`
        false) the model's `SkippedSteps`, counted from zero in this run.

        Args:
            run: The fit's `Run`.
        """
        if run.raise_on_nonfinite or run.skipped_steps is not None:
            return
        if self._skipped is None:
            self._skipped = skipped_lib.SkippedSteps(
                self._model.distribute_strategy
            )
        self._skipped.reset()
        run.skipped_steps = self._skipped

    def __call__(self, iterator):
        return self._call(iterator)

    def _build(self, feed, iterator):
        """Builds the model's metrics and optimizer from the data's spec, as
        the first traced step would: a `fit` whose calls all run no step
        (a run resumed at its end) still reports its epoch's metrics."""
        if self._built:
            return
        spec = (
            feed.stand_in.element_spec
            if feed is not None and feed.reads_host
            else getattr(iterator, "element_spec", None)
        )
        if spec is None:
            return
        with self._model.distribute_strategy.scope():
            _keras.symbolic_build(self._model, spec)
        self._built = True

    def _key(self, run):
        if run is None:
            return (True, None, self._model.steps_per_execution)
        return (
            run.raise_on_nonfinite,
            run.step_summaries,
            self._model.steps_per_execution,
        )

    def _functions(self, run):
        key = self._key(run)
        if key not in self._compiled:
            # A summaries hook belongs to one fit: drop the functions of
            # earlier ones.
            for old in [k for k in self._compiled if k[1] is not None]:
                del self._compiled[old]
            self._compiled[key] = _Compiled(self._model)
        return self._compiled[key]

    def _run_steps(self, iterator):
        run = _run.current(self._model)
        if run is not None and (run.take_no_step() or run.phantom):
            if run.feed is not None and run.feed.reads_host:
                # The pass starts even if it runs no step: a restored
                # position applies to its iterator.
                run.feed.source(iterator)
            run.records = None
            self._build(run.feed, iterator)
            return {}
        if run is not None:
            self.attach_skipped_steps(run)
        functions = self._functions(run)
        feed = run.feed if run is not None else None
        records = None
        if feed is not None and feed.reads_host:
            source = feed.source(iterator)
            if feed.reads_blocks:
                outputs, records = functions.on_blocks(source)
            else:
                outputs, records = functions.on_host(source)
        else:
            if feed is not None and feed.resume_skips:
                feed.skip(iterator)
            if not functions.multi_step or not isinstance(
                iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)
            ):
                # One step per call, Python generators: Keras's own.
                outputs = functions.keras(iterator)
            else:
                outputs, records = functions.on_iterator(iterator)
        if run is not None:
            run.records = records
        return outputs
