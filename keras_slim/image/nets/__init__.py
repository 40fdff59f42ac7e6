"""TF-Slim's nets: `nets_factory`, and one module per family.

`nets.build(model_name, num_classes)` builds a net by its `nets_factory`
name; see `nets_factory` for the names, their image sizes and their
TF-Slim checkpoint names.
"""

from keras_slim.image.nets.nets_factory import NETWORKS
from keras_slim.image.nets.nets_factory import build
from keras_slim.image.nets.nets_factory import default_image_size
from keras_slim.image.nets.nets_factory import minimum_image_size
from keras_slim.image.nets.nets_factory import preprocessing_name
from keras_slim.image.nets.nets_factory import slim_name_map

__all__ = [
    "NETWORKS",
    "build",
    "default_image_size",
    "minimum_image_size",
    "preprocessing_name",
    "slim_name_map",
]
