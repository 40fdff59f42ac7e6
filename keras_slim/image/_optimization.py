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


def optimizer(
    name, learning_rate, *, epsilon=1.0, momentum=0.9, moving_average_decay=None
):
    """An optimizer, as slim's `_configure_optimizer` (its defaults).

    Args:
        name: One of `OPTIMIZERS`.
        learning_rate: A float or a schedule.
        epsilon: slim's `--opt_epsilon` (adadelta, adam, rmsprop).
        momentum: slim's `--momentum` (momentum, rmsprop).
        moving_average_decay: Keep an exponential moving average of the
            weights (Keras's `use_ema`), as slim's `--moving_average_decay`.

    Returns:
        A `keras.optimizers.Optimizer`.
    """
    ema = {}
    if moving_average_decay:
        ema = {"use_ema": True, "ema_momentum": moving_average_decay}
    if name == "adadelta":
        return keras.optimizers.Adadelta(
            learning_rate, rho=0.95, epsilon=epsilon, **ema
        )
    if name == "adagrad":
        return keras.optimizers.Adagrad(
            learning_rate, initial_accumulator_value=0.1, **ema
        )
    if name == "adam":
        return keras.optimizers.Adam(
            learning_rate, beta_1=0.9, beta_2=0.999, epsilon=epsilon, **ema
        )
    if name == "ftrl":
        return keras.optimizers.Ftrl(
            learning_rate,
            learning_rate_power=-0.5,
            initial_accumulator_value=0.1,
            l1_regularization_strength=0.0,
            l2_regularization_strength=0.0,
            **ema,
        )
    if name == "momentum":
        return keras.optimizers.SGD(learning_rate, momentum=momentum, **ema)
    if name == "rmsprop":
        return keras.optimizers.RMSprop(
            learning_rate, rho=0.9, momentum=momentum, epsilon=epsilon, **ema
        )
    if name == "sgd":
        return keras.optimizers.SGD(learning_rate, **ema)
    raise ValueError(
        f"Unknown optimizer {name!r}. Expected one of {OPTIMIZERS}."
    )
