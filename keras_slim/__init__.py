"""keras_slim: TF-Slim's training machinery on Keras 3.

Gradient policies (multipliers, freezing, clipping, NaN checks) applied
after the cross-replica sum, in a `keras.Model` train step; training
services as callbacks for `model.fit`, and `train()` for TF-Slim code;
`DeploymentConfig` for clones, replicas and parameter servers; TF1's
`tf.compat.v1.train` optimizers, step for step, in `optimizers`. TF-Slim's
image classification app (the two commands, nets, datasets,
preprocessing) is `keras_slim.image`, built on this library.
"""

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
