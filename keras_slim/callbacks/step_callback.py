"""`StepCallback`: the base of callbacks that act on the global step."""

from keras_slim import _backend
from keras_slim.callbacks._run_callback import RunCallback
from keras_slim.callbacks.run_view import RunView
from keras_slim.callbacks.step_counter import StepCounter
from keras_slim.callbacks.step_counter import steps_in_batch


class StepCallback(RunCallback):
    """A callback that follows the global step on the host.

    Subclass it to act on global steps (`model.optimizer.iterations`)
    rather than on Keras's batch indices, which restart each epoch and
    count calls, not steps, when a call runs several. The step is read
    when the first batch begins (after every callback's
    `on_train_begin`, so after `Checkpoints` restored a run; a subclass may
    read it earlier with `self.counter.sync()`), counted on the host for
    each batch, and read again at each epoch's end (a last execution may
    run fewer steps than `steps_per_execution`). Subclasses that override a
    hook call `super()` first; `on_first_batch(step)` runs once per `fit`.

    From `on_train_begin` on, `self.run` is a `RunView` of the `fit`
    call's run (whether this process is the chief, the checkpoint a run
    resumed from) and `self.counter` a `StepCounter`; from
    `on_train_batch_begin` on, `self.no_step` says whether the call runs
    no step (a run at its `StopAtStep` target, or a resumed run catching
    up with Keras's count of its epoch).

    What a callback needs from a `SlimModel`'s `fit` it declares, and the
    fit collects the declarations of all its callbacks once: override
    `step_multiples` to tell it which global steps must end a call of its
    train function, and `step_options` to tell it what its traced step
    needs (a dict of `StepOptions` fields: `raise_on_nonfinite`, which
    `NanLossGuard` declares, `step_summaries`, which `Summaries` declares).
    The step options are asked for once per `fit`, after every callback's
    `on_train_begin` and before the first step, and the step is traced
    with them for the whole `fit`: a later change of mind changes nothing.
    Two callbacks declaring different values of one option are an error,
    raised before the first step.

    Raises:
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    class PrintEvery100(keras_slim.callbacks.StepCallback):
        def step_multiples(self, model):
            return [100]  # steps 100, 200, ... end a call

        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            if self.counter.step % 100 == 0:
                print("global step", self.counter.step)


    class SkipNonFinite(keras_slim.callbacks.StepCallback):
        def step_options(self, model):
            # A non-finite loss or gradient skips the update, as
            # NanLossGuard(fail=False) does, without its warnings.
            return {"raise_on_nonfinite": False}
    ```
    """

    #: The `RunView` of the current `fit` (from `on_train_begin`).
    run = None
    #: The `StepCounter` of the current `fit` (from `on_train_begin`).
    counter = None

    def __init__(self):
        _backend.require_tensorflow(
            f"{type(self).__name__} (a keras_slim.callbacks.StepCallback)",
            "a keras.callbacks.Callback",
        )
        super().__init__()

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.run = RunView(self._run)
        self.counter = StepCounter(self.run)
        #: Whether the current call of the train function runs no step.
        self.no_step = False

    def on_first_batch(self, step):
        """Called when the first batch of a `fit` call begins.

        Args:
            step: The global step then.
        """

    def step_multiples(self, model):
        """Global steps this callback must see at the end of a call of the
        train function; `SlimModel` picks `steps_per_execution` dividing
        them all (`[1]`: one step per call; `[]`: any count).

        Args:
            model: The model about to be fitted.

        Returns:
            A list of positive ints.
        """
        del model
        return []

    def step_options(self, model):
        """What the traced train step of a `SlimModel` needs from this
        callback: `StepOptions` fields, asked for once per `fit` after
        every callback's `on_train_begin` (see the class docstring).

        Args:
            model: The model being fitted.

        Returns:
            A dict of field name to value (`{}`: nothing).
        """
        del model
        return {}

    def on_train_batch_begin(self, batch, logs=None):
        if self.counter.step is None:
            self.on_first_batch(self.counter.sync())
        self._batch_begin = batch
        # `StopAtStep`, listed earlier, stops a run already at its target
        # before its first batch; a resumed run catches up with Keras's
        # count of its epoch: such a batch runs no step.
        stopped = bool(getattr(self.model, "stop_training", False))
        self.no_step = stopped or self._run.no_step

    def on_train_batch_end(self, batch, logs=None):
        if not self.no_step:
            self.counter.advance(self._batch_begin, batch)

    def on_epoch_end(self, epoch, logs=None):
        if self.counter.step is not None:
            self.counter.sync()

    @property
    def next_step(self):
        """The global step after the coming batch, if it runs in full."""
        return self.counter.next_step(self.model.steps_per_execution)

    def steps_in_batch(self, batch):
        """How many steps the batch ending at index `batch` ran.

        Args:
            batch: Keras's batch index at the end of the call.

        Returns:
            An int.
        """
        return steps_in_batch(self._batch_begin, batch)
