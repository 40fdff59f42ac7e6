"""Every private Keras internal of the optimizers keras_slim touches."""

import keras

from keras_slim._backend import tensorflow as tf

__all__ = [
    "accumulators",
    "before_averages_replace_weights",
    "has_keras_weight_decay",
    "inner_optimizer",
    "loss_scale_optimizer",
    "micro_step_counter",
    "moving_averages",
    "optimizer_variable_index",
    "replace_accumulating_apply",
    "replace_all_reduce_sum",
    "replace_moving_averages",
    "replace_update_step",
    "replace_weight_decay",
    "schedule_at_optimizer_steps",
    "update_without_accumulation",
]


# -- Optimizers ----------------------------------------------------------


def moving_averages(optimizer):
    """The `(variable, moving average)` pairs of an optimizer built with
    `use_ema=True` (`_trainable_variables`, `_model_variables_moving_
    average`: Keras keeps them in two aligned lists), else `[]`."""
    inner = inner_optimizer(optimizer)
    if not getattr(inner, "use_ema", False) or not inner.built:
        return []
    return list(
        zip(inner._trainable_variables, inner._model_variables_moving_average)
    )


def replace_moving_averages(optimizer, *, start, update):
    """Replaces how an optimizer with `use_ema=True` starts and updates its
    moving averages. On this instance.

    `BaseOptimizer.build` makes `_model_variables_moving_average` (zeros,
    one per variable, aligned with `_trainable_variables`), and
    `_backend_apply_gradients` calls `_update_model_variables_moving_average`
    after each update, before `iterations` advances.

    Args:
        optimizer: A Keras optimizer (not a `LossScaleOptimizer`).
        start: `start(variables, averages)`, run eagerly once the averages
            exist (now, for a built optimizer that took no step).
        update: `update(optimizer, variables, averages)`, in place of
            Keras's update.
    """
    if "_update_model_variables_moving_average" in vars(optimizer):
        return
    original = type(optimizer).build.__get__(optimizer)

    def begin():
        with tf.init_scope():
            start(
                optimizer._trainable_variables,
                optimizer._model_variables_moving_average,
            )

    def build(variables):
        original(variables)
        begin()

    def update_averages(variables):
        update(optimizer, variables, optimizer._model_variables_moving_average)

    # Bypass trackable __setattr__: these are methods, not state.
    vars(optimizer)["build"] = build
    vars(optimizer)["_update_model_variables_moving_average"] = update_averages
    if optimizer.built and int(optimizer.iterations.numpy()) == 0:
        begin()


def before_averages_replace_weights(optimizer, capture):
    """Calls `capture(variables)` each time Keras is about to write an
    optimizer's moving averages into the model's weights.

    With `use_ema=True`, Keras's `fit` calls the optimizer's
    `finalize_variable_values` before `on_train_end`, replacing the
    training weights by their averages; a checkpoint saved then must
    still hold the training weights. Set on the instance only.

    Args:
        optimizer: A Keras optimizer.
        capture: A function of the list of variables about to change.

    Returns:
        A function of no argument that undoes this.
    """
    original = optimizer.finalize_variable_values

    def finalize_variable_values(var_list):
        capture(var_list)
        return original(var_list)

    # On this instance, not state to track.
    vars(optimizer)["finalize_variable_values"] = finalize_variable_values

    def undo():
        vars(optimizer).pop("finalize_variable_values", None)

    return undo


def optimizer_variable_index(optimizer, variable):
    """The position of `variable` among those `optimizer` was built on
    (`BaseOptimizer._get_variable_index`, what Keras's own optimizers call
    in `update_step`): under a strategy `variable` is one device's
    component, which `TFOptimizer._var_key` maps to its container."""
    return optimizer._get_variable_index(variable)


def replace_all_reduce_sum(optimizer, make_replacement):
    """Replaces, on this optimizer instance only, the cross-replica sum its
    `apply` makes (`TFOptimizer._all_reduce_sum_gradients`).

    Args:
        optimizer: A Keras 3 optimizer (TensorFlow backend), not a
            `LossScaleOptimizer` (pass its `inner_optimizer`).
        make_replacement: A function of Keras's own method (bound to
            `optimizer`) returning the replacement, a function of
            `grads_and_vars`.

    Returns:
        The replacement, or the one already installed.
    """
    return _replace_method(
        optimizer, "_all_reduce_sum_gradients", make_replacement
    )


def replace_update_step(optimizer, make_replacement):
    """Replaces, on this optimizer instance only, the per-variable step
    of its `apply`: `update_step(gradient, variable, learning_rate)`,
    which `TFOptimizer._distributed_tf_update_step` calls with the step's
    learning rate (evaluated once per `apply`, a schedule at `iterations`)
    and, under a strategy, one device's component of `variable`.

    Args:
        optimizer: A Keras 3 optimizer (TensorFlow backend), not a
            `LossScaleOptimizer` (pass its `inner_optimizer`).
        make_replacement: A function of the optimizer's own bound
            `update_step` returning the replacement, of the same arguments.

    Returns:
        The replacement, or the one already installed.
    """
    return _replace_method(optimizer, "update_step", make_replacement)


def replace_weight_decay(optimizer, make_replacement):
    """Replaces, on this optimizer instance only, the decoupled weight
    decay its `apply` makes before the update step
    (`TFOptimizer._apply_weight_decay(variables)`, which reads the
    optimizer's `weight_decay` and `learning_rate` inside the strategy's
    update, so in the merge call's thread).

    Args:
        optimizer: A Keras 3 optimizer (TensorFlow backend), not a
            `LossScaleOptimizer`.
        make_replacement: A function of the optimizer's own bound
            `_apply_weight_decay` returning the replacement, a function of
            `variables`.

    Returns:
        The replacement, or the one already installed.
    """
    return _replace_method(optimizer, "_apply_weight_decay", make_replacement)


