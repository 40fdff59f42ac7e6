"""`SlimModel`: a `keras.Model` whose train step applies a `GradientPolicy`."""

import keras

from keras_slim import _keras
from keras_slim._step import lr_factors
from keras_slim.policy import GradientPolicy

if keras.backend.backend() == "jax":
    from keras_slim._jax.model import JaxStep as _BackendStep
else:
    from keras_slim._tf_model import TensorFlowStep as _BackendStep

__all__ = ["SlimModel", "wrap"]


@keras.saving.register_keras_serializable(package="keras_slim")
class SlimModel(_BackendStep, keras.Model):
    """A `keras.Model` whose `train_step` applies a `GradientPolicy`.

    The policy acts on gradients already summed across replicas, so `N`
    clones under `MirroredStrategy` train exactly like one device on the
    same global batch (Keras 3's own `clipnorm` clips each replica's
    gradient before the sum). On Keras's JAX backend the step applies the
    same policy to the global batch's gradient, between
    `jax.value_and_grad` and the optimizer, under `keras.distribution`
    (`keras_slim/_jax/step.py`). Use it functionally, by subclassing, or
    turn an existing model into one with `keras_slim.wrap`.

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
