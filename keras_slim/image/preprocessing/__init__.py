"""TF-Slim's preprocessing: `preprocessing_factory`, and one module per
family (`inception_preprocessing`, `vgg_preprocessing`,
`cifarnet_preprocessing`, `lenet_preprocessing`, and the digits')."""

from keras_slim.image.preprocessing import cifarnet_preprocessing
from keras_slim.image.preprocessing import digits_preprocessing
from keras_slim.image.preprocessing import inception_preprocessing
from keras_slim.image.preprocessing import lenet_preprocessing
from keras_slim.image.preprocessing import vgg_preprocessing
from keras_slim.image.preprocessing.preprocessing_factory import PREPROCESSING
from keras_slim.image.preprocessing.preprocessing_factory import (
    get_preprocessing,
)
from keras_slim.image.preprocessing.vgg_preprocessing import VGG_MEANS

__all__ = [
    "PREPROCESSING",
    "VGG_MEANS",
    "cifarnet_preprocessing",
    "digits_preprocessing",
    "get_preprocessing",
    "inception_preprocessing",
    "lenet_preprocessing",
    "vgg_preprocessing",
]
