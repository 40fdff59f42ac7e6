"""keras_slim: TF-Slim's training machinery on Keras 3.

Gradient policies (multipliers, freezing, clipping, NaN checks) applied
after the cross-replica sum, in a `keras.Model` train step; training
services as callbacks for `model.fit`, and `train()` for TF-Slim code;
`DeploymentConfig` for clones, replicas and parameter servers. TF-Slim's
image classification app (the two commands, nets, datasets,
preprocessing) is `keras_slim.image`, built on this library.
"""

from keras_slim import callbacks
from keras_slim import checkpoints
from keras_slim import gradients
from keras_slim import training_state
from keras_slim.deployment import DeploymentConfig
from keras_slim.errors import NanLossDuringTrainingError
from keras_slim.errors import TrainingPreemptedError
from keras_slim.learning import train
from keras_slim.model import SlimModel
from keras_slim.model import wrap
from keras_slim.policy import GradientPolicy

__version__ = "0.1.0"

__all__ = [
    "DeploymentConfig",
    "GradientPolicy",
    "NanLossDuringTrainingError",
    "SlimModel",
    "TrainingPreemptedError",
    "callbacks",
    "checkpoints",
    "gradients",
    "train",
    "training_state",
    "wrap",
]
