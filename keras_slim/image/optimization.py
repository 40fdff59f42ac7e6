"""train_image_classifier's optimizer and learning rate, from TF-Slim's flags.

TF-Slim's research/slim/train_image_classifier.py builds its optimizer
and learning rate in two helpers that read `FLAGS`:
`_configure_optimizer(learning_rate)` and
`_configure_learning_rate(num_samples_per_epoch, global_step)`. Here they
take the same flags as keyword arguments, with TF-Slim's names and
defaults, and build the same things in Keras 3: the optimizer is the
`keras_slim.optimizers` class of the `tf.compat.v1.train` optimizer TF-Slim
builds, with the same arguments (so each step equals TF1's), and the
learning rate is the Keras schedule computing TF1's `exponential_decay` /
`polynomial_decay` at the optimizer's `iterations`.

Not TF-Slim's, both off by default (today's recipes, timm's `--sched
cosine --warmup-epochs --min-lr`): `learning_rate_decay_type="cosine"`,
Keras's `CosineDecay` (TF1's `cosine_decay`) from `learning_rate` down to
`end_learning_rate`, over `max_number_of_steps` minus the warmup when
`max_number_of_steps` is set, else over `num_epochs_per_decay` epochs,
then staying at `end_learning_rate`; and `warmup_epochs`, a linear ramp
from 0 to `learning_rate` over that many epochs before any decay type,
whose decay then starts (`_warmup.LinearWarmup`). Steps are global steps,
each of the global batch, as TF-Slim's decay steps:
`int(num_samples_per_epoch * epochs / batch_size)`, divided by
`replicas_to_aggregate` under `sync_replicas`.

Each `--optimizer`, the `keras_slim.optimizers` class it builds, and the
flags it reads (TF-Slim gives its TF1 class the same arguments):

- `adadelta`: `Adadelta(lr, rho=adadelta_rho, epsilon=opt_epsilon)`;
- `adagrad`: `Adagrad(lr, initial_accumulator_value=
  adagrad_initial_accumulator_value)`;
- `adam`: `Adam(lr, beta1=adam_beta1, beta2=adam_beta2,
  epsilon=opt_epsilon)`;
- `ftrl`: `Ftrl(lr, learning_rate_power=ftrl_learning_rate_power,
  initial_accumulator_value=ftrl_initial_accumulator_value,
  l1_regularization_strength=ftrl_l1, l2_regularization_strength=ftrl_l2)`;
- `momentum`: `Momentum(lr, momentum=momentum)`;
- `rmsprop` (the default): `RMSProp(lr, decay=rmsprop_decay,
  momentum=rmsprop_momentum, epsilon=opt_epsilon)`;
- `sgd`: `GradientDescent(lr)`.
"""

import dataclasses
import math
import numbers

import tensorflow as tf
from keras.optimizers import schedules

from keras_slim import checks
from keras_slim import moving_averages
from keras_slim import optimizers
from keras_slim.image import _warmup

