"""`SlimModel`: a `keras.Model` whose train step applies a `GradientPolicy`."""

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
from keras_slim._step import lr_factors
from keras_slim.policy import GradientPolicy

__all__ = ["SlimModel", "wrap"]


def _batch_size(x):
    first = next(t for t in tf.nest.flatten(x) if t is not None)
    return tf.shape(first)[0]


@keras.saving.register_keras_serializable(package="keras_slim")
class SlimModel(keras.Model):
    """A `keras.Model` whose `train_step` applies a `GradientPolicy`.

    The policy acts on gradients already summed across replicas, so `N`
    clones under `MirroredStrategy` train exactly like one device on the
    same global batch (Keras 3's own `clipnorm` clips each replica's
    gradient before the sum). Use it functionally, by subclassing, or turn
    an existing model into one with `keras_slim.wrap`.

    Args:
        inputs: Functional use: the model's inputs.
            Defaults to `None`.
        outputs: Functional use: the model's outputs.
            Defaults to `None`.
        name: The model's name.
            Defaults to `None`.
        gradient_policy: A `keras_slim.GradientPolicy`; `None` means the
            default policy (no multipliers, freezing or clipping; a
            non-finite loss or gradient skips the step and raises
            `keras_slim.NanLossDuringTrainingError`).
            Defaults to `None`.
        **kwargs: Passed to `keras.Model`.

    Raises:
        TypeError: if `gradient_policy` is not a `GradientPolicy` or `None`.

    Example:
    ```python
    inputs = keras.Input((32,))
    hidden = keras.layers.Dense(64, activation="relu", name="fc1")(inputs)
    outputs = keras.layers.Dense(10, name="logits")(hidden)
    model = keras_slim.SlimModel(
        inputs, outputs,
        gradient_policy=keras_slim.GradientPolicy(
            multipliers={"logits/.*": 10.0}, clip_norm=1.0),
    )
    model.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    model.fit(x, y)
    ```
    """

    def __new__(cls, *args, **kwargs):
        if _keras.is_functional_call(args, kwargs):
            if cls is SlimModel:
                cls = FunctionalSlimModel
            elif not issubclass(cls, _keras.Functional):
                raise TypeError(
                    f"{cls.__name__} is a subclassed SlimModel and cannot be "
                    "built from `inputs` and `outputs`. Build functional "
                    "models with keras_slim.SlimModel(inputs, outputs)."
                )
        return super().__new__(cls, *args, **kwargs)

    def __init__(
        self,
        inputs=None,
        outputs=None,
        name=None,
        *,
        gradient_policy=None,
        **kwargs,
    ):
        if isinstance(self, _keras.Functional):
            _keras.init_functional(self, inputs, outputs, name, **kwargs)
        else:
            keras.Model.__init__(self, name=name, **kwargs)
        self.gradient_policy = gradient_policy
        self._policy_plan = None
        # The loss of each optimizer step under gradient accumulation.
        self._step_loss = None
        self._auto_steps = False

    @property
    def gradient_policy(self):
        """The `GradientPolicy` the train step applies."""
        return self._gradient_policy

    @gradient_policy.setter
    def gradient_policy(self, policy):
        if policy is None:
            policy = GradientPolicy()
        if not isinstance(policy, GradientPolicy):
            raise TypeError(
                "Invalid value for argument `gradient_policy`. Received: "
                f"gradient_policy={policy!r}. Expected a "
                "keras_slim.GradientPolicy or None."
            )
        self._gradient_policy = policy
        # The next fit() resolves the new policy in a new train function.
        self.train_function = None

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

    def compile(self, *args, steps_per_execution="auto", **kwargs):
        """`keras.Model.compile`; `steps_per_execution` defaults to "auto".

        With "auto" (the default), each `fit` picks how many steps one call
        of the train function runs, up to 32: as many as the callbacks
        allow (see `fit`); evaluation and prediction run one batch per call.
        An integer fixes it, as in Keras.

        Args:
            *args: As for `keras.Model.compile`.
            steps_per_execution: "auto", or a positive integer.
            **kwargs: As for `keras.Model.compile`.
        """
        auto = isinstance(steps_per_execution, str)
        if auto and steps_per_execution != "auto":
            raise ValueError(
                "Invalid value for argument `steps_per_execution`. Received: "
                f"steps_per_execution={steps_per_execution!r}. Expected "
                '"auto" or a positive integer.'
            )
        self._auto_steps = auto
        super().compile(
            *args,
            steps_per_execution=1 if auto else steps_per_execution,
            **kwargs,
        )

    def get_compile_config(self):
        """Keras's compile config, with `steps_per_execution="auto"` kept."""
        config = super().get_compile_config()
        if isinstance(config, dict) and self._auto_steps:
            inner = config.get("config", config)
            if "steps_per_execution" in inner:
                inner["steps_per_execution"] = "auto"
        return config

    def compile_from_config(self, config):
        """Compiles from a saved compile config (Keras's, through `compile`).

        Args:
            config: The dict `get_compile_config` returned.
        """
        config = keras.saving.deserialize_keras_object(config)
        self.compile(**config)
        if hasattr(self, "optimizer") and self.built:
            self.optimizer.build(self.trainable_variables)

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

    def describe(self):
        """The train step's update, stage by stage, and the policy's table.

        Returns:
            The text: the plan's stages in the order they run, then
            `GradientPolicy.describe`'s table.

        Raises:
            ValueError: if the model is not compiled or not built.

        Example:
        ```python
        print(model.describe())
        # 1. gate        a non-finite loss or gradient fails the step
        # 2. policy      select, multiply, clip: 4 variables trained
        # 3. apply       SGD on the summed gradients
        # ...
        ```
        """
        if getattr(self, "optimizer", None) is None:
            raise ValueError(
                f"Model '{self.name}' is not compiled: its step has no "
                "optimizer yet. Call `model.compile(...)` first."
            )
        table = self.gradient_policy.describe(self)
        plan = self.step_plan.describe()
        return f"{plan}\n\n{table}"

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

    def _plan(self):
        """Returns the resolved policy, resolving it on the first trace."""
        if self._policy_plan is None:
            self._policy_plan = self.gradient_policy.resolve(self)
        if not self.optimizer.built:
            # Built on every trainable variable, so a later policy may
            # train what this one freezes, and outside the NaN `cond`.
            self.optimizer.build(self.trainable_variables)
        if self._policy_plan.lr_multipliers is not None:
            lr_factors.check(self.optimizer)
        return self._policy_plan

    def get_config(self):
        config = super().get_config()
        config["gradient_policy"] = keras.saving.serialize_keras_object(
            self.gradient_policy
        )
        return config

    @classmethod
    def from_config(cls, config, custom_objects=None):
        config = dict(config)
        policy = config.pop("gradient_policy", None)
        if policy is not None:
            config["gradient_policy"] = keras.saving.deserialize_keras_object(
                policy, custom_objects=custom_objects
            )
        return super().from_config(config, custom_objects=custom_objects)


