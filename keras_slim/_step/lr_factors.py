"""Learning-rate factors: one optimizer at a per-variable learning rate
(the Apply stage's, for `lr_multipliers` and `layer_decay`).
"""

import contextlib
import threading
import weakref

from keras import ops

from keras_slim import _keras_optimizer

_LOCK = threading.Lock()


class _Scaling:
    """One optimizer's multipliers while `scaled()` is active.

    Shared by the replica threads of a `MirroredStrategy` step, which enter
    the context with the same table; a counter, as `apply.presummed`.
    """

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.depth = 0
        self.table = {}
        self.base_decay = None

    def multiplier(self, variable):
        """The multiplier of `variable` (or one device's component of it),
        `None` outside the context or without one."""
        if not self.depth or not self.table:
            return None
        index = _keras_optimizer.optimizer_variable_index(
            self.optimizer, variable
        )
        return self.table.get(index)


def check(optimizer):
    """Raises if lr multipliers cannot be exact with `optimizer`.

    Args:
        optimizer: The model's Keras optimizer.

    Raises:
        ValueError: if the optimizer has a weight decay of its own kind
            (not Keras's decoupled `var -= var * weight_decay * lr`), such
            as Muon's, which the multipliers would not scale.
    """
    inner = _keras_optimizer.inner_optimizer(optimizer)
    if (
        inner.weight_decay is not None
        and not _keras_optimizer.has_keras_weight_decay(inner)
    ):
        raise ValueError(
            "GradientPolicy's `lr_multipliers` and `layer_decay` scale "
            "Keras's decoupled weight decay, but optimizer "
            f"{type(inner).__name__} (weight_decay={inner.weight_decay}) "
            "applies a weight decay of its own. Use it without "
            "`weight_decay`, or an optimizer such as keras.optimizers.AdamW."
        )


def _update_step(state):
    def make(original):
        def update_step(gradient, variable, learning_rate):
            multiplier = state.multiplier(variable)
            if multiplier is not None:
                learning_rate = ops.convert_to_tensor(learning_rate) * (
                    multiplier
                )
            return original(gradient, variable, learning_rate)

        return update_step

    return make


def _weight_decay(state):
    def make(original):
        def apply_weight_decay(variables):
            if not state.depth or not state.table:
                return original(variables)
            if state.base_decay is None:
                return original(variables)
            groups = {}
            for variable in variables:
                multiplier = state.multiplier(variable) or 1.0
                groups.setdefault(multiplier, []).append(variable)
            # Every replica thread writes the same value before the
            # group's merge call, whose function reads it.
            for multiplier, group in groups.items():
                state.optimizer.weight_decay = state.base_decay * multiplier
                original(group)
            state.optimizer.weight_decay = state.base_decay

        return apply_weight_decay

    return make


# One `_Scaling` per optimizer instance, for the optimizer's life.
_STATES = weakref.WeakKeyDictionary()


def install(optimizer):
    """Lets `scaled()` scale `optimizer`'s learning rate per variable.

    Idempotent; outside `scaled()` the optimizer runs as before.

    Args:
        optimizer: A Keras 3 optimizer, possibly a `LossScaleOptimizer`.

    Returns:
        The optimizer's `_Scaling` state.
    """
    inner = _keras_optimizer.inner_optimizer(optimizer)
    state = _STATES.get(inner)
    if state is None:
        state = _Scaling(inner)
        _keras_optimizer.replace_update_step(inner, _update_step(state))
        _keras_optimizer.replace_weight_decay(inner, _weight_decay(state))
        # Kept beside the optimizer, not on it: no state to checkpoint.
        _STATES[inner] = state
    return state


@contextlib.contextmanager
def scaled(optimizer, variables, multipliers):
    """Context in which `optimizer.apply` scales the learning rate per
    variable.

    Args:
        optimizer: The model's Keras optimizer, built on `variables`.
        variables: The variables the step applies.
        multipliers: One float or `None` (no scaling) per variable, or
            `None` for none at all: the context then does nothing.

    Yields:
        Nothing.
    """
    if multipliers is None:
        yield
        return
    state = install(optimizer)
    inner = state.optimizer
    table = {
        _keras_optimizer.optimizer_variable_index(inner, v): m
        for v, m in zip(variables, multipliers)
        if m is not None
    }
    with _LOCK:
        if state.depth == 0:
            state.table = table
            state.base_decay = inner.weight_decay
        state.depth += 1
    try:
        yield
    finally:
        with _LOCK:
            state.depth -= 1
            if state.depth == 0:
                inner.weight_decay = state.base_decay
                state.table = {}
