"""keras_slim: TF-Slim's training machinery on Keras 3."""

from keras_slim import _startup

# Before TensorFlow loads (the imports below load it): see _startup.py.
_startup.quiet_tensorflow_for_commands()

from keras_slim import callbacks  # noqa: E402
from keras_slim import checkpoints  # noqa: E402
from keras_slim import gradients  # noqa: E402
from keras_slim import moving_averages  # noqa: E402
from keras_slim import optimizers  # noqa: E402
from keras_slim import training_state  # noqa: E402
from keras_slim.deployment import DeploymentConfig  # noqa: E402
from keras_slim.errors import CheckpointSaveError  # noqa: E402
from keras_slim.errors import NanLossDuringTrainingError  # noqa: E402
from keras_slim.errors import TrainingPreemptedError  # noqa: E402
from keras_slim.learning import train  # noqa: E402
from keras_slim.model import SlimModel  # noqa: E402
from keras_slim.model import wrap  # noqa: E402
from keras_slim.policy import GradientPolicy  # noqa: E402

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