def has_keras_weight_decay(optimizer):
    """Whether `optimizer`'s decoupled weight decay is Keras's own (the
    backend optimizer's `_apply_weight_decay`, `TFOptimizer`'s on
    TensorFlow: `var -= var * weight_decay * learning_rate`), not an
    override (Muon's reads other attributes)."""
    return type(optimizer)._apply_weight_decay is (
        keras.optimizers.Optimizer._apply_weight_decay
    )


def _replace_method(optimizer, name, make_replacement):
    installed = vars(optimizer).get(name)
    if installed is not None:
        return installed
    original = getattr(type(optimizer), name).__get__(optimizer)
    replacement = make_replacement(original)
    # Bypass trackable __setattr__: this is no state to checkpoint.
    vars(optimizer)[name] = replacement
    return replacement


# -- The loss-scale wrapper ---------------------------------------------


def inner_optimizer(optimizer):
    """The optimizer that updates the variables: a `LossScaleOptimizer`'s
    `inner_optimizer`, else `optimizer` itself (`None` stays `None`).

    The one place keras_slim unwraps Keras's loss-scale wrapper."""
    return getattr(optimizer, "inner_optimizer", optimizer)


def loss_scale_optimizer(optimizer):
    """`optimizer` when it is Keras's loss-scale wrapper (it has an
    `inner_optimizer`), else `None`."""
    if hasattr(optimizer, "inner_optimizer"):
        return optimizer
    return None


# -- Gradient accumulation ----------------------------------------------


def micro_step_counter(optimizer):
    """The variable counting every `apply` of an optimizer
    (`BaseOptimizer._iterations`): its public `iterations` is this one
    divided by `gradient_accumulation_steps` when that is set."""
    return inner_optimizer(optimizer)._iterations


def configured_learning_rate(optimizer):
    """What the optimizer was given as its learning rate: a schedule, a
    variable or a callable (`BaseOptimizer._learning_rate`; the public
    `learning_rate` evaluates it, reading the variables that Keras's JAX
    `fit` holds outside the model during an epoch)."""
    return inner_optimizer(optimizer)._learning_rate


def accumulators(optimizer, variables):
    """The gradient accumulators Keras made for `variables` when it built
    an optimizer with `gradient_accumulation_steps`
    (`BaseOptimizer._accumulated_gradients`, aligned with the variables
    the optimizer was built on: `_get_variable_index`)."""
    return [
        optimizer._accumulated_gradients[optimizer._get_variable_index(v)]
        for v in variables
    ]


def replace_accumulating_apply(optimizer, active):
    """Makes `optimizer.apply` update at once, without Keras's own
    accumulation, while `active()` is true.

    Replaces, on this instance only, `BaseOptimizer._backend_apply_
    gradients`, whose accumulating branch would average again and
    `cond`s over `merge_call`s a `MirroredStrategy` cannot trace.

    Args:
        optimizer: A Keras 3 optimizer with `gradient_accumulation_steps`.
        active: A function of no argument.
    """
    if "_backend_apply_gradients" in vars(optimizer):
        return
    original = type(optimizer)._backend_apply_gradients.__get__(optimizer)

    def backend_apply_gradients(grads, variables):
        if not active():
            return original(grads, variables)
        return update_without_accumulation(optimizer, grads, variables)

    # Bypass trackable __setattr__: this is no state to checkpoint.
    vars(optimizer)["_backend_apply_gradients"] = backend_apply_gradients


def update_without_accumulation(optimizer, grads, variables):
    """The update `BaseOptimizer._backend_apply_gradients` makes without
    `gradient_accumulation_steps`: Keras's clipping, weight decay, the
    update step, then the moving averages (`use_ema`).

    Args:
        optimizer: A Keras 3 optimizer.
        grads: The gradients, one per variable.
        variables: The variables to update.
    """
    grads = optimizer._clip_gradients(grads)
    optimizer._apply_weight_decay(variables)
    optimizer._backend_update_step(grads, variables, optimizer.learning_rate)
    if not optimizer.use_ema:
        return
    optimizer._update_model_variables_moving_average(
        optimizer._trainable_variables
    )
    if optimizer.ema_overwrite_frequency:
        overwrite = (
            optimizer.iterations + 1
        ) % optimizer.ema_overwrite_frequency == 0
        if keras.backend.backend() == "jax":
            # A selection, as JaxOptimizer's: a branch cannot assign.
            for variable, average in zip(
                optimizer._trainable_variables,
                optimizer._model_variables_moving_average,
            ):
                variable.assign(
                    keras.ops.where(overwrite, average.value, variable.value)
                )
            return
        tf.cond(
            overwrite,
            lambda: optimizer._overwrite_model_variables_with_average_value(
                optimizer._trainable_variables
            ),
            lambda: None,
        )


def schedule_at_optimizer_steps(optimizer):
    """Makes a learning-rate schedule read at `iterations` (optimizer
    steps) rather than at Keras's count of `apply` calls
    (`BaseOptimizer._get_current_learning_rate` reads `_iterations`,
    micro-steps under `gradient_accumulation_steps`). On this instance.

    Args:
        optimizer: A Keras 3 optimizer.
    """
    schedule = optimizer._learning_rate
    if not isinstance(
        schedule, keras.optimizers.schedules.LearningRateSchedule
    ):
        return

    def current_learning_rate():
        return schedule(optimizer.iterations)

    vars(optimizer)["_get_current_learning_rate"] = current_learning_rate
