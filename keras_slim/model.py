"""`SlimModel`: a `keras.Model` whose train step applies a `GradientPolicy`.

The train step reads like Keras's own (`TensorFlowTrainer.train_step`):
forward, loss, `scale_loss`, gradient, then the TF-Slim part:
sum across replicas once, run the policy on the sum, apply (skipping a step
whose loss is not finite). Losses and metrics are reported through the same
trackers as the built-in step, so `history` matches a plain `keras.Model`.

This module holds the model: construction, the policy, the train step and
its config. How `fit` schedules the steps (parameter servers, steps per
call, the data feed, the multi-step loops) is in `keras_slim/_fit/`; the
Keras internals both use are in `keras_slim/_keras.py`.
"""

import collections
import functools
import inspect

import keras
import tensorflow as tf

from keras_slim import _accumulation
from keras_slim import _fit
from keras_slim import _keras
from keras_slim import _loss_scale
from keras_slim import _lr_multipliers
from keras_slim import _optimizer
from keras_slim import _strategy
from keras_slim import gradients as gradients_lib
from keras_slim._fit import step_options
from keras_slim.policy import GradientPolicy

__all__ = ["SlimModel", "wrap"]


class _Gate(
    collections.namedtuple(
        "_Gate", "finite error squares raises verdict loss_finite"
    )
):
    """A step's numeric verdict: `finite` (a boolean tensor, or `None`
    without a check), the assertion's `error` data when a non-finite step
    fails (`None` when it is skipped), the gradients' squared norms the
    clip stage reuses, whether the run raises on a non-finite step, the
    verdict the step returns when XLA compiles it (`None` otherwise;
    `keras_slim/_optimizer.py`), and, under a dynamic loss scale, whether
    the loss alone is finite (a finite loss with a non-finite gradient is
    an overflow; `None` otherwise)."""


