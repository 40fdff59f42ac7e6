"""Callbacks for `model.fit`: TF-Slim's training services.

On Keras's JAX backend, the services built for it (keras_slim/_jax/
callbacks/) take these names, with the same arguments; the others refuse
JAX with the reason.
"""

from keras_slim import _backend
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

if not _backend.is_tensorflow():
    from keras_slim._jax.callbacks import Checkpoints  # noqa: F811
    from keras_slim._jax.callbacks import LogEveryNSteps  # noqa: F811
    from keras_slim._jax.callbacks import NanLossGuard  # noqa: F811
    from keras_slim._jax.callbacks import StopAtStep  # noqa: F811
    from keras_slim._jax.callbacks import Summaries  # noqa: F811
    from keras_slim._jax.callbacks import Trace  # noqa: F811
    from keras_slim._jax.callbacks import WarmStart  # noqa: F811

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
