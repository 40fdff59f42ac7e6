"""The base of `keras_slim.optimizers`: a Keras 3 optimizer running a TF1
training kernel in `update_step`.
"""

import math
import numbers

import keras

from keras_slim import _keras_optimizer
from keras_slim import checks
from keras_slim._backend import tensorflow as tf

_RATE = (
    "a non-negative number, a "
    "keras.optimizers.schedules.LearningRateSchedule or a callable"
)


def check_learning_rate(value):
    """Returns `value` checked: a float >= 0, a schedule or a callable.

    Raises:
        ValueError: for anything else (a negative or non-finite number, a
            bool, a string).
    """
    if callable(value):
        return value
    if not _is_number(value) or not math.isfinite(value) or value < 0:
        raise checks.invalid("learning_rate", value, _RATE)
    return float(value)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def number(name, value, low, high, expected):
    """Returns `value` as a float if it is a finite number in
    `[low, high]` (`None` leaves that side open), else raises a ValueError
    saying `expected`."""
    if not _is_number(value) or not math.isfinite(value):
        raise checks.invalid(name, value, expected)
    if (low is not None and value < low) or (high is not None and value > high):
        raise checks.invalid(name, value, expected)
    return float(value)


def fraction(name, value):
    """A number in [0, 1] (a decay or a momentum)."""
    return number(name, value, 0.0, 1.0, "a number in [0, 1]")


def below_one(name, value):
    """A number in [0, 1) (Adam's betas: 1 would divide by zero)."""
    if _is_number(value) and value == 1:
        raise checks.invalid(name, value, "a number in [0, 1)")
    return number(name, value, 0.0, 1.0, "a number in [0, 1)")


def non_negative(name, value):
    """A finite number >= 0."""
    return number(name, value, 0.0, None, "a non-negative number")


def handle(variable):
    """The resource handle a kernel updates: of the variable itself, or of
    this device's component when `variable` is distributed (a mirrored
    slot inside the strategy's `update()` call)."""
    if isinstance(variable, keras.Variable):
        variable = variable.value
    return variable.handle


def deduplicate(gradient):
    """`(values, indices)` of an `IndexedSlices` with each index once, the
    values of repeated indices summed (TF1's `_deduplicate_indexed_slices`
    step before every `ResourceSparseApply*` kernel)."""
    unique, positions = tf.unique(gradient.indices)
    values = tf.math.unsorted_segment_sum(
        gradient.values, positions, tf.shape(unique)[0]
    )
    return values, unique


class TF1Optimizer(keras.optimizers.Optimizer):
    """A Keras optimizer whose step is a TF1 training kernel.

    Subclasses set `SLOTS` (TF1's slot names, in TF1's order) and
    `_slot_initial_value`, and implement `_apply_dense` and, unless
    `SPARSE` is `False` (a `tf.IndexedSlices` gradient then made dense),
    `_apply_sparse`. `slot(var, name)` and `slot_names()` read the slots
    (not TF1's `get_slot` and `get_slot_names`: TensorFlow's checkpoints
    would take an object with those for a TF1 optimizer and save its slots
    twice).

    Args:
        learning_rate: A float >= 0, a Keras
            `LearningRateSchedule` (evaluated at `iterations`, the step
            about to run, as TF1's decays at `global_step`) or a callable.
        use_locking: Boolean: the kernel's `use_locking`.
        name: The optimizer's name.
        **kwargs: Keras's optimizer arguments (`use_ema`, `ema_momentum`,
            `clipnorm`, `global_clipnorm`, `clipvalue`, `weight_decay`,
            `loss_scale_factor`, `gradient_accumulation_steps`, ...).

    Raises:
        ValueError: for a bad `learning_rate` or `use_locking`, or a bad
            Keras argument.
    """

    #: TF1's slot names, in the order TF1 creates them.
    SLOTS = ()
    #: Whether a `tf.IndexedSlices` gradient runs the sparse kernel.
    SPARSE = True

    def __init__(self, learning_rate, *, use_locking, name, **kwargs):
        super().__init__(
            learning_rate=check_learning_rate(learning_rate),
            name=name,
            **kwargs,
        )
        self.use_locking = checks.boolean("use_locking", use_locking)

    def slot_names(self):
        """The names of the slots this optimizer keeps per variable, TF1's
        (`["rms", "momentum"]`), as TF1's `Optimizer.get_slot_names`."""
        return list(self.SLOTS)

    def _slot_initial_value(self, slot):
        """The initial value of `slot`; TF1 starts most at zero."""
        del slot
        return 0.0

    def build(self, variables):
        """Creates TF1's slots for `variables`, with TF1's initial values.

        Args:
            variables: The model's trainable variables.
        """
        if self.built:
            return
        super().build(variables)
        self._slots = {}
        for slot in self.slot_names():
            initial = self._slot_initial_value(slot)
            self._slots[slot] = self.add_optimizer_variables(
                variables,
                slot,
                initializer=keras.initializers.Constant(initial),
            )

    def slot(self, var, name):
        """The Keras variable holding slot `name` of `var`, as TF1's
        `Optimizer.get_slot(var, name)`.

        Args:
            var: A variable the optimizer was built on, or its component
                on one device (what `update_step` receives).
            name: One of `slot_names()`.

        Returns:
            A `keras.Variable`.
        """
        return self._slots[name][
            _keras_optimizer.optimizer_variable_index(self, var)
        ]

    def update_step(self, gradient, variable, learning_rate):
        """Runs TF1's kernel on `variable` and its slots.

        Args:
            gradient: A dense gradient or a `tf.IndexedSlices`.
            variable: The variable (under a strategy, one device's).
            learning_rate: The rate of this step.
        """
        dtype = variable.dtype
        rate = tf.cast(learning_rate, dtype)
        slots = [
            handle(self.slot(variable, name)) for name in self.slot_names()
        ]
        if isinstance(gradient, tf.IndexedSlices) and not self.SPARSE:
            gradient = tf.math.unsorted_segment_sum(
                gradient.values, gradient.indices, variable.shape[0]
            )
        if isinstance(gradient, tf.IndexedSlices):
            values, indices = deduplicate(gradient)
            self._apply_sparse(
                handle(variable),
                slots,
                rate,
                tf.cast(values, dtype),
                indices,
            )
        else:
            self._apply_dense(
                handle(variable), slots, rate, tf.cast(gradient, dtype)
            )

    def _apply_dense(self, var, slots, rate, grad):
        """Runs the dense kernel (subclasses)."""
        raise NotImplementedError

    def _apply_sparse(self, var, slots, rate, values, indices):
        """Runs the sparse kernel on unique `indices` (subclasses)."""
        raise NotImplementedError

    def _hyper(self, value, like):
        """A hyperparameter as TF1 passes it: a tensor of `like`'s dtype."""
        return tf.cast(value, like.dtype)

    def get_config(self):
        config = super().get_config()
        config["use_locking"] = self.use_locking
        return config
