"""keras_slim's inception_v1, v2 and v3 against TF-Slim's own
(tf_slim.nets.inception_v1, _v2, _v3).

Each net from a TF-Slim checkpoint gives TF-Slim's pooled features and
logits, with exactly TF-Slim's variables (inception_v3's `AuxLogits`
included), at small sizes TF-Slim's nets build at: inception_v1 at 193
(its 7x7 pool needs `Mixed_5c` 7x7), inception_v2 at 75 (an odd size
through its `SAME` strides, a 3x3 final pool), inception_v3 at 107 (its
smallest with `AuxLogits`, whose 5x5 pool needs `Mixed_6e` 5x5).
"""

import keras
import numpy as np
import pytest

from keras_slim import checkpoints
from keras_slim.image import nets
from keras_slim.image.nets import inception_v2
from tests.image.nets import peer

#: name: (model_name, num_classes, image_size, the Keras features end
#: point, TF-Slim's features tensor).
CASES = {
    "inception_v1": (
        "inception_v1",
        5,
        193,
        "AvgPool_0a_7x7",
        "InceptionV1/Logits/MaxPool_0a_7x7/AvgPool:0",
    ),
    "inception_v2": (
        "inception_v2",
        5,
        75,
        "AvgPool_1a",
        "InceptionV2/Logits/AvgPool_1a_3x3/AvgPool:0",
    ),
    "inception_v3": ("inception_v3", 5, 107, "PreLogits", "PreLogits"),
}

SPECS = [
    {
        "name": name,
        "module": model_name,
        "function": model_name,
        "arg_scope": f"{model_name}_arg_scope",
        "num_classes": num_classes,
        "image_size": image_size,
        "batch": 2,
        "features": slim_features,
        "checkpoint": True,
    }
    for name, (model_name, num_classes, image_size, _, slim_features) in (
        CASES.items()
    )
]


@pytest.fixture(scope="module")
def models():
    """The Keras nets of `CASES`, built once for the module."""
    built = {}

    def get(name):
        if name not in built:
            model_name, num_classes, image_size, features, _ = CASES[name]
            built[name] = peer.build(
                model_name, num_classes, image_size, features
            )
        return built[name]

    return get


@pytest.mark.parametrize("name", list(CASES))
def test_gives_tf_slims_function_from_its_checkpoint(slim, models, name):
    model_name = CASES[name][0]
    peer.assert_same_function(model_name, models(name), slim, name)


def test_slim_name_map_names_inception_v2s_separable_convolution():
    name_map = nets.slim_name_map("inception_v2")
    assert name_map("Conv2d_1a_7x7/depthwise_kernel") == (
        "InceptionV2/Conv2d_1a_7x7/depthwise_weights"
    )
    assert name_map("Conv2d_1a_7x7/pointwise_kernel") == (
        "InceptionV2/Conv2d_1a_7x7/pointwise_weights"
    )


@pytest.mark.parametrize(
    "scope", ["InceptionV3/AuxLogits", "InceptionV3/Logits"]
)
def test_slim_scope_selects_the_heads_variables(slim, models, scope):
    pattern = nets.slim_scope("inception_v3", scope)
    name_map = nets.slim_name_map("inception_v3")
    selected = checkpoints.variables_to_restore(
        models("inception_v3"), include=pattern
    )
    theirs = peer.slim_variables(slim, "inception_v3")
    assert sorted(name_map(v.path) for v in selected) == sorted(
        name for name in theirs if name.startswith(f"{scope}/")
    )


def test_pooled_features_without_logits_are_tf_slims(slim):
    """`num_classes=None` with `global_pool=True` (research/slim's): the
    whole `Mixed_5c` averaged, here TF-Slim's 3x3 pool, its features."""
    _, _, image_size, _, _ = CASES["inception_v2"]
    images = keras.Input((image_size, image_size, 3))
    features, end_points = inception_v2.inception_v2(
        images, None, global_pool=True
    )
    assert "Logits" not in end_points
    model = keras.Model(images, features)
    name_map = nets.slim_name_map("inception_v2")
    var_map = {
        name_map(v.path): v for v in checkpoints.variables_to_restore(model)
    }
    prefix = str(slim / "inception_v2" / "model.ckpt")
    assert checkpoints.assign_from_checkpoint(var_map, prefix) == len(var_map)
    with np.load(slim / "inception_v2.npz") as expected:
        got = np.asarray(model(expected["images"], training=False))
        want = expected["features"]
    assert got.shape == want.shape
    np.testing.assert_allclose(
        got, want, rtol=0, atol=1e-4 * np.abs(want).max()
    )
