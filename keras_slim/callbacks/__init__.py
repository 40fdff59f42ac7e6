"""Callbacks for `model.fit`: TF-Slim's training services.

- `LogEveryNSteps`: the loss of the step, every n global steps;
- `StopAtStep`: stop after n more steps, or at a global step;
- `NanLossGuard`: stop (or go on) when the loss is not finite;
- `Checkpoints`: save on intervals, resume from the latest;
- `Summaries`: TensorBoard scalars and histograms on intervals;
- `Trace`: Chrome traces of chosen steps;
- `WarmStart`: initialise from another checkpoint before the first step;
- `StepCallback`: the base class of callbacks that act on global steps,
  with the `RunView` and `StepCounter` it gives them.

The global step is `model.optimizer.iterations`. Each works with any
`model.fit`, on a `SlimModel` or a plain `keras.Model`.
"""

from keras_slim.callbacks.checkpoints import Checkpoints
from keras_slim.callbacks.log_every_n_steps import LogEveryNSteps
from keras_slim.callbacks.nan_loss_guard import NanLossGuard
from keras_slim.callbacks.run_view import RunView
from keras_slim.callbacks.step_callback import StepCallback
from keras_slim.callbacks.step_counter import StepCounter
from keras_slim.callbacks.stop_at_step import StopAtStep
from keras_slim.callbacks.summaries import Summaries
from keras_slim.callbacks.trace import Trace
from keras_slim.callbacks.warm_start import WarmStart

__all__ = [
    "Checkpoints",
    "LogEveryNSteps",
    "NanLossGuard",
    "RunView",
    "StepCallback",
    "StepCounter",
    "StopAtStep",
    "Summaries",
    "Trace",
    "WarmStart",
]
