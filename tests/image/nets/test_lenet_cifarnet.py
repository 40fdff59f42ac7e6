"""keras_slim's lenet and cifarnet against TF-Slim's (research/slim
nets/lenet.py, nets/cifarnet.py; tf_slim lacks them, so research_nets.py
writes them over tf_slim's own layers for the peer).

At TF-Slim's sizes (28 pixels of one channel for MNIST, 32 of three for
CIFAR-10): a TF-Slim checkpoint gives the same pre-logit features and
logits, every end point has TF-Slim's shape, and the weight decay is on
the same weights with the same penalty (cifarnet's arg scope decays its
fully connected weights only, not the convolutions nor the logits).
"""

import keras
import numpy as np
import pytest

from keras_slim.image import nets
from keras_slim.image.nets._local_response_norm import (
    LocalResponseNormalization,
)
from tests.image.nets import peer

WEIGHT_DECAY = 0.004
# name: (image size, channels, the pre-logit features' end point, the
# images' range: cifarnet's LRN (alpha 0.001 / 9) changes activations of
# the initializers' scale by 1e-5; on images in [-100, 100) a depth
# radius of 3 instead of 4 moves the features by a tenth)
NETS = {"lenet": (28, 1, "fc3", 1.0), "cifarnet": (32, 3, "fc4", 100.0)}

SPECS = [
    {
        "name": name,
        "module": "research_nets",
        "function": name,
        "arg_scope": f"{name}_arg_scope",
        "arg_scope_kwargs": {"weight_decay": WEIGHT_DECAY},
        "num_classes": 10,
        "image_size": size,
        "channels": channels,
        "batch": 2,
        "features": features,
        "image_range": image_range,
        "checkpoint": True,
    }
    for name, (size, channels, features, image_range) in NETS.items()
]


@pytest.mark.parametrize("name", sorted(NETS))
def test_gives_tf_slims_function_from_its_checkpoint(slim, name):
    size, channels, features, _ = NETS[name]
    model = peer.build(name, 10, size, features, channels=channels)
    peer.assert_same_function(name, model, slim, name)
    images = keras.Input((size, size, channels))
    logits, end_points = nets.get_network_fn(name, 10)(images)
    peer.assert_same_end_point_shapes(
        name, slim, name, {**end_points, "logits": logits}
    )


@pytest.mark.parametrize("name", sorted(NETS))
def test_weight_decay_is_tf_slims(slim, name):
    _, channels, _, _ = NETS[name]
    model = nets.build(name, 10, channels=channels, weight_decay=WEIGHT_DECAY)
    peer.restore(name, model, slim, name)
    name_map = nets.slim_name_map(name)
    decayed = sorted(
        name_map(v.path) for v in model.trainable_weights if v.regularizer
    )
    with np.load(slim / f"{name}.npz") as expected:
        assert decayed == sorted(expected["penalized"])
        np.testing.assert_allclose(
            float(keras.ops.sum(keras.ops.stack(model.losses))),
            expected["penalties"].sum(),
            rtol=1e-5,
        )


def test_local_response_normalization_is_the_formula_and_round_trips():
    """`x / (bias + alpha * sum of x**2 over channels c-r..c+r) ** beta`,
    in numpy; the layer rebuilt from its config gives the same."""
    x = np.random.default_rng(0).normal(0, 30, (2, 3, 3, 8))
    radius, bias, alpha, beta = 2, 1.5, 0.01, 0.75
    squares = np.square(x)
    window = np.stack(
        [
            squares[..., max(0, c - radius) : c + radius + 1].sum(-1)
            for c in range(8)
        ],
        axis=-1,
    )
    expected = x / (bias + alpha * window) ** beta
    layer = LocalResponseNormalization(
        radius, bias=bias, alpha=alpha, beta=beta, name="norm1"
    )
    again = LocalResponseNormalization.from_config(layer.get_config())
    for got in (layer(x.astype("float32")), again(x.astype("float32"))):
        np.testing.assert_allclose(got, expected, rtol=1e-5)
    assert again.name == "norm1"
