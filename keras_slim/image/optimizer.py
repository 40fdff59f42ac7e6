"""train_image_classifier's optimizer, from TF-Slim's `--optimizer` flags."""

from keras_slim import checks
from keras_slim import moving_averages
from keras_slim import optimizers
from keras_slim.image._flag_defaults import with_defaults

__all__ = [
    "OPTIMIZERS",
    "OPTIMIZER_FLAGS",
    "configure_optimizer",
    "describe_optimizer",
]

#: TF-Slim's `--optimizer` values.
OPTIMIZERS = (
    "adadelta",
    "adagrad",
    "adam",
    "ftrl",
    "momentum",
    "rmsprop",
    "sgd",
)

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
    # Not TF-Slim's: Keras's optimizer argument, run by SlimModel.
    "gradient_accumulation_steps": (
        1,
        "The batches whose mean gradient makes one optimizer step (and "
        "one global step); 1 steps on every batch.",
    ),
}

_OPTIMIZER_DEFAULTS = {
    "optimizer": "rmsprop",
    "moving_average_decay": None,
    **{name: default for name, (default, _) in OPTIMIZER_FLAGS.items()},
}


def configure_optimizer(learning_rate, **flags):
    """The optimizer TF-Slim's `_configure_optimizer` builds, in Keras 3.

    One of `keras_slim.optimizers`, with the arguments TF-Slim gives its
    `tf.compat.v1.train` optimizer (see the module's table): `adam` is
    `Adam(learning_rate, beta1=adam_beta1, beta2=adam_beta2,
    epsilon=opt_epsilon)`, `rmsprop` is `RMSProp(learning_rate,
    decay=rmsprop_decay, momentum=rmsprop_momentum, epsilon=opt_epsilon)`,
    `momentum` is `Momentum(learning_rate, momentum=momentum)`.

    Args:
        learning_rate: A float, or a schedule (what
            `learning_rate.configure_learning_rate(..., None)`
            returns).
        **flags: TF-Slim's flags by name, each defaulting to TF-Slim's
            default: `optimizer` (one of `OPTIMIZERS`, default
            `"rmsprop"`), the optimizer flags of `OPTIMIZER_FLAGS`
            (`opt_epsilon`, `adam_beta1`, `rmsprop_decay`, ...), and
            `moving_average_decay` (a float keeps a moving average of the
            weights as TF-Slim's `ExponentialMovingAverage(decay,
            num_updates=global_step)`: Keras's `use_ema` with that
            `ema_momentum`, warmed up by
            `keras_slim.moving_averages.warm_up`; default `None`).

    Returns:
        A `keras_slim.optimizers` optimizer.

    Raises:
        TypeError: for a flag name TF-Slim's helper does not read.
        ValueError: for an `optimizer` not in `OPTIMIZERS`, or a flag
            value the optimizer refuses (a negative rate, a decay outside
            [0, 1], ...).

    Example:
    ```python
    from keras_slim.image import learning_rate
    from keras_slim.image import optimizer as optimizer_lib

    rate = learning_rate.configure_learning_rate(1281167, None)
    optimizer = optimizer_lib.configure_optimizer(rate, optimizer="adam")
    ```
    """
    f = with_defaults(flags, _OPTIMIZER_DEFAULTS, "configure_optimizer")
    cls, arguments = _arguments(f)
    fixed = _OPTIMIZER_ARGUMENTS[f["optimizer"]][2]
    ema = {}
    if f["moving_average_decay"] is not None:
        ema = {"use_ema": True, "ema_momentum": f["moving_average_decay"]}
    k = f["gradient_accumulation_steps"]
    if not checks.is_int(k) or k < 1:
        raise checks.invalid(
            "gradient_accumulation_steps", k, "a positive integer"
        )
    if k > 1:
        ema["gradient_accumulation_steps"] = int(k)
    values = {arg: value for arg, (_, value) in arguments.items()}
    optimizer = cls(learning_rate, **values, **fixed, **ema)
    if f["moving_average_decay"] is not None:
        # TF-Slim's ExponentialMovingAverage(decay, global_step).
        moving_averages.warm_up(optimizer)
    return optimizer


#: Each `--optimizer`: its `keras_slim.optimizers` class, the flag of each
#: argument TF-Slim gives its TF1 class, and fixed arguments. Building and
#: `describe_optimizer` read this one table.
_OPTIMIZER_ARGUMENTS = {
    "adadelta": (
        optimizers.Adadelta,
        {"rho": "adadelta_rho", "epsilon": "opt_epsilon"},
        {},
    ),
    "adagrad": (
        optimizers.Adagrad,
        {"initial_accumulator_value": "adagrad_initial_accumulator_value"},
        {},
    ),
    "adam": (
        optimizers.Adam,
        {
            "beta1": "adam_beta1",
            "beta2": "adam_beta2",
            "epsilon": "opt_epsilon",
        },
        {},
    ),
    "ftrl": (
        optimizers.Ftrl,
        {
            "learning_rate_power": "ftrl_learning_rate_power",
            "initial_accumulator_value": "ftrl_initial_accumulator_value",
            "l1_regularization_strength": "ftrl_l1",
            "l2_regularization_strength": "ftrl_l2",
        },
        {},
    ),
    "momentum": (
        optimizers.Momentum,
        {"momentum": "momentum"},
        {"name": "Momentum"},
    ),
    "rmsprop": (
        optimizers.RMSProp,
        {
            "decay": "rmsprop_decay",
            "momentum": "rmsprop_momentum",
            "epsilon": "opt_epsilon",
        },
        {},
    ),
    "sgd": (optimizers.GradientDescent, {}, {}),
}


def _arguments(f):
    """`(class, {argument: (flag, value)})` of the flags' optimizer."""
    name = checks.one_of("optimizer", f["optimizer"], OPTIMIZERS)
    cls, flag_of, _ = _OPTIMIZER_ARGUMENTS[name]
    return cls, {arg: (flag, f[flag]) for arg, flag in flag_of.items()}


def describe_optimizer(**flags):
    """The optimizer `configure_optimizer(rate, **flags)` builds, in words.

    The class and each argument with the flag that gives it, as TF-Slim's
    TF1 optimizer takes it; then Keras's moving average and gradient
    accumulation when the flags set them.

    Args:
        **flags: The flags `configure_optimizer` takes, by name.

    Returns:
        One line, such as `"rmsprop: RMSProp(decay=0.9 --rmsprop_decay,
        momentum=0.9 --rmsprop_momentum, epsilon=1.0 --opt_epsilon)"`.

    Raises:
        TypeError: for a flag name TF-Slim's helper does not read.
        ValueError: for an `optimizer` not in `OPTIMIZERS`.

    Example:
    ```python
    from keras_slim.image import optimizer as optimizer_lib

    print(optimizer_lib.describe_optimizer(optimizer="adam"))
    # adam: Adam(beta1=0.9 --adam_beta1, beta2=0.999 --adam_beta2,
    #   epsilon=1.0 --opt_epsilon)
    ```
    """
    f = with_defaults(flags, _OPTIMIZER_DEFAULTS, "describe_optimizer")
    cls, arguments = _arguments(f)
    said = ", ".join(
        f"{arg}={value!r} --{flag}" for arg, (flag, value) in arguments.items()
    )
    text = f"{f['optimizer']}: {cls.__name__}({said})"
    if f["moving_average_decay"] is not None:
        text += (
            f"; moving average of the weights, decay "
            f"min({f['moving_average_decay']!r} --moving_average_decay, "
            "(1 + step) / (10 + step))"
        )
    return text
