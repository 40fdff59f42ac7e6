"""The JAX backend's train step, train function and `fit` for
`SlimModel`."""

import inspect

import keras

from keras_slim import _keras_optimizer
from keras_slim._jax import run as run_lib
from keras_slim._jax import step as step_lib
from keras_slim._jax import train_function as train_function_lib

__all__ = ["JaxStep"]


class JaxStep:
    """`SlimModel`'s step, train function and `fit` on JAX: a mixin before
    `keras.Model` in `SlimModel`'s bases when Keras runs on the JAX
    backend (`keras_slim/model.py`).

    The step is Keras's `JAXTrainer.train_step` with the policy between
    `jax.value_and_grad` and the optimizer (`keras_slim/_jax/step.py`).
    """

    # Whether a non-finite update fails (else it is skipped), as the
    # callbacks of the current `fit` declare (`StepOptions`).
    _raise_on_nonfinite = True

    def make_train_function(self, force=False):
        """Resolves the policy, then makes the model's `TrainFunction`.

        Args:
            force: Whether to make a new one even if there is one.

        Returns:
            The train function.

        Raises:
            ValueError: for a policy pattern matching nothing, a
                `keras.optimizers.MultiOptimizer`, or gradient
                accumulation with a loss scale.
        """
        if self.train_function is not None and not force:
            return self.train_function
        _check(self)
        self._policy_plan = None
        plan = self.step_plan
        if plan.accumulation:
            _keras_optimizer.replace_accumulating_apply(
                plan.optimizer, lambda: True
            )
            _keras_optimizer.schedule_at_optimizer_steps(plan.optimizer)
        self.train_function = train_function_lib.TrainFunction(self, plan)
        return self.train_function

    def fit(self, x=None, y=None, *args, **kwargs):
        """`keras.Model.fit`, its steps failing or skipping a non-finite
        update as its callbacks declare (`step_options`).

        Args:
            x: Input data, as for `keras.Model.fit`.
            y: Targets, as for `keras.Model.fit`.
            *args: The other arguments of `keras.Model.fit`, in its order.
            **kwargs: The other arguments of `keras.Model.fit`.

        Returns:
            A `keras.callbacks.History`.
        """
        if args:
            names = list(inspect.signature(keras.Model.fit).parameters)[3:]
            kwargs.update(zip(names, args))
        raises = _declared_raise(kwargs.get("callbacks"), self)
        if raises != self._raise_on_nonfinite:
            self._raise_on_nonfinite = raises
            self.train_function = None
        if isinstance(self.train_function, train_function_lib.TrainFunction):
            self.train_function.reset()  # each fit counts its own
        run = run_lib.Run(self)
        run.input_kind = run_lib.input_kind(x)
        run.input = x
        run.steps_per_epoch = kwargs.get("steps_per_epoch")
        kwargs["callbacks"] = _with_tracker(kwargs.get("callbacks"), run)
        run_lib.attach(self, run)
        try:
            return keras.Model.fit(self, x, y, **kwargs)
        finally:
            run_lib.attach(self, None)
            run.close()
            # A resumed run's epoch (`Checkpoints`) is this fit's only.
            self._initial_epoch = None

    def jax_state_sync(self):
        """Keras's sync of the state a `fit` keeps outside the variables,
        then the numeric check's verdict of the last train call: at the end
        of each epoch, of `fit` and of `train_on_batch`, and when a callback
        reads `self.model`.

        Raises:
            NanLossDuringTrainingError: if a step failed since the last
                check, the model holding the weights from before it.
        """
        keras.Model.jax_state_sync(self)
        function = self.train_function
        if isinstance(function, train_function_lib.TrainFunction):
            function.check()

    def train_step(self, state, data):
        """One step, in Keras's JAX signature: forward, loss, gradient, the
        policy, metrics.

        Args:
            state: Keras's `(trainable, non-trainable, optimizer, metrics)`
                variable values.
            data: A batch, `(x, y, sample_weight)` in Keras's convention.

        Returns:
            `(logs, state)`, as `JAXTrainer.train_step` returns.
        """
        function = self.train_function
        counters = step_lib.initial_counters()
        if isinstance(function, train_function_lib.TrainFunction):
            counters = function.counters
        logs, state, _ = step_lib.run(
            self, self.step_plan, state, counters, data
        )
        return logs, state

    @property
    def step_plan(self):
        """The `JaxPlan` of the current run's step (`keras_slim/_jax/
        step.py`), the policy resolved."""
        function = self.train_function
        if isinstance(function, train_function_lib.TrainFunction):
            return function.plan
        return step_lib.plan_for(self, self._plan(), self._raise_on_nonfinite)

    @property
    def skipped_steps(self):
        """`(count, first, last)`: the steps the last `fit` skipped (a
        loss-scale overflow among them), as ints; first and last are
        global steps, 0 while none was skipped."""
        function = self.train_function
        if isinstance(function, train_function_lib.TrainFunction):
            return function.skipped_steps()
        return (0, 0, 0)


def _with_tracker(callbacks, run):
    """The fit's callbacks with the run's tracker first (Keras's
    `CallbackList` keeps a list's order, whatever it holds)."""
    tracker = run_lib.tracker(run)
    if isinstance(callbacks, keras.callbacks.CallbackList):
        callbacks.callbacks.insert(0, tracker)
        return callbacks
    return [tracker, *(callbacks or ())]


def _declared_raise(callbacks, model):
    """Whether the callbacks leave a non-finite update failing: a callback
    whose `step_options(model)` declares `raise_on_nonfinite` decides."""
    raises = True
    for callback in callbacks or ():
        declare = getattr(callback, "step_options", None)
        if declare is not None:
            raises = declare(model).get("raise_on_nonfinite", raises)
    return raises


def _check(model):
    """The checks of the step before any step, as on TensorFlow."""
    optimizer = model.optimizer
    if isinstance(optimizer, getattr(keras.optimizers, "MultiOptimizer", ())):
        raise ValueError(
            "Invalid value for argument `optimizer`: a "
            "keras.optimizers.MultiOptimizer. A SlimModel applies one "
            "optimizer; give per-variable learning rates with "
            "GradientPolicy(lr_multipliers=...)."
        )
    inner = _keras_optimizer.inner_optimizer(optimizer)
    k = getattr(inner, "gradient_accumulation_steps", None)
    if k and _keras_optimizer.loss_scale_optimizer(optimizer) is not None:
        raise ValueError(
            "Invalid value for argument `gradient_accumulation_steps`. "
            f"Received: gradient_accumulation_steps={k} on the optimizer "
            f"of a {type(optimizer).__name__}, whose loss scale may change "
            "between micro-batches. Accumulate without loss scaling, or "
            "without accumulation."
        )
