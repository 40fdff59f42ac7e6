"""Errors raised by keras_slim."""


class NanLossDuringTrainingError(RuntimeError):
    """Raised when the training loss is NaN or infinite.

    TF-Slim stopped with `'LossTensor is inf or nan'`; contrib.learn raised
    `NanLossDuringTrainingError`. keras_slim raises this error, naming the
    global step and the loss value, after the failing step was skipped: no
    variable changed at that step.

    Args:
        step: Integer. The global step at which the loss was not finite (the
            number of the training step that failed, counting from 1).
        loss: Float. The non-finite loss value (`nan`, `inf` or `-inf`).

    Example:
    ```python
    try:
        model.fit(x, y)
    except keras_slim.NanLossDuringTrainingError as e:
        print(e.step, e.loss)
    ```
    """

    def __init__(self, step, loss):
        self.step = None if step is None else int(step)
        self.loss = float(loss)
        super().__init__(
            f"NaN loss during training: loss = {self.loss} at global step "
            f"{self.step} (LossTensor is inf or nan). The step was skipped: "
            "no variable was updated."
        )

    def __reduce__(self):
        return (type(self), (self.step, self.loss))


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
