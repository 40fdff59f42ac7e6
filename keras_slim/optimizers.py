"""TF1's `tf.compat.v1.train` optimizers as Keras 3 optimizers."""

import keras

from keras_slim import _backend
from keras_slim import _tf1_optimizer
from keras_slim import checks
from keras_slim._accumulator_optimizers import Adadelta
from keras_slim._accumulator_optimizers import Adagrad
from keras_slim._accumulator_optimizers import Ftrl
from keras_slim._backend import tensorflow as tf
from keras_slim._tf1_optimizer import TF1Optimizer

__all__ = [
    "Adadelta",
    "Adagrad",
    "Adam",
    "Ftrl",
    "GradientDescent",
    "Momentum",
    "RMSProp",
]

_register = keras.saving.register_keras_serializable(package="keras_slim")


@_register
class GradientDescent(TF1Optimizer):
    """TF1's `tf.compat.v1.train.GradientDescentOptimizer`, in Keras 3.

    `var -= learning_rate * grad` by `ResourceApplyGradientDescent`; no
    slot.

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable.
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"GradientDescent"`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate`, or a bad Keras
            argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    model.compile(optimizer=keras_slim.optimizers.GradientDescent(0.1),
                  loss="mse")
    ```
    """

    def __init__(
        self,
        learning_rate,
        use_locking=False,
        name="GradientDescent",
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.GradientDescent",
            "keras.optimizers.SGD",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )

    def _apply_dense(self, var, slots, rate, grad):
        tf.raw_ops.ResourceApplyGradientDescent(
            var=var, alpha=rate, delta=grad, use_locking=self.use_locking
        )

    def _apply_sparse(self, var, slots, rate, values, indices):
        tf.raw_ops.ResourceScatterAdd(
            resource=var, indices=indices, updates=-values * rate
        )


@_register
class Momentum(TF1Optimizer):
    """TF1's `tf.compat.v1.train.MomentumOptimizer`, in Keras 3.

    `accum = momentum * accum + grad; var -= learning_rate * accum` by
    `ResourceApplyMomentum` (the rate applied after the accumulator, as
    TF1; Keras's `SGD` applies it before). Slot: `momentum`, zeros.

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable.
        momentum: A number in [0, 1].
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"Momentum"`.
        use_nesterov: Boolean: Nesterov momentum, as the kernel computes
            it. Defaults to `False`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate`, a `momentum` outside
            [0, 1], a `use_nesterov` that is not a bool, or a bad Keras
            argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    optimizer = keras_slim.optimizers.Momentum(0.05, 0.9)
    ```
    """

    SLOTS = ("momentum",)

    def __init__(
        self,
        learning_rate,
        momentum,
        use_locking=False,
        name="Momentum",
        use_nesterov=False,
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.Momentum",
            "keras.optimizers.SGD(momentum=..., nesterov=...)",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )
        self.momentum = _tf1_optimizer.fraction("momentum", momentum)
        self.use_nesterov = checks.boolean("use_nesterov", use_nesterov)

    def _apply_dense(self, var, slots, rate, grad):
        (accum,) = slots
        tf.raw_ops.ResourceApplyMomentum(
            var=var,
            accum=accum,
            lr=rate,
            grad=grad,
            momentum=self._hyper(self.momentum, rate),
            use_locking=self.use_locking,
            use_nesterov=self.use_nesterov,
        )

    def _apply_sparse(self, var, slots, rate, values, indices):
        (accum,) = slots
        tf.raw_ops.ResourceSparseApplyMomentum(
            var=var,
            accum=accum,
            lr=rate,
            grad=values,
            indices=indices,
            momentum=self._hyper(self.momentum, rate),
            use_locking=self.use_locking,
            use_nesterov=self.use_nesterov,
        )

    def get_config(self):
        config = super().get_config()
        config.update(momentum=self.momentum, use_nesterov=self.use_nesterov)
        return config


