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
import re

import keras
import tensorflow as tf

from keras_slim import _run
from keras_slim import _strategy
from keras_slim._fit import loops
from keras_slim.errors import NanLossDuringTrainingError

#: The message of the step's `Assert` on a non-finite loss.
NONFINITE = "keras_slim: LossTensor is inf or nan"
_NONFINITE_RE = re.compile(re.escape(NONFINITE) + r"\]\s*\[([^\]]*)\]")


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
            raise NanLossDuringTrainingError(step, match.group(1)) from None

    return wrapped


class _Compiled:
    """The functions of one run state: Keras's, and the multi-step ones."""

    def __init__(self, model):
        self.keras = _keras_train_function(model)
        strategy = model.distribute_strategy
        self.multi_step = (
            model.steps_per_execution > 1 or _strategy.is_multi_worker(strategy)
        ) and not model.run_eagerly
        if self.multi_step:
            self.on_iterator, self.on_blocks = loops.multi_step_functions(
                model, model.train_step
            )


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
        self._call = translate_nonfinite(self._run_steps, model.optimizer)

    def __call__(self, iterator):
        return self._call(iterator)

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
        if run is not None and run.take_no_step():
            return {}
        functions = self._functions(run)
        records = None
        feed = run.feed if run is not None else None
        if not functions.multi_step:
            outputs = functions.keras(iterator)
        elif (
            feed is not None
            and feed.reads_blocks
            and isinstance(iterator, tf.data.Iterator)
        ):
            outputs, records = functions.on_blocks(feed.blocks_for(iterator))
        elif isinstance(
            iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)
        ):
            outputs, records = functions.on_iterator(iterator)
        else:  # Python generators, PyDatasets: Keras's own loop.
            outputs = functions.keras(iterator)
        if run is not None:
            run.records = records
        return outputs