__all__ = [
    "DECAY_TYPES",
    "DecaySchedule",
    "LEARNING_RATE_FLAGS",
    "OPTIMIZERS",
    "OPTIMIZER_FLAGS",
    "configure_learning_rate",
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

#: TF-Slim's `--learning_rate_decay_type` values, and `cosine`.
DECAY_TYPES = ("cosine", "exponential", "fixed", "polynomial")

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

#: TF-Slim's flags `_configure_learning_rate` reads, with their defaults.
LEARNING_RATE_FLAGS = {
    "learning_rate": 0.01,
    "learning_rate_decay_type": "exponential",
    "num_epochs_per_decay": 2.0,
    "learning_rate_decay_factor": 0.94,
    "end_learning_rate": 0.0001,
    "batch_size": 32,
    "sync_replicas": False,
    "replicas_to_aggregate": 1,
    # Not TF-Slim's: the recipes' warmup, and the cosine's end.
    "warmup_epochs": 0.0,
    "max_number_of_steps": None,
}

_OPTIMIZER_DEFAULTS = {
    "optimizer": "rmsprop",
    "moving_average_decay": None,
    **{name: default for name, (default, _) in OPTIMIZER_FLAGS.items()},
}


def _with_defaults(given, defaults, function):
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(
            f"{function}() got unknown flags {unknown}. Expected TF-Slim's "
            f"flag names: {sorted(defaults)}."
        )
    return {**defaults, **given}


def _one_of(name, value, choices):
    if value not in choices:
        raise checks.invalid(name, value, f"one of {choices}")
    return value


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
            `configure_learning_rate(..., None)` returns).
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
    from keras_slim.image import optimization

    rate = optimization.configure_learning_rate(1281167, None)
    optimizer = optimization.configure_optimizer(rate, optimizer="adam")
    ```
    """
    f = _with_defaults(flags, _OPTIMIZER_DEFAULTS, "configure_optimizer")
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
    name = _one_of("optimizer", f["optimizer"], OPTIMIZERS)
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
    from keras_slim.image import optimization

    print(optimization.describe_optimizer(optimizer="adam"))
    # adam: Adam(beta1=0.9 --adam_beta1, beta2=0.999 --adam_beta2,
    #   epsilon=1.0 --opt_epsilon)
    ```
    """
    f = _with_defaults(flags, _OPTIMIZER_DEFAULTS, "describe_optimizer")
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


def _positive(name, value):
    if not _is_number(value) or not 0 < value < math.inf:
        raise checks.invalid(name, value, "a positive number")
    return value


def _non_negative(name, value):
    if not _is_number(value) or not 0 <= value < math.inf:
        raise checks.invalid(name, value, "a non-negative number")
    return value


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_step_flags(num_samples_per_epoch, f):
    """The flags that count steps, checked."""
    checks.positive_int("num_samples_per_epoch", num_samples_per_epoch)
    checks.positive_int("batch_size", f["batch_size"])
    checks.boolean("sync_replicas", f["sync_replicas"])
    checks.positive_int("replicas_to_aggregate", f["replicas_to_aggregate"])


def _decay_steps(num_samples_per_epoch, f):
    """TF-Slim's: `int(num_samples_per_epoch * num_epochs_per_decay /
    batch_size)`, then divided (true division: a float) by
    `replicas_to_aggregate` when `sync_replicas`."""
    _check_step_flags(num_samples_per_epoch, f)
    epochs = _positive("num_epochs_per_decay", f["num_epochs_per_decay"])
    steps = _epoch_steps(num_samples_per_epoch, epochs, f)
    if steps == 0:
        raise ValueError(
            "The learning rate would decay every 0 steps (TF1 divides by "
            "zero: NaN rates): int(num_samples_per_epoch * "
            "num_epochs_per_decay / batch_size) is 0. Received: "
            f"num_samples_per_epoch={num_samples_per_epoch}, "
            f"num_epochs_per_decay={f['num_epochs_per_decay']}, "
            f"batch_size={f['batch_size']}. Expected at least one step "
            "per decay: a larger num_epochs_per_decay, or "
            "learning_rate_decay_type='fixed'."
        )
    return steps


@dataclasses.dataclass(frozen=True)
class DecaySchedule:
    """The learning rate of TF-Slim's flags, described before it is built.

    `from_flags` reads the flags once (TF-Slim's decay steps included);
    `build()` makes the Keras schedule the optimizer evaluates and
    `describe()` says it in steps, so what a run prints is what it trains
    with. Each `kind` is one entry of a table of builders and descriptions.

    Attributes:
        kind: The `learning_rate_decay_type` (one of `DECAY_TYPES`).
        learning_rate: The initial rate.
        decay_steps: TF-Slim's decay steps (a float when divided by
            `replicas_to_aggregate`); `None` for `fixed`.
        decay_factor: `learning_rate_decay_factor` (`exponential`).
        end_learning_rate: The rate `polynomial` ends at.
        num_samples_per_epoch: The examples of an epoch.
        num_epochs_per_decay: The flag the decay steps come from.
        batch_size: The batch the decay steps count (TF-Slim's
            `--batch_size`, per clone).
        replicas_to_aggregate: The divisor of the decay steps on
            synchronous replicas, else `None`.
        warmup_steps: The global steps of the linear warmup (0: none).
        warmup_epochs: The `warmup_epochs` they come from.
        max_number_of_steps: Where a cosine ends (`None`: after
            `num_epochs_per_decay` epochs).

    Example:
    ```python
    from keras_slim.image import optimization

    schedule = optimization.DecaySchedule.from_flags(1000, batch_size=100)
    schedule.decay_steps  # 20 = int(1000 * 2.0 / 100)
    schedule.describe()
    # 'exponential: 0.01 x 0.94 every 2 epochs = 20 steps (staircase)'
    schedule.build()(20)  # 0.01 * 0.94
    ```
    """

    kind: str
    learning_rate: float
    decay_steps: float = None
    decay_factor: float = None
    end_learning_rate: float = None
    num_samples_per_epoch: int = None
    num_epochs_per_decay: float = None
    batch_size: int = None
    replicas_to_aggregate: int = None
    warmup_steps: float = 0
    warmup_epochs: float = 0.0
    max_number_of_steps: int = None

    @classmethod
    def from_flags(cls, num_samples_per_epoch, **flags):
        """The schedule of TF-Slim's flags.

        Args:
            num_samples_per_epoch: The examples of an epoch.
            **flags: TF-Slim's flags by name (`LEARNING_RATE_FLAGS`), each
                defaulting to TF-Slim's default.

        Returns:
            A `DecaySchedule`.

        Raises:
            TypeError: for a flag not in `LEARNING_RATE_FLAGS`.
            ValueError: as `configure_learning_rate`.
        """
        f = _with_defaults(
            flags, LEARNING_RATE_FLAGS, "DecaySchedule.from_flags"
        )
        kind = _one_of(
            "learning_rate_decay_type",
            f["learning_rate_decay_type"],
            DECAY_TYPES,
        )
        rate = float(_positive("learning_rate", f["learning_rate"]))
        warmup = _warmup_steps(num_samples_per_epoch, f)
        counted = {
            "num_samples_per_epoch": num_samples_per_epoch,
            "num_epochs_per_decay": f["num_epochs_per_decay"],
            "batch_size": f["batch_size"],
            "replicas_to_aggregate": (
                f["replicas_to_aggregate"] if f["sync_replicas"] else None
            ),
            "warmup_steps": warmup,
            "warmup_epochs": f["warmup_epochs"],
        }
        if kind == "fixed":
            return cls(kind, rate, **(counted if warmup else {}))
        if kind == "cosine":
            steps, end = _cosine_steps(rate, num_samples_per_epoch, f, warmup)
            return cls(
                kind,
                rate,
                decay_steps=steps,
                end_learning_rate=end,
                max_number_of_steps=f["max_number_of_steps"],
                **counted,
            )
        steps = _decay_steps(num_samples_per_epoch, f)
        if kind == "exponential":
            decay = {
                "decay_factor": _positive(
                    "learning_rate_decay_factor",
                    f["learning_rate_decay_factor"],
                )
            }
        else:
            decay = {
                "end_learning_rate": _non_negative(
                    "end_learning_rate", f["end_learning_rate"]
                )
            }
        return cls(kind, rate, decay_steps=steps, **decay, **counted)

    def build(self):
        """What a Keras optimizer takes: a float (`fixed`) or a
        `keras.optimizers.schedules.LearningRateSchedule` of the step
        (the decay after `_warmup.LinearWarmup`'s ramp, with a warmup)."""
        decayed = _KINDS[self.kind][0](self)
        if not self.warmup_steps:
            return decayed
        return _warmup.LinearWarmup(
            decayed, self.warmup_steps, self.learning_rate
        )

    def describe(self):
        """The schedule in steps, one line: `"exponential: 0.01 x 0.94
        every 2 epochs = 62 steps (staircase)"`, after `"linear warmup
        from 0 over 5 epochs = 155 steps, then "` with a warmup."""
        text = f"{self.kind}: {_KINDS[self.kind][1](self)}"
        if not self.warmup_steps:
            return text
        return (
            f"linear warmup from 0 over {self.warmup_epochs:g} epochs = "
            f"{self.warmup_steps:g} steps, then {text} (counted from the "
            "warmup's end)"
        )

    @property
    def counts_epochs(self):
        """Whether the decay steps are TF-Slim's count of
        `num_epochs_per_decay` epochs (not for `fixed`, nor for a cosine
        that ends at `max_number_of_steps`)."""
        if self.decay_steps is None:
            return False
        return self.kind != "cosine" or self.max_number_of_steps is None

    def epochs_text(self, epochs, steps):
        """`"2 epochs = 62 steps"`: TF-Slim's count of `epochs` in steps
        (`steps`, divided by the replicas to aggregate when synchronous)."""
        whole = _whole_steps(
            self.num_samples_per_epoch, epochs, self.batch_size
        )
        text = f"{epochs:g} epochs = {whole} steps"
        if self.replicas_to_aggregate is not None:
            text += (
                f" / {self.replicas_to_aggregate} replicas to aggregate = "
                f"{steps:g} steps"
            )
        return text

    def steps_text(self):
        """The decay steps and where TF-Slim's formula takes them from:
        `"2 epochs = 62 steps"`, `"... = 62 / 4 replicas = 15.5 steps"`."""
        return self.epochs_text(self.num_epochs_per_decay, self.decay_steps)


