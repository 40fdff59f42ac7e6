"""The TensorFlow backend's train step and `fit` for `SlimModel`."""

import functools
import inspect

import keras
import tensorflow as tf

from keras_slim import _fit
from keras_slim import _keras
from keras_slim import _step
from keras_slim import _strategy
from keras_slim._fit import step_options
from keras_slim._step import accumulate
from keras_slim._step import apply

__all__ = ["TensorFlowStep"]


def _batch_size(x):
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    return tf.shape(first)[0]


class TensorFlowStep:
    """`SlimModel`'s step, train function and `fit` on TensorFlow: a mixin
    before `keras.Model` in `SlimModel`'s bases when Keras runs on the
    TensorFlow backend (`keras_slim/model.py`)."""

    def make_train_function(self, force=False):
        """Resolves the policy, then makes the model's `TrainFunction`.

        The `TrainFunction` (`keras_slim/_fit/train_function.py`) compiles
        what each `fit`'s run needs on first use, so callbacks never
        rebuild it.

        Args:
            force: Whether to make a new one even if there is one.

        Returns:
            The train function.

        Raises:
            ValueError: for a policy pattern matching nothing,
                `jit_compile=True` with several replicas in this process,
                a `keras.optimizers.MultiOptimizer`, or a loss scale or
                gradient accumulation the strategy cannot run.
        """
        if self.train_function is not None and not force:
            return self.train_function
        _step.check(self)
        if accumulate.steps(self.optimizer) and self._step_loss is None:
            # Kept across fits: a step may span two.
            self._step_loss = accumulate.StepLossMean(self.distribute_strategy)
        # A subclassed model may get its variables only when first traced.
        self._policy_plan = (
            self.gradient_policy.resolve(self) if self.variables else None
        )
        apply.install(self.optimizer)
        self.train_function = _fit.TrainFunction(self)
        return self.train_function

    def fit(self, x=None, y=None, *args, **kwargs):
        """`keras.Model.fit`, also under `ParameterServerStrategy`.

        Under a parameter-server strategy (which Keras 3's `fit` does not
        support), `x` is a `tf.data.Dataset` or a dataset function
        `input_context -> tf.data.Dataset`, `steps_per_epoch` is required,
        steps are scheduled on the workers by a `ClusterCoordinator`, and
        callbacks run on the coordinator; see docs/how_it_works.md. Elsewhere it
        is Keras's `fit`; compiled with `steps_per_execution="auto"`, it
        runs as many steps per call of the train function (up to 32) as
        the callbacks allow, every step a keras_slim callback must see
        staying the last step of a call, and reads a `tf.data.Dataset` a
        block of that many batches at a time (docs/design.md).

        Args:
            x: Input data, as for `keras.Model.fit`.
            y: Targets, as for `keras.Model.fit` (`None` with a dataset).
            *args: The other arguments of `keras.Model.fit`, in its order.
            **kwargs: The other arguments of `keras.Model.fit`.

        Returns:
            A `keras.callbacks.History`.

        Raises:
            ValueError: under `ParameterServerStrategy`, for `y` or an
                argument its loop does not support.
        """
        if args:
            names = list(inspect.signature(keras.Model.fit).parameters)[3:]
            kwargs.update(zip(names, args))
        keras_fit = functools.partial(keras.Model.fit, self)
        return _fit.fit(self, keras_fit, x, y, kwargs, auto=self._auto_steps)

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Builds the model on one replica's batch before the first step.

        Overrides Keras's, which reduces the whole distributed batch and
        fails under `MultiWorkerMirroredStrategy`
        (`keras_slim/_fit/multi_worker.py`).
        """
        _fit.build_on_one_replica(self, iterator, data_batch)

    def train_step(self, data):
        """One step: forward, loss, gradients, sum, the plan, metrics.

        Args:
            data: A batch, `(x, y, sample_weight)` in Keras's convention.

        Returns:
            The dict of metric results, as `keras.Model.train_step` returns.
        """
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred, activations = self._forward(x)
            loss = _keras.compute_loss(self, x, y, y_pred, sample_weight)
            scaled_loss = self.optimizer.scale_loss(loss)
        plan = self.step_plan
        grads = tape.gradient(scaled_loss, list(plan.variables))
        grads, total_loss = _step.sum_across_replicas(
            grads, loss if plan.checks else None
        )
        batch_size = _batch_size(x)
        outcome = plan.update(
            _step.Update(
                grads,
                total_loss,
                replica_loss=loss,
                batch_size=batch_size,
                x=x,
                activations=activations,
            )
        )
        self._track_loss(loss, batch_size, outcome.finite)
        logs = self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
        if outcome.verdict is None:
            return logs
        # Under XLA: the loop around the compiled step fails on it.
        return {**logs, _step.VERDICT: outcome.verdict}

    def gradient_step(self, data):
        """The first half of a train step: forward, loss, summed gradients.

        What each worker computes for a synchronous step over parameter
        servers (`DeploymentConfig(replicas_to_aggregate=...)`): the
        loss and metrics are reported as in `train_step`; nothing is
        applied.

        Args:
            data: A batch, `(x, y, sample_weight)` in Keras's convention.

        Returns:
            `(grads, loss)`: the gradients of the policy's variables summed
            across this worker's replicas (`None` where a variable has no
            gradient), and the loss summed likewise (the batch's mean).
        """
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            y_pred, _ = self._forward(x)
            loss = _keras.compute_loss(self, x, y, y_pred, sample_weight)
            scaled_loss = self.optimizer.scale_loss(loss)
        variables = list(self.step_plan.variables)
        grads = tape.gradient(scaled_loss, variables)
        grads, total_loss = _step.sum_across_replicas(grads, loss)
        # A non-finite loss is left out of the reported mean; the step that
        # aggregates it decides whether to skip or fail.
        self._track_loss(loss, _batch_size(x), tf.math.is_finite(total_loss))
        self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
        return grads, total_loss

    def apply_step(self, grads, loss):
        """The second half of a train step: the plan on aggregated
        gradients.

        Applies gradients already aggregated (summed across replicas, or
        averaged over workers by a synchronous step) as `train_step` does:
        a non-finite loss or gradient fails or skips the step.

        Args:
            grads: One gradient (or `None`) per variable of the policy,
                in the order of `gradient_step`'s.
            loss: The scalar loss the gradients belong to.
        """
        self.step_plan.update(_step.Update(list(grads), loss))

    def _forward(self, x):
        """`(y_pred, activations)`: the model's call, or, when in-step
        summaries write activations, the call that also gives them."""
        hook = self.step_options.step_summaries
        training = {}  # as Keras's train_step calls the model
        if _keras.call_has_training_arg(self):
            training = {"training": True}
        if hook is not None:
            y_pred, activations = hook.forward(x, **training)
            if activations is not None:
                return y_pred, activations
        return self(x, **training), None

    @property
    def step_options(self):
        """The `StepOptions` the train step is traced with: those its train
        function fixed for the current run (`keras_slim/_fit/
        step_options.py`), or the defaults."""
        function = self.train_function
        if isinstance(function, _fit.TrainFunction):
            return function.step_options
        return step_options.DEFAULT

    @property
    def step_plan(self):
        """The `StepPlan` of the current run's update (`keras_slim/_step/`),
        built when the step is first traced: the policy is resolved then,
        after the forward pass that builds a subclassed model."""
        function = self.train_function
        if isinstance(function, _fit.TrainFunction):
            return function.step_plan()
        return self.make_step_plan(step_options.DEFAULT)

    def make_step_plan(self, options):
        """A new `StepPlan` for `options`, the policy resolved.

        Args:
            options: The run's `StepOptions`.

        Returns:
            The `StepPlan`.
        """
        return _step.build(self, options, self._plan())

    @property
    def records_step_losses(self):
        """Whether multi-step calls record each step's loss (not under
        parameter servers, whose scheduled calls record nothing): a
        callback reading single steps' losses then leaves the steps per
        call free."""
        return _strategy.mode(self.distribute_strategy).records_step_losses

    def _track_loss(self, loss, batch_size, finite):
        """Reports the step's loss as the built-in train step does.

        A step the check finds not finite does not count in the reported
        mean, whether it is skipped or fails: the tracker's update need
        not wait for the step's assertion, so a failing step (which a
        rollback goes on from) must not leave its loss in the mean either.
        """
        loss = _keras.unscale_loss(loss)
        if finite is not None:
            loss = tf.where(finite, loss, tf.zeros_like(loss))
            batch_size = tf.where(finite, batch_size, 0)
        _keras.loss_tracker(self).update_state(loss, sample_weight=batch_size)
