"""`Summaries` on JAX: TensorBoard scalars and variable histograms on step
or time intervals, written without TensorFlow."""

import time

import keras
import numpy as np

from keras_slim import _keras_optimizer
from keras_slim._jax import step_summaries
from keras_slim._jax.callbacks import _event_file
from keras_slim._jax.callbacks import _histogram
from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks import summaries
from keras_slim.callbacks._files import check_writable
from keras_slim.gradients import variable_path


class Summaries(RunCallback):
    """Writes TensorBoard summaries every n steps and/or every n seconds.

    `keras_slim.callbacks.Summaries` on JAX, with its arguments, intervals
    and tags, written to an event file in `logdir` at the global step of
    the step that fired:

    - `loss`: the loss of that step (not the epoch's running mean), read
      from the model's loss tracker before and after the call of the
      train function that reached it; with `steps_per_execution > 1`,
      the mean over that call's steps; under gradient accumulation, the
      mean over the update's micro-batches;
    - every other key of Keras's `logs`: loss terms and metrics, as Keras
      reports them (running means of the epoch);
    - `losses/total_loss` (that loss), `losses/regularization_loss` (the
      weight regularizers' terms at the variables' values after the
      step) and `losses/<loss name>` (their difference):
      train_image_classifier's loss tags;
    - `learning_rate`: the optimizer's, a schedule evaluated at the step
      on the host;
    - `global_step/sec`: steps per second since the last write;
    - `histograms=True`: `<variable path>`, a histogram of each of the
      model's variables, with TF1's buckets (TensorFlow's
      `HistogramSummary` kernel, in NumPy): a NaN or infinity counted at
      the dtype's largest magnitude (float32's for float64);
    - `gradients=True`: `<variable path>/gradient` and
      `<variable path>/gradient_norm`, histogram and norm of each gradient
      the optimizer is given (after the gradient policy, unscaled:
      TF-Slim's `add_gradients_summaries`);
    - `activations=True`: `activations/<layer>` and `sparsity/<layer>`,
      histogram and zero fraction of each layer's output;
      `activations=[names]`: of those layers only.

    Gradients and activations come from inside the train step: on the
    calls whose end writes, the train function runs a second compiled
    step, the same update that also returns the gradients and the layers'
    outputs of its own forward pass (`training=True`, no second forward
    pass); every other call runs the plain step. The second step is
    compiled on the first write. With `steps_per_execution > 1` they are
    those of the call's last step.

    What differs from TensorFlow: no TensorFlow is imported (TensorBoard's
    own protos and record writer write the file, local paths only); the
    histograms and norms are computed on the host from the arrays the
    step returned. Only the calls that write read anything on the host
    (the loss tracker's two numbers before and after, the variables'
    values for histograms and the regularization, what the summarizing
    step returned); none copies the state back to the model. As on
    TensorFlow, a time interval also writes the first step, and the writer
    is created on the first write (no empty event files); it is flushed at
    each write and closed when the fit ends, however it ends. With
    `steps_per_execution > 1`, a write happens at the end of the first
    call at or past its interval, at the global step that call reached.

    Args:
        logdir: Directory of the event files.
        every_n_steps: Positive integer or `None`: write at global steps
            that are multiples of it.
            Defaults to `None`.
        every_n_secs: Positive number or `None`: write at the first step,
            then when this many seconds passed since the last write.
            Defaults to `600`.
        histograms: Whether to write a histogram of every model variable.
            Defaults to `False`.
        gradients: Whether to write each gradient's histogram and norm.
            Defaults to `False`.
        activations: Whether to write each layer output's histogram and
            zero fraction (needs a functional `SlimModel`), or a list of
            the names of the layers whose outputs to write.
            Defaults to `False`.

    Raises:
        ValueError: for an empty `logdir`, a non-positive interval or a
            flag that is not a boolean; at train begin, before the first
            step, for a `logdir` that cannot be created or written, a
            model that is not a `keras_slim.SlimModel`, activations of a
            subclassed model, or an activation layer name the model does
            not have.

    Example:
    ```python
    summaries = keras_slim.callbacks.Summaries("/tmp/run", every_n_steps=100)
    model.fit(x, y, epochs=10, callbacks=[summaries])
    ```
    """

    def __init__(
        self,
        logdir,
        *,
        every_n_steps=None,
        every_n_secs=600,
        histograms=False,
        gradients=False,
        activations=False,
        clock=None,
    ):
        super().__init__()
        self._clock = clock or time.monotonic
        (
            self.logdir,
            self._trigger,
            self.histograms,
            self.gradients,
            self.activations,
        ) = summaries.check_arguments(
            logdir,
            every_n_steps=every_n_steps,
            every_n_secs=every_n_secs,
            histograms=histograms,
            gradients=gradients,
            activations=activations,
            clock=self._clock,
        )
        self._events = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        summaries.check_in_step_model(
            self._model, self.gradients, self.activations
        )
        check_writable("logdir", self.logdir, what="summaries", create=False)
        self.run.summaries = step_summaries.plan_for(
            self._model, self.gradients, self.activations
        )
        self._paths = [
            variable_path(v) for v in self._model.step_plan.policy.variables
        ]
        self.run.at_end(self._close)
        self._last = None
        self._first = False
        self._mark = None

    def on_train_batch_begin(self, batch, logs=None):
        run = self.run
        if self._last is None:
            step = run.step
            self._trigger.reset(step)
            self._last = (step, self._clock())
            # As TF-Slim's summary thread, a time trigger also writes the
            # first step, so that a short run leaves summaries.
            self._first = self._trigger.every_n_secs is not None
        self._mark = None
        run.summary_wanted = False
        run.summary_outputs = None
        if run.halted:
            return
        # The step this call reaches at most: a mark only before a write.
        reach = (run.batches + self._model.steps_per_execution) // run.per_step
        if self._first or self._trigger.would_fire(reach):
            self._mark = self.run.loss_totals(on_device=True)
            run.summary_wanted = run.summaries is not None

    def after_call(self):
        run = self.run
        if run.no_step:
            return
        step = run.step
        fired = self._trigger(step)
        if self._first:
            self._first = False
            if not fired:
                fired = True
                self._trigger.reset(step)
        if fired:
            self._write(step, _floats(run.logs))
        run.summary_wanted = False
        run.summary_outputs = None

    def _write(self, step, logs):
        now = self._clock()
        scalars = dict(logs)
        loss = self._step_loss()
        state = self.run.state()
        if loss is not None:
            scalars["loss"] = loss
            scalars.update(
                summaries.loss_tags(
                    self._model, loss, _regularization(self._model, state)
                )
            )
        optimizer_values = state[2]
        scalars["learning_rate"] = _learning_rate(
            self._model.optimizer, step, optimizer_values
        )
        elapsed = now - self._last[1]
        if elapsed > 0:
            scalars["global_step/sec"] = (step - self._last[0]) / elapsed
        values = [
            _event_file.scalar_value(tag, value)
            for tag, value in sorted(scalars.items())
            if isinstance(value, (int, float))
        ]
        if self.histograms:
            values.extend(self._histograms())
        values.extend(self._in_step_values())
        if self._events is None:
            self._events = _event_file.EventFile(self.logdir)
        self._events.write(step, values)
        self._last = (step, now)

    def _step_loss(self):
        """The mean loss of the last call's steps, from the tracker's
        marks; `None` when the call began without a mark (a time interval
        that elapsed during the call: Keras's running mean stays)."""
        if self._mark is None:
            return None
        total, count = self.run.loss_totals() - np.asarray(self._mark)
        return float(total / count) if count else float("nan")

    def _histograms(self):
        """A histogram of each model variable, from the run's values."""
        values = _values_by_id(self._model, self.run.state())
        return [
            _histogram.histogram_value(v.path, values[id(v)])
            for v in self._model.variables
            if id(v) in values
        ]

    def _in_step_values(self):
        """The gradients' and the activations' summaries, from what the
        summarizing step returned (none when the call ran the plain
        step: a time interval that elapsed during the call)."""
        outputs = self.run.summary_outputs
        if outputs is None:
            return []
        values = []
        for path, grad in zip(self._paths, outputs["gradients"]):
            grad = np.asarray(grad)
            values.append(_histogram.histogram_value(f"{path}/gradient", grad))
            norm = float(np.linalg.norm(grad.astype("float32").ravel()))
            values.append(
                _event_file.scalar_value(f"{path}/gradient_norm", norm)
            )
        names = self.run.summaries.names
        for name, output in zip(names, outputs["activations"]):
            output = np.asarray(output)
            values.append(
                _histogram.histogram_value(f"activations/{name}", output)
            )
            zeros = output.size - np.count_nonzero(output)
            values.append(
                _event_file.scalar_value(
                    f"sparsity/{name}",
                    float(np.float32(zeros) / np.float32(output.size)),
                )
            )
        return values

    def on_train_end(self, logs=None):
        self._close()

    def _close(self):
        if self._events is not None:
            self._events.close()
            self._events = None


