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
