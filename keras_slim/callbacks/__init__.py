"""Callbacks for `model.fit`: TF-Slim's training services."""

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
