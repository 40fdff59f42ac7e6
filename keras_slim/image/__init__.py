"""TF-Slim's image classification app on keras_slim: research/slim's map."""

from keras_slim.image import datasets
from keras_slim.image import nets
from keras_slim.image import preprocessing

__all__ = ["datasets", "nets", "preprocessing"]
