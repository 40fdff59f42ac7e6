"""`SlimModel`: a `keras.Model` whose train step applies a `GradientPolicy`.

The train step reads like Keras's own (`keras/src/backend/tensorflow/
trainer.py`): forward, loss, `scale_loss`, gradient, then the TF-Slim part:
sum across replicas once, run the policy on the sum, apply (skipping a step
whose loss is not finite). Losses and metrics are reported through the same
trackers as the built-in step, so `history` matches a plain `keras.Model`.

Private Keras internals used here (pinned by `keras==3.15.*`, checked by
tests/test_keras_internals.py): `Trainer._compute_loss`,
`keras.src.models.model.Trainer` / `functional_init_arguments`,
`keras.src.models.functional.Functional`,
`Trainer._loss_tracker`, `Layer._call_has_training_arg`,
`Trainer._resolve_auto_jit_compile`, `keras.src.losses.loss.
unscale_loss_for_distribution`.
"""

import functools
import inspect
import re

import keras
import tensorflow as tf
from keras.src.losses.loss import unscale_loss_for_distribution
from keras.src.models.functional import Functional
from keras.src.models.model import Trainer
from keras.src.models.model import functional_init_arguments

from keras_slim import _auto_steps
from keras_slim import _blocks
from keras_slim import _optimizer
from keras_slim import _parameter_server
from keras_slim._train_function import is_multi_worker
from keras_slim._train_function import make_multi_step_function
from keras_slim.errors import NanLossDuringTrainingError
from keras_slim.policy import GradientPolicy

__all__ = ["SlimModel", "wrap"]

_NONFINITE = "keras_slim: LossTensor is inf or nan"
_NONFINITE_RE = re.compile(re.escape(_NONFINITE) + r"\]\s*\[([^\]]*)\]")


