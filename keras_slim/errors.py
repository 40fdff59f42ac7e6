"""Errors raised by keras_slim."""


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

    Example:
    ```python
    try:
        model.fit(x, y)
    except keras_slim.NanLossDuringTrainingError as e:
        print(e.step, e.cause, e.loss, e.gradient_norm)
    ```
    """

    def __init__(
        self, step, loss, cause="loss", gradient_norm=None, applied=False
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
        what = (
            f"NaN loss during training: loss = {self.loss} at global step "
            f"{self.step} (LossTensor is inf or nan)."
            if cause == "loss"
            else "Non-finite gradient during training: global gradient "
            f"norm = {self.gradient_norm} at global step {self.step}, with "
            f"a finite loss ({self.loss})."
        )
        outcome = (
            " The step was applied (the model has no update gate: use a "
            "keras_slim.SlimModel to skip such steps): its variables hold "
            "that update."
            if self.applied
            else " The step was skipped: no variable was updated."
        )
        super().__init__(what + outcome)

    def __reduce__(self):
        args = (self.step, self.loss, self.cause, self.gradient_norm)
        return (type(self), (*args, self.applied))


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
