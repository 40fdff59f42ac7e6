"""`Summaries`: TensorBoard scalars and histograms on step or time intervals."""

import time

import keras

from keras_slim import _backend
from keras_slim import _keras
from keras_slim import checks
from keras_slim._backend import tensorflow as tf
from keras_slim.callbacks._files import check_writable
from keras_slim.callbacks._histogram import histogram
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.callbacks._step_loss import StepLoss
from keras_slim.callbacks._step_summaries import StepSummaries
from keras_slim.callbacks.step_callback import StepCallback
from keras_slim.model import SlimModel


def _loss_name(model):
    """The name of the compiled loss (`"loss"` when it has none)."""
    loss = getattr(model, "loss", None)
    if isinstance(loss, str):
        return loss
    return getattr(loss, "name", None) or "loss"


def _loss_terms(model, total):
    """train_image_classifier's loss tags: the total, the regularization
    (the weight regularizers' terms of the model's `losses`, evaluated
    now) and the data term. An activity regularizer's term is made per
    batch inside the step (a graph tensor on the host): it stays in the
    data term."""
    regularization = sum(
        float(keras.ops.convert_to_numpy(term))
        for term in model.losses
        if not tf.is_symbolic_tensor(term)
    )
    return loss_tags(model, total, regularization)


def loss_tags(model, total, regularization):
    """train_image_classifier's loss tags, on either backend.

    Args:
        model: The model (its compiled loss names the data term).
        total: The step's loss, as minimized.
        regularization: The sum of the weight regularizers' terms.

    Returns:
        `{"losses/total_loss": total, "losses/regularization_loss":
        regularization, "losses/<loss name>": total - regularization}`.

    Example:
    ```python
    loss_tags(model, 0.75, 0.25)["losses/loss"]  # 0.5
    ```
    """
    return {
        "losses/total_loss": total,
        "losses/regularization_loss": regularization,
        f"losses/{_loss_name(model)}": total - regularization,
    }


def check_in_step_model(model, gradients, activations):
    """Raises unless `model` can give the summaries written from inside
    its step (on either backend).

    Args:
        model: The model being fitted.
        gradients: `Summaries`' checked `gradients` flag.
        activations: Its checked `activations` (a bool or a tuple of
            layer names).

    Raises:
        ValueError: for gradients or activations on a model that is not a
            `SlimModel`, activations on a subclassed model, or a layer name
            the model does not have.

    Example:
    ```python
    check_in_step_model(model, gradients=True, activations=("fc1",))
    ```
    """
    asked = (("gradients", gradients), ("activations", activations))
    need = [name for name, value in asked if value]
    if need and not isinstance(model, SlimModel):
        raise ValueError(
            f"Summaries({need[0]}=True) needs a keras_slim.SlimModel, "
            f"whose train step can write them. Received a "
            f"{type(model).__name__}; use keras_slim.wrap(model)."
        )
    if activations and not isinstance(model, _keras.Functional):
        raise ValueError(
            "Summaries(activations=True) needs a functional model (its "
            "layers' outputs are known). Received a subclassed "
            f"{type(model).__name__}."
        )
    if isinstance(activations, tuple):
        names = {layer.name for layer in model.layers}
        missing = [n for n in activations if n not in names]
        if missing:
            raise ValueError(
                f"Invalid value for argument `activations`: the model "
                f"{model.name!r} has no layer named {missing}. "
                f"Expected names of its layers, such as "
                f"{sorted(names)[:5]}."
            )


def _learning_rate(optimizer):
    # Keras evaluates a schedule at `iterations` when it is read.
    return float(keras.ops.convert_to_numpy(optimizer.learning_rate))


