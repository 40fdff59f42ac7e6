"""Errors raised by keras_slim."""

import errno
import functools


class NanLossDuringTrainingError(RuntimeError):
    """Raised when the training loss, or the gradient, is NaN or infinite.

    TF-Slim stopped with `'LossTensor is inf or nan'`; contrib.learn raised
    `NanLossDuringTrainingError`. keras_slim raises this error, naming the
    global step, the loss and what was not finite (`cause`): the loss, or
    the global norm of the gradients (summed across replicas) while the
    loss was finite. A `SlimModel` skipped the failing step (no variable
    changed); another model, checked by `NanLossGuard` after the step, had
    applied it (`applied=True`).

    Args:
        step: Integer. The global step at which the check failed (the
            number of the training step that failed, counting from 1).
        loss: Float. The step's loss (`nan`, `inf` or `-inf` when the
            loss is the cause).
        cause: `"loss"` or `"gradient"`.
            Defaults to `"loss"`.
        gradient_norm: Float or `None`: the global gradient norm, when
            known.
            Defaults to `None`.
        applied: Whether the step's update was applied.
            Defaults to `False`.
        unchecked: With `applied`, why the step was not checked before
            its update, or `None` for a model without keras_slim's gate
            (the message then says to use a `SlimModel`).
            Defaults to `None`.

    Example:
    ```python
    try:
        model.fit(x, y)
    except keras_slim.NanLossDuringTrainingError as e:
        print(e.step, e.cause, e.loss, e.gradient_norm)
    ```
    """

    def __init__(
        self,
        step,
        loss,
        cause="loss",
        gradient_norm=None,
        applied=False,
        *,
        unchecked=None,
    ):
        if cause not in ("loss", "gradient"):
            raise ValueError(
                f"`cause` must be 'loss' or 'gradient'. Received: {cause!r}"
            )
        self.step = None if step is None else int(step)
        self.loss = float(loss)
        self.cause = cause
        self.gradient_norm = (
            None if gradient_norm is None else float(gradient_norm)
        )
        self.applied = bool(applied)
        self.unchecked = unchecked
        what = (
            f"NaN loss during training: loss = {self.loss} at global step "
            f"{self.step} (LossTensor is inf or nan)."
            if cause == "loss"
            else "Non-finite gradient during training: global gradient "
            f"norm = {self.gradient_norm} at global step {self.step}, with "
            f"a finite loss ({self.loss})."
        )
        why = unchecked or (
            "the model has no update gate: use a keras_slim.SlimModel to "
            "skip such steps"
        )
        outcome = (
            f" The step was applied ({why}): its variables hold that update."
            if self.applied
            else " The step was skipped: no variable was updated."
        )
        super().__init__(what + outcome)

    def __reduce__(self):
        args = (self.step, self.loss, self.cause, self.gradient_norm)
        return (
            functools.partial(type(self), unchecked=self.unchecked),
            (*args, self.applied),
        )


#: The exit status of `keras-slim-train` after a preemption: TensorFlow's
#: `PreemptionCheckpointHandler` restart code, which job managers read as
#: "restart me".
PREEMPTED_EXIT_CODE = 42