def _cosine_text(s):
    if s.max_number_of_steps is None:
        length = s.steps_text()
    else:
        length = (
            f"{s.decay_steps:g} steps, to --max_number_of_steps "
            f"{s.max_number_of_steps}"
        )
    return (
        f"{s.learning_rate:g} to {s.end_learning_rate:g} over {length}, "
        f"then {s.end_learning_rate:g}"
    )


#: Each decay type: `(build, describe)` of a `DecaySchedule`.
_KINDS = {
    "cosine": (
        lambda s: schedules.CosineDecay(
            s.learning_rate,
            s.decay_steps,
            alpha=s.end_learning_rate / s.learning_rate,
        ),
        _cosine_text,
    ),
    "exponential": (
        lambda s: schedules.ExponentialDecay(
            s.learning_rate, s.decay_steps, s.decay_factor, staircase=True
        ),
        lambda s: (
            f"{s.learning_rate:g} x {s.decay_factor:g} every "
            f"{s.steps_text()} (staircase)"
        ),
    ),
    "fixed": (lambda s: s.learning_rate, lambda s: f"{s.learning_rate:g}"),
    "polynomial": (
        lambda s: schedules.PolynomialDecay(
            s.learning_rate,
            s.decay_steps,
            s.end_learning_rate,
            power=1.0,
            cycle=False,
        ),
        lambda s: (
            f"{s.learning_rate:g} to {s.end_learning_rate:g} "
            f"linearly over {s.steps_text()}, then {s.end_learning_rate:g}"
        ),
    ),
}


