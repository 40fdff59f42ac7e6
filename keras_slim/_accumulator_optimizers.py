"""TF1's Adagrad, Adadelta and Ftrl: the accumulator family, in Keras 3."""

import keras

from keras_slim import _backend
from keras_slim import _tf1_optimizer
from keras_slim import checks
from keras_slim._backend import tensorflow as tf
from keras_slim._tf1_optimizer import TF1Optimizer

__all__ = ["Adadelta", "Adagrad", "Ftrl"]

_register = keras.saving.register_keras_serializable(package="keras_slim")


@_register
class Adagrad(TF1Optimizer):
    """TF1's `tf.compat.v1.train.AdagradOptimizer`, in Keras 3.

    `accum += grad**2; var -= learning_rate * grad / sqrt(accum)` by
    `ResourceApplyAdagrad`. Slot: `accumulator`, starting at
    `initial_accumulator_value`.

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable.
        initial_accumulator_value: A positive number.
            Defaults to `0.1`.
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"Adagrad"`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate`, an
            `initial_accumulator_value` that is not positive, or a bad
            Keras argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    optimizer = keras_slim.optimizers.Adagrad(
        0.1, initial_accumulator_value=0.1
    )
    ```
    """

    SLOTS = ("accumulator",)

    def __init__(
        self,
        learning_rate,
        initial_accumulator_value=0.1,
        use_locking=False,
        name="Adagrad",
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.Adagrad",
            "keras.optimizers.Adagrad",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )
        value = _tf1_optimizer.non_negative(
            "initial_accumulator_value", initial_accumulator_value
        )
        if value == 0:
            raise checks.invalid(
                "initial_accumulator_value", value, "a positive number"
            )
        self.initial_accumulator_value = value

    def _slot_initial_value(self, slot):
        return self.initial_accumulator_value

    def _apply_dense(self, var, slots, rate, grad):
        (accum,) = slots
        tf.raw_ops.ResourceApplyAdagrad(
            var=var,
            accum=accum,
            lr=rate,
            grad=grad,
            use_locking=self.use_locking,
        )

    def _apply_sparse(self, var, slots, rate, values, indices):
        (accum,) = slots
        tf.raw_ops.ResourceSparseApplyAdagrad(
            var=var,
            accum=accum,
            lr=rate,
            grad=values,
            indices=indices,
            use_locking=self.use_locking,
        )

    def get_config(self):
        config = super().get_config()
        config["initial_accumulator_value"] = self.initial_accumulator_value
        return config


@_register
class Adadelta(TF1Optimizer):
    """TF1's `tf.compat.v1.train.AdadeltaOptimizer`, in Keras 3.

    `ResourceApplyAdadelta`. Slots: `accum`, `accum_update`, zeros.

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable. Defaults to `0.001`.
        rho: The decay rate, in [0, 1]. Defaults to `0.95`.
        epsilon: A number >= 0. Defaults to `1e-8`.
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"Adadelta"`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate` or `epsilon`, a `rho`
            outside [0, 1], or a bad Keras argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    optimizer = keras_slim.optimizers.Adadelta(0.01, rho=0.95, epsilon=1.0)
    ```
    """

    SLOTS = ("accum", "accum_update")

    def __init__(
        self,
        learning_rate=0.001,
        rho=0.95,
        epsilon=1e-8,
        use_locking=False,
        name="Adadelta",
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.Adadelta",
            "keras.optimizers.Adadelta",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )
        self.rho = _tf1_optimizer.fraction("rho", rho)
        self.epsilon = _tf1_optimizer.non_negative("epsilon", epsilon)

    def _hypers(self, rate):
        return {
            "lr": rate,
            "rho": self._hyper(self.rho, rate),
            "epsilon": self._hyper(self.epsilon, rate),
            "use_locking": self.use_locking,
        }

    def _apply_dense(self, var, slots, rate, grad):
        accum, update = slots
        tf.raw_ops.ResourceApplyAdadelta(
            var=var,
            accum=accum,
            accum_update=update,
            grad=grad,
            **self._hypers(rate),
        )

    def _apply_sparse(self, var, slots, rate, values, indices):
        accum, update = slots
        tf.raw_ops.ResourceSparseApplyAdadelta(
            var=var,
            accum=accum,
            accum_update=update,
            grad=values,
            indices=indices,
            **self._hypers(rate),
        )

    def get_config(self):
        config = super().get_config()
        config.update(rho=self.rho, epsilon=self.epsilon)
        return config


