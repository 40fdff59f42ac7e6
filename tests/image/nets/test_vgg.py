"""keras_slim's VGG nets against TF-Slim's own (tf_slim.nets.vgg).

`vgg_16` at TF-Slim's size (its `fc6` takes 224 pixels and nothing
smaller): a TF-Slim checkpoint gives the same features and logits;
`vgg_a` and `vgg_19`, the same blocks with other counts: the same
variables, names and shapes.
"""

import pytest

from tests.image.nets import peer

SPECS = [
    {
        "name": "vgg_16",
        "module": "vgg",
        "function": "vgg_16",
        "arg_scope": "vgg_arg_scope",
        "num_classes": 10,
        "image_size": 224,
        "batch": 2,
        "features": "vgg_16/fc7",
        "checkpoint": True,
    },
    *(
        {
            "name": name,
            "module": "vgg",
            "function": name,
            "arg_scope": "vgg_arg_scope",
            "num_classes": 1000,
            "image_size": 224,
        }
        for name in ("vgg_a", "vgg_19")
    ),
]


def test_vgg_16_gives_tf_slims_function_from_its_checkpoint(slim):
    model = peer.build("vgg_16", 10, 224, "fc7")
    peer.assert_same_function("vgg_16", model, slim, "vgg_16")


@pytest.mark.parametrize("name", ["vgg_a", "vgg_19"])
def test_the_other_vggs_have_tf_slims_variables(slim, name):
    model = peer.build(name, 1000, 224, "fc7")
    peer.assert_same_variables(name, model, slim, name)
