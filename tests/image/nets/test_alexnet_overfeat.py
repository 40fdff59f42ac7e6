"""keras_slim's alexnet_v2 and overfeat against TF-Slim's own
(tf_slim.nets.alexnet, tf_slim.nets.overfeat).

At TF-Slim's sizes (224 and 231: their `fc6` is a `VALID` convolution the
size of `pool5`): for alexnet_v2, a TF-Slim checkpoint gives the same
`fc7` features and logits; for overfeat (a 0.6 GB checkpoint), the
variables and every end point's shape are TF-Slim's. AlexNet also
builds at 195 (its smallest side, `pool5` still 5x5), as TF-Slim's does.
"""

import keras
import pytest

from keras_slim.image import nets
from tests.image.nets import peer

SPECS = [
    {
        "name": name,
        "module": module,
        "function": name,
        "arg_scope": f"{name}_arg_scope",
        "num_classes": 10,
        "image_size": size,
        "batch": 2,
        "features": f"{name}/fc7",
        "checkpoint": True,
    }
    for name, module, size in (("alexnet_v2", "alexnet", 224),)
] + [
    {
        "name": "overfeat",
        "module": "overfeat",
        "function": "overfeat",
        "arg_scope": "overfeat_arg_scope",
        "num_classes": 10,
        "image_size": 231,
    },
    {
        "name": "alexnet_v2_195",
        "module": "alexnet",
        "function": "alexnet_v2",
        "arg_scope": "alexnet_v2_arg_scope",
        "num_classes": 10,
        "image_size": 195,
    },
]


def test_alexnet_gives_tf_slims_function_from_its_checkpoint(slim):
    model = peer.build("alexnet_v2", 10, 224, "fc7")
    peer.assert_same_function("alexnet_v2", model, slim, "alexnet_v2")


def test_overfeat_has_tf_slims_variables_and_shapes(slim):
    """Its checkpoint is 0.6 GB: the same vocabulary as alexnet_v2's,
    compared by its variables and every end point's shape."""
    images = keras.Input((231, 231, 3))
    logits, end_points = nets.get_network_fn("overfeat", 10)(images)
    model = keras.Model(images, logits)
    peer.assert_same_variables("overfeat", model, slim, "overfeat")
    peer.assert_same_end_point_shapes(
        "overfeat", slim, "overfeat", {**end_points, "logits": logits}
    )


def test_alexnet_builds_down_to_195_as_tf_slims(slim):
    model = peer.build("alexnet_v2", 10, 195, "fc7")
    peer.assert_same_variables("alexnet_v2", model, slim, "alexnet_v2_195")
    assert model.outputs[0].shape == (None, 10)
    with pytest.raises(ValueError, match="zero or negative"):
        nets.get_network_fn("alexnet_v2", 10)(keras.Input((194, 194, 3)))
