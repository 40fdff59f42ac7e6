"""train_image_classifier's learning rate, from TF-Slim's flags."""

import dataclasses

import tensorflow as tf
from keras.optimizers import schedules

from keras_slim import checks
from keras_slim.image import _warmup
from keras_slim.image._flag_defaults import with_defaults

__all__ = [
    "DECAY_TYPES",
    "DecaySchedule",
    "LEARNING_RATE_FLAGS",
    "configure_learning_rate",
]

#: TF-Slim's `--learning_rate_decay_type` values, and `cosine`.
DECAY_TYPES = ("cosine", "exponential", "fixed", "polynomial")

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
    epochs = checks.positive_number(
        "num_epochs_per_decay", f["num_epochs_per_decay"]
    )
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
    from keras_slim.image import learning_rate

    schedule = learning_rate.DecaySchedule.from_flags(1000, batch_size=100)
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
        f = with_defaults(
            flags, LEARNING_RATE_FLAGS, "DecaySchedule.from_flags"
        )
        kind = checks.one_of(
            "learning_rate_decay_type",
            f["learning_rate_decay_type"],
            DECAY_TYPES,
        )
        rate = float(
            checks.positive_number("learning_rate", f["learning_rate"])
        )
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
                "decay_factor": checks.positive_number(
                    "learning_rate_decay_factor",
                    f["learning_rate_decay_factor"],
                )
            }
        else:
            decay = {
                "end_learning_rate": checks.non_negative_number(
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
    from keras_slim.image import learning_rate

    schedule = learning_rate.configure_learning_rate(
        1000, None, batch_size=100, learning_rate_decay_factor=0.5
    )
    schedule(20)  # 0.01 * 0.5: a decay every 1000 * 2.0 / 100 steps
    ```
    """
    f = with_defaults(flags, LEARNING_RATE_FLAGS, "configure_learning_rate")
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
    epochs = checks.non_negative_number("warmup_epochs", f["warmup_epochs"])
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
    end = checks.non_negative_number(
        "end_learning_rate", f["end_learning_rate"]
    )
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
