"""TF-Slim's nets: `nets_factory`, and one module per family."""

from keras_slim.image.nets.nets_factory import NETWORKS
from keras_slim.image.nets.nets_factory import build
from keras_slim.image.nets.nets_factory import default_image_size
from keras_slim.image.nets.nets_factory import get_network_fn
from keras_slim.image.nets.nets_factory import minimum_image_size
from keras_slim.image.nets.nets_factory import preprocessing_name
from keras_slim.image.nets.nets_factory import slim_name_map
from keras_slim.image.nets.nets_factory import slim_scope

__all__ = [
    "NETWORKS",
    "build",
    "default_image_size",
    "get_network_fn",
    "minimum_image_size",
    "preprocessing_name",
    "slim_name_map",
    "slim_scope",
]
