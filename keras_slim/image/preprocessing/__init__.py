"""TF-Slim's preprocessing: `preprocessing_factory`, and one module per
family (`inception_preprocessing`, `vgg_preprocessing`, and the digits')."""

from keras_slim.image.preprocessing.preprocessing_factory import PREPROCESSING
from keras_slim.image.preprocessing.preprocessing_factory import (
    get_preprocessing,
)
from keras_slim.image.preprocessing.vgg_preprocessing import VGG_MEANS

__all__ = ["PREPROCESSING", "VGG_MEANS", "get_preprocessing"]