@keras.saving.register_keras_serializable(package="keras_slim")
class FunctionalSlimModel(SlimModel, _keras.Functional):
    """The class of `SlimModel(inputs, outputs)`: a functional `SlimModel`.

    Like `keras.Model(inputs, outputs)` returns a `Functional`,
    `SlimModel(inputs, outputs)` returns an instance of this class;
    `isinstance(model, keras_slim.SlimModel)` holds for both kinds.
    """


def wrap(model, gradient_policy=None):
    """Turns a Sequential or functional model into a `SlimModel`.

    The new model shares the layers, and so the weights and variable paths,
    of `model`. If `model` is compiled, the `SlimModel` is compiled from its
    compile config (a fresh optimizer of the same configuration).

    Args:
        model: A built `keras.Sequential` or functional `keras.Model`.
        gradient_policy: The `GradientPolicy` to apply, or `None`.
            Defaults to `None`.

    Returns:
        A `SlimModel` with the same name, inputs, outputs and layers.

    Raises:
        TypeError: if `model` is a subclassed model (subclass `SlimModel`
            instead) or not a Keras model.
        ValueError: if `model` is a Sequential model that is not built.

    Example:
    ```python
    base = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    model = keras_slim.wrap(base, keras_slim.GradientPolicy(clip_norm=1.0))
    ```
    """
    if not isinstance(model, keras.Model):
        raise TypeError(
            "`wrap` expects a keras.Model. Received: "
            f"model={model!r} of type {type(model).__name__}."
        )
    if not isinstance(model, (keras.Sequential, _keras.Functional)):
        raise TypeError(
            f"`wrap` expects a Sequential or functional model; '{model.name}'"
            f" is a subclassed {type(model).__name__}. Subclass "
            "keras_slim.SlimModel instead of keras.Model."
        )
    try:
        inputs, outputs = model.inputs, model.outputs
    except (AttributeError, ValueError):
        inputs = outputs = None
    if not inputs or not outputs:
        raise ValueError(
            f"Model '{model.name}' is not built, so it has no inputs to wrap. "
            "Start it with a `keras.Input(...)` or call "
            "`model.build(input_shape)` first."
        )
    slim = SlimModel(
        inputs, outputs, name=model.name, gradient_policy=gradient_policy
    )
    if model.compiled:
        slim.compile_from_config(model.get_compile_config())
    return slim