def _check_jit_compile(model):
    """XLA compiles a whole step on one device: one local replica only."""
    if not model.jit_compile:
        return
    try:
        devices = model.distribute_strategy.extended.worker_devices
    except RuntimeError:  # the default strategy: one device
        return
    if len(devices) > 1:
        raise ValueError(
            "Invalid value for argument `jit_compile`. Received: "
            f"jit_compile={model.jit_compile!r} under a strategy with "
            f"{len(devices)} replicas in this process "
            f"({', '.join(devices)}). XLA compiles a step for one device, "
            "so it needs one replica per process: compile with "
            '`jit_compile=False` (or "auto", which picks it).'
        )


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
        _check_jit_compile(self)
        _optimizer.check(self.optimizer)
        _accumulation.check(self)
        _loss_scale.check(self)
        if _accumulation.steps(self.optimizer) and self._step_loss is None:
            # Kept across fits: a step may span two.
            self._step_loss = _accumulation.StepLossMean(
                self.distribute_strategy
            )
        # A subclassed model may get its variables only when first traced.
        self._policy_plan = (
            self.gradient_policy.resolve(self) if self.variables else None
        )
        _optimizer.install(self.optimizer)
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
        block of that many batches at a time (docs/internals.md).

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
        """One step: forward, loss, gradients, sum, policy, apply, metrics.

        Args:
            data: A batch, `(x, y, sample_weight)` in Keras's convention.

        Returns:
            The dict of metric results, as `keras.Model.train_step` returns.
        """
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        options = self.step_options
        y_pred, loss, grads, plan, activations = self._gradients(
            x, y, sample_weight
        )
        grads, total_loss = _optimizer.sum_across_replicas(
            grads, loss if plan.check_numerics else None
        )
        if _accumulation.steps(self.optimizer):
            if self._step_loss is not None:
                self._step_loss.update(
                    self.optimizer, _keras.unscale_loss(loss), _batch_size(x)
                )
            verdict = self._accumulate(
                grads, total_loss, plan, options, x=x, activations=activations
            )
            finite = None
            if total_loss is not None:
                finite = tf.math.is_finite(total_loss)
            self._track_loss(loss, _batch_size(x), finite)
        else:
            gate = self._gate(plan, grads, total_loss, options)
            tracked = gate.finite
            if gate.loss_finite is not None:
                tracked = gate.loss_finite
            self._track_loss(loss, _batch_size(x), tracked)
            self._apply_summed(
                grads, plan, options, gate, x=x, activations=activations
            )
            verdict = gate.verdict
        logs = self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
        if verdict is None:
            return logs
        # Under XLA: the loop around the compiled step fails on it.
        return {**logs, _optimizer.VERDICT: verdict}

    def _accumulate(self, grads, total_loss, plan, options, *, x, activations):
        """One micro-batch of an accumulating optimizer
        (`keras_slim/_accumulation.py`): its summed gradients are added;
        every `gradient_accumulation_steps`-th, their mean is gated, goes
        through the policy and is applied, as one step's sum is.

        Returns:
            The deferred numeric verdict under XLA (a finite one on the
            micro-steps that apply nothing), else `None`.
        """

        def update(means):
            gate = self._gate(plan, means, total_loss, options)
            self._apply_summed(
                means, plan, options, gate, x=x, activations=activations
            )
            return gate.verdict

        idle = None
        if options.defer_check and options.raise_on_nonfinite:
            if plan.check_numerics:
                # `verdict`'s [finite, loss, squared norm] of a good step.
                idle = functools.partial(tf.constant, [1.0, 0.0, 0.0])
        return _accumulation.micro_step(
            self.optimizer,
            grads,
            plan.variables,
            loss=total_loss,
            update=update,
            idle=idle,
        )

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
        y_pred, loss, grads, _, _ = self._gradients(x, y, sample_weight)
        grads, total_loss = _optimizer.sum_across_replicas(grads, loss)
        # A non-finite loss is left out of the reported mean; the step that
        # aggregates it decides whether to skip or fail.
        self._track_loss(loss, _batch_size(x), tf.math.is_finite(total_loss))
        self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)
        return grads, total_loss

    def apply_step(self, grads, loss):
        """The second half of a train step: gate, policy, apply.

        Applies gradients already aggregated (summed across replicas, or
        averaged over workers by a synchronous step) as `train_step` does:
        a non-finite loss or gradient fails or skips the step.

        Args:
            grads: One gradient (or `None`) per variable of the policy,
                in the order of `gradient_step`'s.
            loss: The scalar loss the gradients belong to.
        """
        options = self.step_options
        plan = self._plan()
        grads = list(grads)
        gate = self._gate(plan, grads, loss, options)
        self._apply_summed(grads, plan, options, gate, x=None, activations=None)

    def _gradients(self, x, y, sample_weight):
        """Forward, loss, and the gradients of the policy's variables.

        Returns:
            `(y_pred, loss, grads, plan, activations)`; the plan is
            resolved after the forward pass, which builds a subclassed
            model's variables; `activations` are the layer outputs the
            in-step summaries write (see `_forward`), or `None`.
        """
        with tf.GradientTape() as tape:
            y_pred, activations = self._forward(x)
            loss = _keras.compute_loss(self, x, y, y_pred, sample_weight)
            scaled_loss = self.optimizer.scale_loss(loss)
        plan = self._plan()
        grads = tape.gradient(scaled_loss, list(plan.variables))
        return y_pred, loss, grads, plan, activations

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
    def records_step_losses(self):
        """Whether multi-step calls record each step's loss (not under
        parameter servers, whose scheduled calls record nothing): a
        callback reading single steps' losses then leaves the steps per
        call free."""
        return _strategy.mode(self.distribute_strategy).records_step_losses

    def _gate(self, plan, grads, total_loss, options):
        """The step's numeric check on summed gradients (see `_Gate`).

        Once, on the sum: the same verdict on every replica. Under a
        `LossScaleOptimizer` the gradients still carry the loss scale;
        this check is the only one (see `_optimizer.apply_gradients`).
        """
        raises = options.raise_on_nonfinite
        if not plan.check_numerics:
            return _Gate(None, None, None, raises, None, None)
        squares = None
        present = [g for g in grads if g is not None]
        if present:
            squares = gradients_lib.squared_norms(present)
        finite, error = _optimizer.numeric_check(total_loss, squares)
        loss_finite = None
        if _loss_scale.dynamic(self.optimizer) is not None:
            loss_finite = tf.math.is_finite(total_loss)
        verdict = None
        if raises and options.defer_check:
            checked = finite if loss_finite is None else loss_finite
            verdict = _optimizer.verdict(checked, error)
        return _Gate(
            finite,
            error if raises else None,
            squares,
            raises,
            verdict,
            loss_finite,
        )

    def _apply_summed(self, grads, plan, options, gate, *, x, activations):
        """Policy, in-step summaries and the gated update."""
        grads = plan.apply(
            grads,
            scale=_optimizer.loss_scale(self.optimizer),
            squares=gate.squares,
        )
        if options.step_summaries is not None:
            options.step_summaries(self, x, grads, plan.variables, activations)
        with _lr_multipliers.scaled(
            self.optimizer, plan.variables, plan.lr_multipliers
        ):
            _optimizer.apply_gradients(
                self.optimizer,
                grads,
                plan.variables,
                gate.finite,
                gate.error,
                options.skipped_steps,
                deferred=gate.verdict is not None,
                loss_finite=gate.loss_finite,
                overflows=options.overflow_steps,
            )

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
            _lr_multipliers.check(self.optimizer)
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