def configure_learning_rate(num_samples_per_epoch, global_step, **flags):
    """The learning rate TF-Slim's `_configure_learning_rate` returns.

    `exponential`: TF1's `exponential_decay(learning_rate, global_step,
    decay_steps, learning_rate_decay_factor, staircase=True)`;
    `polynomial`: `polynomial_decay(learning_rate, global_step,
    decay_steps, end_learning_rate, power=1.0, cycle=False)`; `fixed`:
    `learning_rate`; `cosine` (not TF-Slim's): Keras's `CosineDecay`,
    TF1's `cosine_decay(learning_rate, global_step, decay_steps,
    alpha=end_learning_rate / learning_rate)`, where `decay_steps` is
    `max_number_of_steps` minus the warmup when `max_number_of_steps`
    is set, else the decay steps of `num_epochs_per_decay`. With
    `warmup_epochs` (not TF-Slim's) every type starts with a linear ramp
    from 0 to `learning_rate` over that many epochs' steps, and decays
    from the end of it. The decay steps as TF-Slim computes them:
    `int(num_samples_per_epoch * num_epochs_per_decay / batch_size)`,
    divided (true division: a float) by `replicas_to_aggregate` when
    `sync_replicas` (each synchronous step consumes that many batches).
    `DecaySchedule.from_flags(...).build()`.

    Args:
        num_samples_per_epoch: The examples of an epoch.
        global_step: `None` for what a Keras optimizer takes (a schedule
            it evaluates at its `iterations`, or a float for `fixed`); or
            a step (an int, a tensor, `optimizer.iterations`) for the rate
            at that step, a float32 tensor as TF-Slim's.
        **flags: TF-Slim's flags by name (`LEARNING_RATE_FLAGS`), each
            defaulting to TF-Slim's default, and `warmup_epochs`
            (default 0: none) and `max_number_of_steps` (default `None`:
            the length of a cosine).

    Returns:
        A float or a `keras.optimizers.schedules.LearningRateSchedule`
        (`global_step=None`), else a scalar float32 tensor.

    Raises:
        TypeError: for a flag not in `LEARNING_RATE_FLAGS`.
        ValueError: for a `learning_rate_decay_type` not in `DECAY_TYPES`,
            a bad value (a rate that is not positive, a negative
            `warmup_epochs`, ...), or, for a decaying type, decay steps of
            0 (TF1 would divide by zero: NaN rates); a warmup of 0 steps
            or not ending before `max_number_of_steps`; a cosine without
            a length (both `max_number_of_steps` and
            `num_epochs_per_decay` `None`) or whose `end_learning_rate`
            is above `learning_rate`; naming the values.

    Example:
    ```python
    from keras_slim.image import optimization

    schedule = optimization.configure_learning_rate(
        1000, None, batch_size=100, learning_rate_decay_factor=0.5
    )
    schedule(20)  # 0.01 * 0.5: a decay every 1000 * 2.0 / 100 steps
    ```
    """
    f = _with_defaults(flags, LEARNING_RATE_FLAGS, "configure_learning_rate")
    rate = DecaySchedule.from_flags(num_samples_per_epoch, **f).build()
    if global_step is None:
        return rate
    if isinstance(rate, float):
        return tf.constant(rate, tf.float32)
    return rate(global_step)