class TrainingPreemptedError(RuntimeError):
    """Raised when training stopped on SIGTERM or SIGINT, after a save.

    With a `keras_slim.callbacks.Checkpoints` callback (and so in
    `keras_slim.train` with a `logdir`), the first SIGTERM or SIGINT lets
    the call of the train function in flight finish, saves
    `model.ckpt-<step>`, and stops training with this error; a rerun
    resumes from that checkpoint. A second SIGINT aborts at once
    (`KeyboardInterrupt`), unless a save is being written, which is
    finished first. Under `MultiWorkerMirroredStrategy` a signal to one
    worker stops all of them at the same step; the chief writes the
    checkpoint and the others name "a signal to another worker".
    `keras-slim-train` exits with `PREEMPTED_EXIT_CODE` (42).

    Args:
        step: Integer. The global step saved.
        checkpoint: The checkpoint path written (`None` on a worker that
            does not write, or when a variable was not finite).
        signal_name: The signal's name, such as `"SIGTERM"`.

    Example:
    ```python
    try:
        keras_slim.train(model, data, logdir="/tmp/run", number_of_steps=10**6)
    except keras_slim.TrainingPreemptedError as e:
        print(e.step, e.checkpoint)
        sys.exit(42)  # the job manager restarts the job, which resumes
    ```
    """

    def __init__(self, step, checkpoint, signal_name):
        self.step = int(step)
        self.checkpoint = checkpoint
        self.signal_name = signal_name
        where = (
            f"saved {checkpoint}"
            if checkpoint
            else "no checkpoint written by this process"
        )
        super().__init__(
            f"Training stopped on {signal_name} at global step {self.step}; "
            f"{where}. Rerun to resume from the latest checkpoint."
        )

    def __reduce__(self):
        return (type(self), (self.step, self.checkpoint, self.signal_name))


class CheckpointSaveError(OSError):
    """Raised when a checkpoint cannot be written: a full disk, a file-size
    limit, a directory without write permission.

    `keras_slim.callbacks.Checkpoints` (and so `keras_slim.train` with a
    `logdir`, and `keras-slim-train`) stops training with this error when a
    save fails. Nothing complete is lost: the checkpoints saved before are
    left whole, what the failed save wrote part way is removed, and the
    `checkpoint` state file lists only complete checkpoints, so a rerun
    with space resumes from the last complete one (`checkpoint`).
    `errno` is the failure's (`errno.ENOSPC`, `errno.EFBIG`,
    `errno.EACCES` ...), also when TensorFlow reported it as an `OpError`
    (`ResourceExhaustedError`, `OutOfRangeError`, `PermissionDeniedError`,
    whose text is `detail`); `None` when the failure did not say.

    Args:
        directory: The checkpoint directory.
        step: Integer. The global step whose checkpoint failed.
        checkpoint: The path of the last complete checkpoint in
            `directory`, or `None` when there is none.
        error_number: The failure's `errno` code, or `None` when unknown.
        detail: Text. What the file system or TensorFlow said.

    Example:
    ```python
    try:
        keras_slim.train(model, data, logdir="/tmp/run", number_of_steps=10**6)
    except keras_slim.CheckpointSaveError as e:
        print(e.directory, e.checkpoint)  # free space, rerun: it resumes
    ```
    """

    def __init__(self, directory, step, checkpoint, error_number, detail):
        self.directory = directory
        self.step = int(step)
        self.checkpoint = checkpoint
        self.detail = detail
        what, remedy = _SAVE_FAILURES.get(error_number, (None, "fix that"))
        what = f"{what} ({detail})" if what else detail
        last = (
            f"No complete checkpoint was lost: the last one is "
            f"{checkpoint!r}; {remedy} and rerun to resume from it."
            if checkpoint
            else f"No checkpoint was complete there yet; {remedy} and rerun "
            "to train from the start."
        )
        super().__init__(
            f"Cannot save the checkpoint of global step {self.step} in "
            f"{directory!r}: {what}. {last}"
        )
        # Set after: with `strerror` unset the message stays the one above.
        self.errno = error_number

    def __reduce__(self):
        args = (self.directory, self.step, self.checkpoint, self.errno)
        return (type(self), (*args, self.detail))


_SAVE_FAILURES = {
    errno.ENOSPC: ("the disk is full", "free space"),
    errno.EDQUOT: ("the disk quota is exceeded", "free space"),
    errno.EFBIG: (
        "a file is too large for the file-size limit",
        "raise the limit (`ulimit -f`)",
    ),
    errno.EACCES: ("permission denied", "make the directory writable"),
    errno.EPERM: ("permission denied", "make the directory writable"),
    errno.EROFS: ("the file system is read-only", "make it writable"),
}