def _translate_nonfinite(function, optimizer):
    """Wraps a train function so the in-graph NaN check raises our error.

    The failing step updated nothing, `iterations` included, so the step
    that failed is `iterations + 1`, read on the host only then.
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
        outputs: Functional use: the model's outputs.
        name: The model's name.
        gradient_policy: A `keras_slim.GradientPolicy`; `None` means the
            default policy (no multipliers, freezing or clipping; a
            non-finite loss skips the step and raises
            `keras_slim.NanLossDuringTrainingError`).
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

    # Multi-step calls record each step's loss (`_train_function`).
    _keras_slim_records_steps = True

    def __new__(cls, *args, **kwargs):
        if functional_init_arguments(args, kwargs):
            if cls is SlimModel:
                cls = FunctionalSlimModel
            elif not issubclass(cls, Functional):
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
        if isinstance(self, Functional):
            # keras.Model.__init__ minus its `inject_functional_model_class`,
            # which would rewrite SlimModel's bases for every subclass.
            Trainer.__init__(self)
            Functional.__init__(self, inputs, outputs, name=name, **kwargs)
        else:
            keras.Model.__init__(self, name=name, **kwargs)
        self.gradient_policy = gradient_policy
        self._keras_slim_plan = None
        self._raise_on_nonfinite = True

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

    def _resolve_auto_jit_compile(self):
        # XLA drops tf.debugging.Assert, which stops training on a NaN loss.
        if self.gradient_policy.check_numerics:
            return False
        return super()._resolve_auto_jit_compile()

    def make_train_function(self, force=False):
        """Resolves the policy, then builds Keras's train function."""
        if self.train_function is not None and not force:
            return self.train_function
        if self.gradient_policy.check_numerics and self.jit_compile:
            raise ValueError(
                "`jit_compile=True` cannot be used with a gradient policy "
                "whose `check_numerics=True`: XLA drops the check that stops "
                "training on a NaN loss. Compile with `jit_compile=False`, or "
                "set `GradientPolicy(check_numerics=False)`."
            )
        # A subclassed model may get its variables only when first traced.
        self._keras_slim_plan = (
            self.gradient_policy.resolve(self) if self.variables else None
        )
        _optimizer.install(self.optimizer)
        super().make_train_function(force=True)
        multi_worker = is_multi_worker(self.distribute_strategy)
        if (
            self.steps_per_execution > 1 or multi_worker
        ) and not self.run_eagerly:
            self.train_function = make_multi_step_function(
                self, self.train_step, self.train_function
            )
        self.train_function = _translate_nonfinite(
            self.train_function, self.optimizer
        )
        self._keras_slim_built_for = self.steps_per_execution
        return self.train_function

    def fit(self, x=None, y=None, *args, **kwargs):
        """`keras.Model.fit`, also under `ParameterServerStrategy`.

        Under a parameter-server strategy (which Keras 3's `fit` does not
        support), `x` is a `tf.data.Dataset` or a dataset function
        `input_context -> tf.data.Dataset`, `steps_per_epoch` is required,
        steps are scheduled on the workers by a `ClusterCoordinator`, and
        callbacks run on the coordinator; see docs/design.md. Elsewhere it
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
        """
        if args:
            names = list(inspect.signature(keras.Model.fit).parameters)[3:]
            kwargs.update(zip(names, args))
        # Set by each multi-step call; none left from an earlier fit.
        self._keras_slim_step_records = None
        if not _parameter_server.is_parameter_server(self.distribute_strategy):
            if not getattr(self, "_keras_slim_auto_steps", False):
                return super().fit(x, y, **kwargs)
            return self._fit_auto_steps(x, y, kwargs)
        if y is not None:
            raise ValueError(
                "Under ParameterServerStrategy, pass a tf.data.Dataset of "
                "(x, y) batches or a dataset function as `x`, and no `y`."
            )
        return _parameter_server.fit(
            self,
            x,
            translate_error=lambda f: _translate_nonfinite(f, self.optimizer),
            **kwargs,
        )

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
        self._keras_slim_auto_steps = auto
        super().compile(
            *args,
            steps_per_execution=1 if auto else steps_per_execution,
            **kwargs,
        )

    def get_compile_config(self):
        """Keras's compile config, with `steps_per_execution="auto"` kept."""
        config = super().get_compile_config()
        if isinstance(config, dict) and getattr(
            self, "_keras_slim_auto_steps", False
        ):
            inner = config.get("config", config)
            if "steps_per_execution" in inner:
                inner["steps_per_execution"] = "auto"
        return config

    def compile_from_config(self, config):
        """Compiles from a saved compile config (Keras's, through `compile`).

        Args:
            config: The dict `get_compile_config` returned.
        """
        from keras.src.saving import serialization_lib

        config = serialization_lib.deserialize_keras_object(config)
        self.compile(**config)
        if hasattr(self, "optimizer") and self.built:
            self.optimizer.build(self.trainable_variables)

    def _fit_auto_steps(self, x, y, kwargs):
        """Keras's `fit` with the steps per execution the callbacks allow."""
        from keras_slim.callbacks._steps import StepCallback

        steps = 1
        if not self.run_eagerly:
            steps = _auto_steps.choose(self, x, kwargs, StepCallback)
        if getattr(self, "_keras_slim_built_for", None) != steps:
            self.train_function = None
        self.steps_per_execution = steps
        if steps > 1 and y is None and _blocks.eligible(self, x, kwargs, steps):
            # One read of the data per call (keras_slim/_blocks.py).
            self._keras_slim_feeder = _blocks.Feeder(x, steps)
            x = self._keras_slim_feeder.stand_in
        try:
            return super().fit(x, y, **kwargs)
        finally:
            # Evaluation and prediction keep one batch per call.
            self.steps_per_execution = 1
            self._keras_slim_feeder = None

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        """Builds the model on one replica's batch before the first step.

        Keras 3.15 first reduces the whole distributed (x, y) batch with
        `strategy.reduce("MEAN", batch)`, which `MultiWorkerMirroredStrategy`
        cannot do ('Attempt to convert a value (PerReplica...)'); only the
        shapes matter, so the first local replica's batch is used.
        """
        if self._distribute_strategy is None:
            return
        if iterator is not None:
            for _, _, it in iterator:
                batch = next(it)
                data_batch = tf.nest.map_structure(
                    lambda v: (
                        self.distribute_strategy.experimental_local_results(v)[
                            0
                        ]
                        if isinstance(v, tf.distribute.DistributedValues)
                        else v
                    ),
                    batch,
                )
                break
        with self.distribute_strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def train_step(self, data):
        """One step: forward, loss, gradients, sum, policy, apply, metrics.

        Args:
            data: A batch, `(x, y, sample_weight)` in Keras's convention.

        Returns:
            The dict of metric results, as `keras.Model.train_step` returns.
        """
        x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        with tf.GradientTape() as tape:
            if self._call_has_training_arg:
                y_pred = self(x, training=True)
            else:
                y_pred = self(x)
            loss = self._compute_loss(
                x=x,
                y=y,
                y_pred=y_pred,
                sample_weight=sample_weight,
                training=True,
            )
            scaled_loss = self.optimizer.scale_loss(loss)
        plan = self._plan()
        grads = tape.gradient(scaled_loss, list(plan.variables))
        grads, total_loss = _optimizer.sum_across_replicas(
            grads, loss if plan.check_numerics else None
        )
        grads = plan.apply(grads, scale=_optimizer.loss_scale(self.optimizer))
        summaries = getattr(self, "_keras_slim_summaries", None)
        if summaries is not None:
            summaries(self, x, grads, plan.variables)
        finite = error = None
        if plan.check_numerics:
            finite = tf.math.is_finite(total_loss)
            if self._raise_on_nonfinite:
                error = [_NONFINITE, total_loss]
        self._track_loss(loss, _batch_size(x), finite)
        _optimizer.apply_gradients(
            self.optimizer, grads, plan.variables, finite, error
        )
        return self.compute_metrics(x, y, y_pred, sample_weight=sample_weight)

    def _track_loss(self, loss, batch_size, finite):
        """Reports the step's loss as the built-in train step does.

        A step skipped for a non-finite loss (when the model does not
        raise) does not count in the reported mean, as if it never ran.
        """
        loss = unscale_loss_for_distribution(loss)
        if finite is not None and not self._raise_on_nonfinite:
            loss = tf.where(finite, loss, tf.zeros_like(loss))
            batch_size = tf.where(finite, batch_size, 0)
        self._loss_tracker.update_state(loss, sample_weight=batch_size)

    def _plan(self):
        """Returns the resolved policy, resolving it on the first trace."""
        if self._keras_slim_plan is None:
            self._keras_slim_plan = self.gradient_policy.resolve(self)
        if not self.optimizer.built:
            # Built on every trainable variable, so a later policy may
            # train what this one freezes, and outside the NaN `cond`.
            self.optimizer.build(self.trainable_variables)
        return self._keras_slim_plan

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
class FunctionalSlimModel(SlimModel, Functional):
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
    if not isinstance(model, (keras.Sequential, Functional)):
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