def _whole_steps(num_samples_per_epoch, epochs, batch_size):
    """TF-Slim's count of the batches of `epochs` epochs:
    `int(num_samples_per_epoch * epochs / batch_size)`."""
    return int(num_samples_per_epoch * epochs / batch_size)


def _epoch_steps(num_samples_per_epoch, epochs, f):
    """TF-Slim's count of the global steps of `epochs` epochs: the
    batches, divided (true division: a float) by `replicas_to_aggregate`
    when `sync_replicas` (each synchronous step takes that many)."""
    steps = _whole_steps(num_samples_per_epoch, epochs, f["batch_size"])
    if f["sync_replicas"]:
        steps /= f["replicas_to_aggregate"]
    return steps


def _warmup_steps(num_samples_per_epoch, f):
    """The global steps of `warmup_epochs` (0 without warmup); raises for
    a warmup of 0 steps or one that does not end before
    `max_number_of_steps`."""
    epochs = _non_negative("warmup_epochs", f["warmup_epochs"])
    if epochs == 0:
        return 0
    _check_step_flags(num_samples_per_epoch, f)
    steps = _epoch_steps(num_samples_per_epoch, epochs, f)
    if steps == 0:
        raise ValueError(
            f"Invalid value for argument `warmup_epochs`. Received: "
            f"warmup_epochs={epochs}, which is 0 steps of {f['batch_size']} "
            f"of the {num_samples_per_epoch} examples of an epoch. Expected "
            "at least one step, or 0 for no warmup."
        )
    last = checks.positive_int_or_none(
        "max_number_of_steps", f["max_number_of_steps"]
    )
    if last is not None and steps >= last:
        raise ValueError(
            f"Invalid value for argument `warmup_epochs`. Received: "
            f"warmup_epochs={epochs}, {steps} steps, not fewer than "
            f"max_number_of_steps={last}. Expected a warmup that ends "
            "before training does."
        )
    return steps


def _cosine_steps(rate, num_samples_per_epoch, f, warmup):
    """`(decay_steps, end_learning_rate)` of the cosine: from `rate` to
    `end_learning_rate` over the steps after the warmup up to
    `max_number_of_steps`, else over `num_epochs_per_decay` epochs."""
    end = _non_negative("end_learning_rate", f["end_learning_rate"])
    if end > rate:
        raise ValueError(
            "Invalid value for argument `end_learning_rate`. Received: "
            f"end_learning_rate={end} above learning_rate={rate}. Expected "
            "at most learning_rate: the floor the cosine decays to."
        )
    last = checks.positive_int_or_none(
        "max_number_of_steps", f["max_number_of_steps"]
    )
    if last is not None:
        return last - warmup, end
    if f["num_epochs_per_decay"] is None:
        raise ValueError(
            "learning_rate_decay_type='cosine' needs a length. Received: "
            "max_number_of_steps=None, num_epochs_per_decay=None. Expected "
            "max_number_of_steps (the cosine ends there) or "
            "num_epochs_per_decay (it lasts that many epochs)."
        )
    return _decay_steps(num_samples_per_epoch, f), end