def _floats(logs):
    """A call's logs (device values, nested dicts flattened) as Python
    floats, as Keras's `fit` gives them to `on_train_batch_end`; a value
    that is not a number is left out.

    Args:
        logs: The logs the train function returned, or `None`.

    Returns:
        A dict of floats.
    """
    floats = {}
    for key, value in (logs or {}).items():
        if isinstance(value, dict):
            floats.update(_floats(value))
            continue
        try:
            floats[key] = float(np.asarray(value))
        except (TypeError, ValueError):
            continue
    return floats


def _regularization(model, state):
    """The sum of the weight regularizers' terms at the run's trainable
    values (what `model.losses` sums on TensorFlow), on the host."""
    total = 0.0
    for variable, value in zip(model.trainable_variables, state[0]):
        regularizer = getattr(variable, "regularizer", None)
        if regularizer is not None:
            total += float(keras.ops.convert_to_numpy(regularizer(value)))
    return total


def _values_by_id(model, state):
    """The run's value of each of the model's variables, by `id`."""
    lists = (
        model.trainable_variables,
        model.non_trainable_variables,
        model.optimizer.variables,
        model.metrics_variables,
    )
    values = {}
    for variables, held in zip(lists, state):
        for variable, value in zip(variables, held):
            values.setdefault(id(variable), value)
    return values


def _learning_rate(optimizer, step, optimizer_values):
    """The optimizer's learning rate at global step `step`: a schedule
    evaluated at it (what Keras's `optimizer.learning_rate` reads after
    the step; on JAX the schedule is read at optimizer steps, under
    gradient accumulation too), a variable's value in the run's state,
    or a callable's value; read on the host, without a sync."""
    rate = _keras_optimizer.configured_learning_rate(optimizer)
    if isinstance(rate, keras.optimizers.schedules.LearningRateSchedule):
        rate = rate(step)
    elif isinstance(rate, keras.Variable):
        index = {id(v): i for i, v in enumerate(optimizer.variables)}
        rate = optimizer_values[index[id(rate)]]
    elif callable(rate):
        rate = rate()
    return float(keras.ops.convert_to_numpy(rate))
