"""What a `keras-slim-train` run will do, said once before its first step."""

import dataclasses
import textwrap

from keras_slim import _checkpoint_dir
from keras_slim import _checkpoint_readers
from keras_slim import training_state
from keras_slim.image import optimizer as optimizer_lib


@dataclasses.dataclass(frozen=True)
class Batches:
    """The examples of one step, from the per-clone batch up.

    Attributes:
        per_clone: `--batch_size`.
        replicas: The clones whose batches make one batch of the input
            (all of a synchronous step's, or one parameter-server worker's).
        aggregated: The input batches one step averages:
            `--replicas_to_aggregate` for synchronous steps over parameter
            servers, else 1.
        accumulation: `--gradient_accumulation_steps`: the micro-batches
            whose mean gradient makes one optimizer (global) step.
        workers: The workers whose clones are the `replicas`
            (`--worker_replicas` without parameter servers), else 1.
    """

    per_clone: int
    replicas: int
    aggregated: int = 1
    accumulation: int = 1
    workers: int = 1

    @property
    def input_batch(self):
        """The batch the input pipeline is built with."""
        return self.per_clone * self.replicas

    @property
    def per_step(self):
        """The examples of one global (optimizer) step: the global batch."""
        return self.input_batch * self.aggregated * self.accumulation

    def describe(self):
        """The batch in words, one line per factor that is not 1."""
        clones = "clone" if self.replicas == 1 else "clones"
        lines = [f"{self.per_clone} per clone x {self.replicas} {clones}"]
        if self.workers > 1:
            lines[-1] += (
                f" ({self.replicas // self.workers} on each of "
                f"{self.workers} workers)"
            )
        total = self.input_batch
        if self.aggregated > 1:
            total *= self.aggregated
            lines[-1] += f" = {self.input_batch}"
            lines.append(
                f"x {self.aggregated} workers' batches per synchronous step "
                "(--replicas_to_aggregate)"
            )
        if self.accumulation > 1:
            lines[-1] += f" = {total}"
            lines.append(
                f"x {self.accumulation} micro-batches per optimizer step "
                "(--gradient_accumulation_steps)"
            )
        lines[-1] += (
            f" = {self.per_step} examples per global step: the global "
            "batch, whose mean gradient each step applies"
        )
        return "\n".join(lines)


def batches(flags, replicas):
    """The `Batches` of the flags, with the run's input `replicas`.

    Args:
        flags: The parsed flags.
        replicas: The clones whose batches make one batch of the input.

    Returns:
        A `Batches`.
    """
    sync_ps = bool(flags.num_ps_tasks and flags.sync_replicas)
    return Batches(
        per_clone=flags.batch_size,
        replicas=replicas,
        aggregated=flags.replicas_to_aggregate if sync_ps else 1,
        accumulation=flags.gradient_accumulation_steps,
        workers=1 if flags.num_ps_tasks else flags.worker_replicas,
    )


def resume_step(train_dir):
    """The newest checkpoint of `train_dir`, as the resume finds it.

    Returns:
        `(step, prefix)`, or `None` when there is none.
    """
    found = _checkpoint_dir.checkpoint_files(
        train_dir, training_state.CHECKPOINT_NAME
    )
    return found[-1] if found else None


def _start(flags, warm, resumed):
    if resumed is not None:
        step, prefix = resumed
        text = (
            f"resume from {prefix} (global step {step}), the newest "
            "checkpoint in --train_dir"
        )
        if warm is not None:
            text += (
                f"; --checkpoint_path {warm.checkpoint} is not used (a "
                "resumed run is not warm-started)"
            )
        return text
    if warm is None:
        return (
            "from scratch at global step 0 (no checkpoint in --train_dir, "
            "no --checkpoint_path)"
        )
    reader = _checkpoint_readers.resolve(warm.checkpoint)
    reader.close()
    excluded = ", ".join(warm.exclude) or "none"
    missing = "skipped" if warm.ignore_missing else "an error"
    return (
        f"warm start from {reader.path} ({reader.format}) at global step "
        f"0, excluding {excluded} (--checkpoint_exclude_scopes); variables "
        f"it lacks are {missing} (--ignore_missing_vars)"
    )


def _steps(flags, start, per_step, num_samples):
    last = flags.max_number_of_steps
    if last is None:
        return "no --max_number_of_steps: until stopped"
    if start >= last:
        return f"none: global step {start} is already --max_number_of_steps"
    epochs = (last - start) * per_step / num_samples
    return (
        f"to global step {last} (--max_number_of_steps): {last - start} "
        f"steps from {start} = {epochs:.3g} epochs"
    )


def _schedule(schedule, per_step):
    """The schedule's line, and TF-Slim's epochs at the global batch when
    they differ (its decay steps count epochs of `--batch_size`)."""
    text = schedule.describe()
    if not schedule.counts_epochs:
        return text
    epochs = schedule.decay_steps * per_step / schedule.num_samples_per_epoch
    nominal = schedule.num_epochs_per_decay
    if abs(epochs - nominal) > 0.01 * nominal:
        text += (
            f"\n(TF-Slim's decay steps count epochs of --batch_size "
            f"{schedule.batch_size}: at {per_step} examples per step they "
            f"are {epochs:.3g} epochs)"
        )
    return text


def _precision(model):
    policy = model.dtype_policy
    if policy.compute_dtype == policy.variable_dtype:
        return policy.name
    scale = ", dynamic loss scale" if policy.compute_dtype == "float16" else ""
    return (
        f"{policy.name}: layers compute in {policy.compute_dtype}, "
        f"variables are {policy.variable_dtype}{scale}"
    )


def summary(flags, *, config, batch, train, schedule, model, warm, resumed):
    """What the run will do, in global terms.

    Args:
        flags: The parsed flags.
        config: The run's `DeploymentConfig`.
        batch: Its `Batches`.
        train: The train split's `_task.Task`.
        schedule: The `learning_rate.DecaySchedule` the optimizer runs.
        model: The compiled model.
        warm: The run's `WarmStart`, or `None`.
        resumed: `resume_step(flags.train_dir)`.

    Returns:
        The summary, a multi-line string.
    """
    start = resumed[0] if resumed else 0
    per_step = batch.per_step
    f = vars(flags)
    optimizer = optimizer_lib.describe_optimizer(
        optimizer=flags.optimizer,
        moving_average_decay=flags.moving_average_decay,
        **{name: f[name] for name in optimizer_lib.OPTIMIZER_FLAGS},
    )
    sections = [
        ("deployment", config.describe()),
        ("batch", batch.describe()),
        (
            "epoch",
            f"{train.num_samples} examples of split "
            f"'{flags.dataset_split_name}' = "
            f"{train.num_samples / per_step:.4g} steps of {per_step}",
        ),
        ("learning rate", _schedule(schedule, per_step)),
        ("optimizer", optimizer),
        ("steps", _steps(flags, start, per_step, train.num_samples)),
        ("start", _start(flags, warm, resumed)),
        ("precision", _precision(model)),
        (
            "variables",
            "the gradient policy's table (--trainable_scopes, --freeze, "
            "--gradient_multipliers, --learning_rate_multipliers, "
            "--clip_gradient_norm)\n" + model.gradient_policy.describe(model),
        ),
    ]
    lines = ["keras-slim-train will:"]
    for name, text in sections:
        first, *rest = text.splitlines()
        lines.append(f"  {name}: {first}")
        lines += [textwrap.indent(line, "    ") for line in rest]
    return "\n".join(lines)