def check_arguments(
    logdir, *, every_n_steps, every_n_secs, histograms, gradients,
    activations, clock,
):  # fmt: skip
    """`Summaries`' arguments, checked (on either backend).

    Args:
        logdir: A non-empty path.
        every_n_steps: Positive integer or `None`.
        every_n_secs: Positive number or `None`.
        histograms: A bool.
        gradients: A bool.
        activations: A bool, or a list of layer names.
        clock: A function returning seconds.

    Returns:
        `(logdir, trigger, histograms, gradients, activations)`: the path
        as a str, an `IntervalTrigger` of the two intervals on `clock`,
        the flags (`activations` as a bool or a tuple of names).

    Raises:
        ValueError: naming the first argument that is not valid.

    Example:
    ```python
    logdir, trigger, *flags = check_arguments(
        "/tmp/run", every_n_steps=100, every_n_secs=None, histograms=False,
        gradients=False, activations=False, clock=time.monotonic,
    )
    ```
    """
    return (
        checks.path("logdir", logdir),
        IntervalTrigger(
            every_n_steps=every_n_steps, every_n_secs=every_n_secs, clock=clock
        ),
        checks.boolean("histograms", histograms),
        checks.boolean("gradients", gradients),
        checks.boolean_or_names("activations", activations),
    )