@_register
class RMSProp(TF1Optimizer):
    """TF1's `tf.compat.v1.train.RMSPropOptimizer`, in Keras 3.

    `ms = decay * ms + (1 - decay) * grad**2; mom = momentum * mom +
    learning_rate * grad / sqrt(ms + epsilon); var -= mom` by
    `ResourceApplyRMSProp`, with the mean square `rms` starting at 1.0 and
    epsilon inside the square root, as TF1 (Keras's `RMSprop` starts at 0,
    epsilon outside). Centered: `ResourceApplyCenteredRMSProp`, with the
    mean gradient `mg`. Slots: `rms` (ones), `mg` (zeros, when centered),
    `momentum` (zeros).

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable.
        decay: The discount of the mean square, in [0, 1].
            Defaults to `0.9`.
        momentum: A number in [0, 1]. Defaults to `0.0`.
        epsilon: A number >= 0 added to the mean square.
            Defaults to `1e-10`.
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        centered: Boolean: normalize by the estimated variance.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"RMSProp"`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate` or `epsilon`, a `decay`
            or `momentum` outside [0, 1], a `centered` that is not a bool,
            or a bad Keras argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    # TF-Slim's train_image_classifier defaults.
    optimizer = keras_slim.optimizers.RMSProp(
        0.01, decay=0.9, momentum=0.9, epsilon=1.0
    )
    ```
    """

    SLOTS = ("rms", "mg", "momentum")

    def __init__(
        self,
        learning_rate,
        decay=0.9,
        momentum=0.0,
        epsilon=1e-10,
        use_locking=False,
        centered=False,
        name="RMSProp",
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.RMSProp",
            "keras.optimizers.RMSprop",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )
        self.decay = _tf1_optimizer.fraction("decay", decay)
        self.momentum = _tf1_optimizer.fraction("momentum", momentum)
        self.epsilon = _tf1_optimizer.non_negative("epsilon", epsilon)
        self.centered = checks.boolean("centered", centered)

    def slot_names(self):
        return (
            ["rms", "mg", "momentum"] if self.centered else ["rms", "momentum"]
        )

    def _slot_initial_value(self, slot):
        return 1.0 if slot == "rms" else 0.0

    def _hypers(self, rate):
        return {
            "lr": rate,
            "rho": self._hyper(self.decay, rate),
            "momentum": self._hyper(self.momentum, rate),
            "epsilon": self._hyper(self.epsilon, rate),
            "use_locking": self.use_locking,
        }

    def _apply_dense(self, var, slots, rate, grad):
        if self.centered:
            ms, mg, mom = slots
            tf.raw_ops.ResourceApplyCenteredRMSProp(
                var=var, mg=mg, ms=ms, mom=mom, grad=grad, **self._hypers(rate)
            )
            return
        ms, mom = slots
        tf.raw_ops.ResourceApplyRMSProp(
            var=var, ms=ms, mom=mom, grad=grad, **self._hypers(rate)
        )

    def _apply_sparse(self, var, slots, rate, values, indices):
        sparse = {"grad": values, "indices": indices, **self._hypers(rate)}
        if self.centered:
            ms, mg, mom = slots
            tf.raw_ops.ResourceSparseApplyCenteredRMSProp(
                var=var, mg=mg, ms=ms, mom=mom, **sparse
            )
            return
        ms, mom = slots
        tf.raw_ops.ResourceSparseApplyRMSProp(var=var, ms=ms, mom=mom, **sparse)

    def get_config(self):
        config = super().get_config()
        config.update(
            decay=self.decay,
            momentum=self.momentum,
            epsilon=self.epsilon,
            centered=self.centered,
        )
        return config


@_register
class Adam(TF1Optimizer):
    """TF1's `tf.compat.v1.train.AdamOptimizer`, in Keras 3.

    `ResourceApplyAdam`, with `beta1_power` and `beta2_power` the betas to
    the power of the step being taken (`iterations + 1`), the values TF1's
    two accumulators hold at that step. Slots: `m`, `v`, zeros.

    Args:
        learning_rate: A float >= 0, a Keras `LearningRateSchedule` or a
            callable. Defaults to `0.001`.
        beta1: The decay of the first moment, in [0, 1).
            Defaults to `0.9`.
        beta2: The decay of the second moment, in [0, 1).
            Defaults to `0.999`.
        epsilon: A number >= 0 added to the root of the second moment.
            Defaults to `1e-8`.
        use_locking: Boolean: the kernel's `use_locking`.
            Defaults to `False`.
        name: The optimizer's name. Defaults to `"Adam"`.
        **kwargs: Keras's optimizer arguments (`use_ema`, `clipnorm`,
            ...).

    Raises:
        ValueError: for a negative `learning_rate` or `epsilon`, a beta
            outside [0, 1), or a bad Keras argument.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    optimizer = keras_slim.optimizers.Adam(0.001, beta1=0.8, epsilon=1.0)
    ```
    """

    SLOTS = ("m", "v")
    # TF1's sparse Adam decays every row of m and v: the dense update.
    SPARSE = False

    def __init__(
        self,
        learning_rate=0.001,
        beta1=0.9,
        beta2=0.999,
        epsilon=1e-8,
        use_locking=False,
        name="Adam",
        **kwargs,
    ):
        _backend.require_tensorflow(
            "keras_slim.optimizers.Adam",
            "keras.optimizers.Adam",
            why="TF1's kernels",
        )
        super().__init__(
            learning_rate, use_locking=use_locking, name=name, **kwargs
        )
        self.beta1 = _tf1_optimizer.below_one("beta1", beta1)
        self.beta2 = _tf1_optimizer.below_one("beta2", beta2)
        self.epsilon = _tf1_optimizer.non_negative("epsilon", epsilon)

    def _apply_dense(self, var, slots, rate, grad):
        m, v = slots
        step = tf.cast(self.iterations + 1, rate.dtype)
        beta1 = self._hyper(self.beta1, rate)
        beta2 = self._hyper(self.beta2, rate)
        tf.raw_ops.ResourceApplyAdam(
            var=var,
            m=m,
            v=v,
            beta1_power=tf.pow(beta1, step),
            beta2_power=tf.pow(beta2, step),
            lr=rate,
            beta1=beta1,
            beta2=beta2,
            epsilon=self._hyper(self.epsilon, rate),
            grad=grad,
            use_locking=self.use_locking,
        )

    def get_config(self):
        config = super().get_config()
        config.update(beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon)
        return config
