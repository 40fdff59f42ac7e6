"""keras_slim's training services on Keras's JAX backend: the callbacks
`keras_slim.callbacks` gives there (same names, arguments and guarantees
as on TensorFlow; docs/tutorials/training_services.md says what differs)."""

from keras_slim._jax.callbacks.checkpoints import Checkpoints
from keras_slim._jax.callbacks.log_every_n_steps import LogEveryNSteps
from keras_slim._jax.callbacks.nan_loss_guard import NanLossGuard
from keras_slim._jax.callbacks.stop_at_step import StopAtStep
from keras_slim._jax.callbacks.summaries import Summaries
from keras_slim._jax.callbacks.trace import Trace
from keras_slim._jax.callbacks.warm_start import WarmStart

__all__ = [
    "Checkpoints",
    "LogEveryNSteps",
    "NanLossGuard",
    "StopAtStep",
    "Summaries",
    "Trace",
    "WarmStart",
]