class Summaries(StepCallback):
    """Writes TensorBoard summaries every n steps and/or every n seconds.

    Written with `tf.summary` to an event file in `logdir`, at the global
    step (`optimizer.iterations`) of the step that fired. Tags:

    - `loss`: the loss of that step (not the epoch's running mean; under
      gradient accumulation, the mean over the update's micro-batches);
    - every other key of Keras's `logs`: loss terms and metrics, as Keras
      reports them (running means of the epoch);
    - `losses/total_loss` (the loss of that step, as minimized),
      `losses/regularization_loss` (the sum of the weight regularizers'
      terms of the model's `losses`, at the write) and `losses/<loss
      name>` (their difference: the data term, and any activity
      regularizer's, made per batch in the step; per output, Keras's
      `<output>_loss` logs): train_image_classifier's loss tags;
    - `learning_rate`: the optimizer's, a schedule evaluated at the step;
    - `global_step/sec`: steps per second since the last write;
    - `histograms=True`: `<variable path>`, a histogram of each variable;
    - `gradients=True`: `<variable path>/gradient` and
      `<variable path>/gradient_norm`, histogram and norm of each gradient
      after the gradient policy (TF-Slim's `add_gradients_summaries`);
    - `activations=True`: `activations/<layer>` and `sparsity/<layer>`,
      histogram and zero fraction of each layer's output
      (train_image_classifier's tags); `activations=[names]`: of those
      layers only (train_image_classifier summarized its net's
      end_points, about 20 for inception_v3, not its hundreds of layers).

    Histograms are TF-Slim's: TensorFlow's `HistogramSummary` kernel (one
    op, where TensorBoard's `tf.summary.histogram` builds thirty), a
    NaN or infinity counted at the dtype's largest magnitude (float32's
    for float64; the kernel rejects them); TensorBoard's histogram
    dashboard shows them, its `EventAccumulator` lists them under
    `Tags()["histograms"]`.

    Gradients and activations are written from inside the train step of a
    `SlimModel` (activations: a functional one), under one `tf.cond` that is
    true only on the steps that write; activations are those of the step's
    own forward pass (`training=True`, as TF-Slim's training graph), with
    no second forward pass. Steps that write nothing cost no host sync;
    the `tf.cond` itself costs a measurable share of a small model's step
    (docs/benchmarks.md), so these two are off by default. A variable
    without a gradient is logged once, not an error. The writer is created
    on the first write (no empty event files), and only where the strategy
    writes summaries (the chief). With
    `steps_per_execution > 1`, a write happens at the first execution
    boundary at or past its interval, and gradients and activations are
    those of the last step of that execution.

    Args:
        logdir: Directory of the event files.
        every_n_steps: Positive integer or `None`: write at global steps that
            are multiples of it.
            Defaults to `None`.
        every_n_secs: Positive number or `None`: write at the first step
            (as TF-Slim's summary thread), then when this many seconds
            passed since the last write.
            Defaults to `600`.
        histograms: Whether to write a histogram of every model variable.
            Defaults to `False`.
        gradients: Whether to write each gradient's histogram and norm
            (needs a `SlimModel`).
            Defaults to `False`.
        activations: Whether to write each layer output's histogram and zero
            fraction (needs a functional `SlimModel`), or a list of the
            names of the layers whose outputs to write.
            Defaults to `False`.

    Raises:
        ValueError: for an empty `logdir`, a non-positive interval or a
            flag that is not a boolean; at train begin, before the first
            step, for a `logdir` that cannot be created or written, for
            gradients or activations on a model that cannot give them, or
            for an activation layer name the model does not have.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    summaries = keras_slim.callbacks.Summaries("/tmp/run", every_n_steps=100)
    model.fit(dataset, epochs=10, callbacks=[summaries])
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
        _backend.require_tensorflow(
            "keras_slim.callbacks.Summaries",
            "keras.callbacks.TensorBoard",
        )
        super().__init__()
        self._clock = clock or time.monotonic
        (
            self.logdir,
            self._trigger,
            self.histograms,
            self.gradients,
            self.activations,
        ) = check_arguments(
            logdir,
            every_n_steps=every_n_steps,
            every_n_secs=every_n_secs,
            histograms=histograms,
            gradients=gradients,
            activations=activations,
            clock=self._clock,
        )
        self._writer = None
        self._in_step = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        check_in_step_model(self.model, self.gradients, self.activations)
        self._chief = self._run.is_chief
        if self._chief:
            check_writable(
                "logdir", self.logdir, what="summaries", create=False
            )
        self._loss = StepLoss(self.model, self._run)
        # The train function traces the hook into the run's step
        # (`step_options`).
        self._in_step = self._make_in_step()
        self._armed = False

    def _make_in_step(self):
        """The in-step hook, or `None` when this process writes none."""
        if not (self.gradients or self.activations):
            return None
        several = self._run.mode.workers_in_lockstep
        if not self._chief and not several:
            return None
        # Under several workers every one makes the hook's variable (a
        # collective broadcast) and traces the same step, so their
        # collectives line up; only the chief writes. The writer is made
        # when the step is traced: a run that runs no step leaves no
        # event file.
        return StepSummaries(
            self._get_writer if self._chief else tf.summary.create_noop_writer,
            gradients=self.gradients,
            activations=self.activations,
            model=self.model,
        )

    def _get_writer(self):
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.logdir)
        return self._writer

    def step_multiples(self, model):
        every = self._trigger.every_n_steps
        return [every] if every else []

    def step_options(self, model):
        """The in-step hook writing gradients and activations, made in
        `on_train_begin` where this process traces one.

        Args:
            model: The model being fitted.

        Returns:
            `{"step_summaries": hook}`, or `{}`.
        """
        del model
        return (
            {} if self._in_step is None else {"step_summaries": self._in_step}
        )

    def on_first_batch(self, step):
        self._trigger.reset(step)
        self._last = (step, self._clock())
        # As TF-Slim's summary thread, a time trigger also writes the
        # first step, so that a short run leaves summaries.
        self._first = self._trigger.every_n_secs is not None

    def on_train_batch_begin(self, batch, logs=None):
        super().on_train_batch_begin(batch, logs)
        if self.no_step:
            return
        next_step = self.next_step
        if self._chief and (self._first or self._trigger.would_fire(next_step)):
            self._loss.mark()
            if self._in_step is not None:
                self._in_step.record_step.assign(next_step)
                self._armed = True

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self.no_step:
            return
        fired = self._trigger(self.counter.step)
        if self._first:
            self._first = False
            if not fired:
                fired = True
                self._trigger.reset(self.counter.step)
        if self._armed:
            self._in_step.record_step.assign(-1)
            self._armed = False
        if fired and self._chief:
            self._write(self.counter.sync(), logs or {})
        elif self._loss.marked:
            self._loss.since_mark()

    def _write(self, step, logs):
        loss, _ = self._loss.since_mark()
        now = self._clock()
        elapsed = now - self._last[1]
        with self._get_writer().as_default(step=step):
            scalars = dict(logs)
            if loss is not None:
                scalars["loss"] = loss
                scalars.update(_loss_terms(self.model, loss))
            for tag, value in sorted(scalars.items()):
                if isinstance(value, (int, float)):
                    tf.summary.scalar(tag, value)
            tf.summary.scalar(
                "learning_rate", _learning_rate(self.model.optimizer)
            )
            if elapsed > 0:
                tf.summary.scalar(
                    "global_step/sec", (step - self._last[0]) / elapsed
                )
            if self.histograms:
                for variable in self.model.variables:
                    histogram(variable.path, variable)
        self._last = (step, now)

    def on_train_end(self, logs=None):
        self._in_step = None
        if self._writer is not None:
            self._writer.flush()