@_register
class Ftrl(TF1Optimizer):
    """TF1's `tf.compat.v1.train.FtrlOptimizer`, in Keras 3.

    `ResourceApplyFtrl` (`ResourceApplyFtrlV2` with an L2 shrinkage), the
    L2 strength adjusted by `beta / (2 * learning_rate)` as TF1. Slots:
    `accum`, starting at `initial_accumulator_value`, and `linear`, zeros.
    TF1's `accum_name` and `linear_name`, which only named its slot
    variables, are not taken.

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable.
        learning_rate_power: A number <= 0. Defaults to `-0.5`.
        initial_accumulator_value: A number >= 0. Defaults to `0.1`.
        l1_regularization_strength: A number >= 0. Defaults to `0.0`.
        l2_regularization_strength: A number >= 0. Defaults to `0.0`.
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"Ftrl"`.
        l2_shrinkage_regularization_strength: A number >= 0.
            Defaults to `0.0`.
        beta: A number >= 0, or `None` for 0. Defaults to `None`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate`, a positive
            `learning_rate_power`, a negative accumulator value, strength
            or `beta`, or a bad Keras argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    optimizer = keras_slim.optimizers.Ftrl(
        0.1, l1_regularization_strength=0.01
    )
    ```
    """

    SLOTS = ("accum", "linear")

    def __init__(
        self,
        learning_rate,
        learning_rate_power=-0.5,
        initial_accumulator_value=0.1,
        l1_regularization_strength=0.0,
        l2_regularization_strength=0.0,
        use_locking=False,
        name="Ftrl",
        *,
        l2_shrinkage_regularization_strength=0.0,
        beta=None,
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.Ftrl",
            "keras.optimizers.Ftrl",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )
        check = _tf1_optimizer.non_negative
        self.learning_rate_power = _tf1_optimizer.number(
            "learning_rate_power",
            learning_rate_power,
            None,
            0.0,
            "a number <= 0",
        )
        self.initial_accumulator_value = check(
            "initial_accumulator_value", initial_accumulator_value
        )
        self.l1_regularization_strength = check(
            "l1_regularization_strength", l1_regularization_strength
        )
        self.l2_regularization_strength = check(
            "l2_regularization_strength", l2_regularization_strength
        )
        self.l2_shrinkage_regularization_strength = check(
            "l2_shrinkage_regularization_strength",
            l2_shrinkage_regularization_strength,
        )
        self.beta = None if beta is None else check("beta", beta)

    def _slot_initial_value(self, slot):
        return self.initial_accumulator_value if slot == "accum" else 0.0

    def _hypers(self, rate):
        l2 = self._hyper(self.l2_regularization_strength, rate)
        if self.beta:
            beta = self._hyper(self.beta, rate)
            l2 += beta / (2.0 * tf.maximum(rate, 1e-36))
        hypers = {
            "lr": rate,
            "l1": self._hyper(self.l1_regularization_strength, rate),
            "l2": l2,
            "lr_power": self._hyper(self.learning_rate_power, rate),
            "use_locking": self.use_locking,
        }
        if self.l2_shrinkage_regularization_strength > 0:
            hypers["l2_shrinkage"] = self._hyper(
                self.l2_shrinkage_regularization_strength, rate
            )
        return hypers

    def _apply_dense(self, var, slots, rate, grad):
        accum, linear = slots
        hypers = self._hypers(rate)
        kernel = tf.raw_ops.ResourceApplyFtrl
        if "l2_shrinkage" in hypers:
            kernel = tf.raw_ops.ResourceApplyFtrlV2
        kernel(var=var, accum=accum, linear=linear, grad=grad, **hypers)

    def _apply_sparse(self, var, slots, rate, values, indices):
        accum, linear = slots
        hypers = self._hypers(rate)
        kernel = tf.raw_ops.ResourceSparseApplyFtrl
        if "l2_shrinkage" in hypers:
            kernel = tf.raw_ops.ResourceSparseApplyFtrlV2
        kernel(
            var=var,
            accum=accum,
            linear=linear,
            grad=values,
            indices=indices,
            **hypers,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            learning_rate_power=self.learning_rate_power,
            initial_accumulator_value=self.initial_accumulator_value,
            l1_regularization_strength=self.l1_regularization_strength,
            l2_regularization_strength=self.l2_regularization_strength,
            l2_shrinkage_regularization_strength=(
                self.l2_shrinkage_regularization_strength
            ),
            beta=self.beta,
        )
        return config


# Their public home: Keras's serialization records it as their `module`.
for _cls in (Adagrad, Adadelta, Ftrl):
    _cls.__module__ = "keras_slim.optimizers"
del _cls
