"""train_image_classifier's optimizer and learning-rate settings, in Keras.

The same choices and defaults as TF-Slim's `_configure_optimizer` and
`_configure_learning_rate`, each mapped to its Keras 3 counterpart.
"""

import keras

OPTIMIZERS = (
    "adadelta",
    "adagrad",
    "adam",
    "ftrl",
    "momentum",
    "rmsprop",
    "sgd",
)
DECAY_TYPES = ("exponential", "fixed", "polynomial")


def learning_rate(
    decay_type,
    learning_rate,
    *,
    num_samples_per_epoch,
    batch_size,
    num_epochs_per_decay,
    decay_factor,
    end_learning_rate,
    replicas_to_aggregate=1,
):
    """A learning rate or schedule, as slim's `_configure_learning_rate`.

    Decay steps are `int(num_batches_per_epoch * num_epochs_per_decay /
    replicas_to_aggregate)` with `num_batches_per_epoch =
    num_samples_per_epoch / batch_size`, as inception's distributed train
    computes them: each synchronous step of `replicas_to_aggregate`
    workers consumes that many batches, so the schedule decays after the
    same number of epochs whatever the number of workers. With one
    replica, TF-Slim's `int(num_samples_per_epoch * num_epochs_per_decay /
    batch_size)` (`batch_size` per clone).

    Args:
        decay_type: One of `DECAY_TYPES`.
        learning_rate: The initial learning rate.
        num_samples_per_epoch: Examples in the training set.
        batch_size: Examples per clone and step.
        num_epochs_per_decay: Epochs between decays.
        decay_factor: Factor of the exponential decay.
        end_learning_rate: Where the polynomial decay ends.
        replicas_to_aggregate: Positive integer: the workers whose
            gradients each step aggregates.
            Defaults to `1`.

    Returns:
        A float or a `keras.optimizers.schedules.LearningRateSchedule`.
    """
    batches_per_epoch = num_samples_per_epoch / batch_size
    decay_steps = max(
        1,
        int(batches_per_epoch * num_epochs_per_decay / replicas_to_aggregate),
    )
    if decay_type == "exponential":
        return keras.optimizers.schedules.ExponentialDecay(
            learning_rate, decay_steps, decay_factor, staircase=True
        )
    if decay_type == "polynomial":
        return keras.optimizers.schedules.PolynomialDecay(
            learning_rate, decay_steps, end_learning_rate, power=1.0
        )
    return learning_rate


#: TF-Slim's optimizer flags: name -> (default, help), as its
#: train_image_classifier.py defines them.
OPTIMIZER_FLAGS = {
    "opt_epsilon": (1.0, "Epsilon term for the optimizer."),
    "adadelta_rho": (0.95, "The decay rate for adadelta."),
    "adagrad_initial_accumulator_value": (
        0.1,
        "Starting value for the AdaGrad accumulators.",
    ),
    "adam_beta1": (
        0.9,
        "The exponential decay rate for the 1st moment estimates.",
    ),
    "adam_beta2": (
        0.999,
        "The exponential decay rate for the 2nd moment estimates.",
    ),
    "ftrl_learning_rate_power": (-0.5, "The learning rate power."),
    "ftrl_initial_accumulator_value": (
        0.1,
        "Starting value for the FTRL accumulators.",
    ),
    "ftrl_l1": (0.0, "The FTRL l1 regularization strength."),
    "ftrl_l2": (0.0, "The FTRL l2 regularization strength."),
    "momentum": (
        0.9,
        "The momentum for the MomentumOptimizer and RMSPropOptimizer.",
    ),
    "rmsprop_momentum": (0.9, "Momentum."),
    "rmsprop_decay": (0.9, "Decay term for RMSProp."),
}


def _settings(given):
    unknown = sorted(set(given) - set(OPTIMIZER_FLAGS))
    if unknown:
        raise TypeError(
            f"Unknown optimizer settings {unknown}. Expected TF-Slim's flag "
            f"names: {sorted(OPTIMIZER_FLAGS)}."
        )
    return {
        **{name: default for name, (default, _) in OPTIMIZER_FLAGS.items()},
        **given,
    }


def optimizer(name, learning_rate, *, moving_average_decay=None, **settings):
    """An optimizer, as slim's `_configure_optimizer` builds it.

    Args:
        name: One of `OPTIMIZERS`.
        learning_rate: A float or a schedule.
        moving_average_decay: Keep an exponential moving average of the
            weights (Keras's `use_ema`), as slim's `--moving_average_decay`.
            Defaults to `None`.
        **settings: TF-Slim's optimizer flags by name (`OPTIMIZER_FLAGS`:
            `opt_epsilon`, `adam_beta1`, `rmsprop_decay`, ...); each
            defaults to TF-Slim's default.

    Returns:
        A `keras.optimizers.Optimizer`.

    Raises:
        TypeError: for a setting that is not one of `OPTIMIZER_FLAGS`.
        ValueError: for a `name` not in `OPTIMIZERS`.

    Example:
    ```python
    adam = optimizer("adam", 0.001, adam_beta1=0.8, opt_epsilon=1e-7)
    ```
    """
    f = _settings(settings)
    ema = {}
    if moving_average_decay:
        ema = {"use_ema": True, "ema_momentum": moving_average_decay}
    if name == "adadelta":
        return keras.optimizers.Adadelta(
            learning_rate,
            rho=f["adadelta_rho"],
            epsilon=f["opt_epsilon"],
            **ema,
        )
    if name == "adagrad":
        return keras.optimizers.Adagrad(
            learning_rate,
            initial_accumulator_value=f["adagrad_initial_accumulator_value"],
            **ema,
        )
    if name == "adam":
        return keras.optimizers.Adam(
            learning_rate,
            beta_1=f["adam_beta1"],
            beta_2=f["adam_beta2"],
            epsilon=f["opt_epsilon"],
            **ema,
        )
    if name == "ftrl":
        return keras.optimizers.Ftrl(
            learning_rate,
            learning_rate_power=f["ftrl_learning_rate_power"],
            initial_accumulator_value=f["ftrl_initial_accumulator_value"],
            l1_regularization_strength=f["ftrl_l1"],
            l2_regularization_strength=f["ftrl_l2"],
            **ema,
        )
    if name == "momentum":
        return keras.optimizers.SGD(
            learning_rate, momentum=f["momentum"], **ema
        )
    if name == "rmsprop":
        return keras.optimizers.RMSprop(
            learning_rate,
            rho=f["rmsprop_decay"],
            momentum=f["rmsprop_momentum"],
            epsilon=f["opt_epsilon"],
            **ema,
        )
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate, **ema)
    raise ValueError(
        f"Unknown optimizer {name!r}. Expected one of {OPTIMIZERS}."
    )
