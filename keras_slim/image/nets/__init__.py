"""TF-Slim's nets: `nets_factory`, and one module per family.

`nets.build(model_name, num_classes)` builds a net by its `nets_factory`
name; `nets.get_network_fn` is TF-Slim's function of the same name;
`nets.slim_name_map` and `nets.slim_scope` read TF-Slim's checkpoints.
The family modules (`inception_v3`, `resnet_v1`, `vgg`, `lenet`,
`cifarnet`, ...) are imported by `nets_factory`, whose table names the
function of each net.
"""

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
