"""keras_slim: TF-Slim's training machinery on Keras 3."""

import importlib

from keras_slim import _startup

# Before TensorFlow loads (Keras loads it on its TensorFlow backend): see
# _startup.py.
_startup.quiet_tensorflow_for_commands()

from keras_slim import _backend  # noqa: E402
from keras_slim import callbacks  # noqa: E402
from keras_slim import checkpoints  # noqa: E402
from keras_slim import gradients  # noqa: E402
from keras_slim import training_state  # noqa: E402
from keras_slim.deployment import DeploymentConfig  # noqa: E402
from keras_slim.errors import CheckpointSaveError  # noqa: E402
from keras_slim.errors import NanLossDuringTrainingError  # noqa: E402
from keras_slim.errors import TrainingPreemptedError  # noqa: E402
from keras_slim.learning import train  # noqa: E402
from keras_slim.model import SlimModel  # noqa: E402
from keras_slim.model import wrap  # noqa: E402
from keras_slim.policy import GradientPolicy  # noqa: E402

#: The submodules that run on Keras's TensorFlow backend only (TF1's
#: optimizers, its moving averages): imported here on that backend, on
#: first access on the others.
_TENSORFLOW_MODULES = ("moving_averages", "optimizers")

if _backend.is_tensorflow():
    from keras_slim import moving_averages  # noqa: E402
    from keras_slim import optimizers  # noqa: E402

_startup.started()

__version__ = "0.1.0"

__all__ = [
    "CheckpointSaveError",
    "DeploymentConfig",
    "GradientPolicy",
    "NanLossDuringTrainingError",
    "SlimModel",
    "TrainingPreemptedError",
    "callbacks",
    "checkpoints",
    "gradients",
    "moving_averages",
    "optimizers",
    "train",
    "training_state",
    "wrap",
]


def __getattr__(name):
    """Imports a submodule of `_TENSORFLOW_MODULES` on first access
    (PEP 562), off Keras's TensorFlow backend.

    Args:
        name: The attribute asked for.

    Returns:
        The submodule.

    Raises:
        AttributeError: for any other name.
    """
    if name in _TENSORFLOW_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
