"""keras_slim's ResNets against TF-Slim's own (tf_slim.nets.resnet_v1/v2).

From a TF-Slim checkpoint, at 64 pixels: `resnet_v1_50` as classifiers
use it (the pooled features and the logits), and `resnet_v2_50` for
dense prediction (`output_stride=16`, atrous `block4`, no global pool:
`block4` and the logits compared pixel by pixel) have TF-Slim's
variables and give its values. The peer takes about 14 s a net on a slow
machine (most of it loading the random values), hence two; the deeper
nets (7-10 s each in TF-Slim's graph alone) differ from the 50s only in
their blocks, compared with those written in tf_slim's source.
"""

import ast
import importlib.util
import pathlib

import keras
import pytest

from keras_slim.image.nets import resnet_v1
from keras_slim.image.nets import resnet_v2
from tests.image.nets import peer

SIZE = 64
CLASSES = 5
MODULES = {"resnet_v1": resnet_v1, "resnet_v2": resnet_v2}
SPECS = [
    {
        "name": name,
        "module": name[: len("resnet_vN")],
        "function": f"{name[: len('resnet_vN')]}_50",
        "arg_scope": "resnet_arg_scope",
        "num_classes": CLASSES,
        "image_size": SIZE,
        "batch": 2,
        "checkpoint": True,
        **spec,
    }
    for name, spec in (
        ("resnet_v1_50", {"features": "resnet_v1_50/pool5:0"}),
        (
            "resnet_v2_50_dense",
            {
                "features": "resnet_v2_50/block4",
                "kwargs": {"global_pool": False, "output_stride": 16},
            },
        ),
    )
]


def test_resnet_v1_50_gives_tf_slims_function_from_its_checkpoint(slim):
    model = peer.build("resnet_v1_50", CLASSES, SIZE, "global_pool")
    assert model.outputs[0].shape == (None, CLASSES)
    peer.assert_same_function("resnet_v1_50", model, slim, "resnet_v1_50")


def test_dense_resnet_v2_50_gives_tf_slims_function_from_its_checkpoint(
    slim,
):
    keras.utils.set_random_seed(1)
    images = keras.Input((SIZE, SIZE, 3))
    logits, end_points = resnet_v2.resnet_v2_50(
        images,
        CLASSES,
        global_pool=False,
        output_stride=16,
        spatial_squeeze=False,
        sc=resnet_v2.resnet_arg_scope(weight_decay=0.0),
    )
    assert logits.shape == (None, SIZE // 16, SIZE // 16, CLASSES)
    model = keras.Model(images, [logits, end_points["block4"]])
    peer.assert_same_function("resnet_v2_50", model, slim, "resnet_v2_50_dense")


@pytest.mark.parametrize(
    "output_stride, message",
    [
        (6, "The output_stride needs to be a multiple of 4."),
        (12, "The target output_stride cannot be reached."),
    ],
)
def test_an_unreachable_output_stride_raises(output_stride, message):
    images = keras.Input((32, 32, 3))
    with pytest.raises(ValueError, match=message):
        resnet_v2.resnet_v2_50(images, output_stride=output_stride)


def _slim_blocks(module, function):
    """The arguments of the `resnet_vN_block(...)` calls of a net
    function in tf_slim's source: `(args, kwargs)` pairs."""
    package = importlib.util.find_spec("tf_slim").submodule_search_locations
    source = pathlib.Path(package[0], "nets", f"{module}.py").read_text()
    (node,) = [
        node
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.FunctionDef) and node.name == function
    ]
    return [
        (
            [ast.literal_eval(arg) for arg in call.args],
            {k.arg: ast.literal_eval(k.value) for k in call.keywords},
        )
        for call in ast.walk(node)
        if isinstance(call, ast.Call)
        and getattr(call.func, "id", None) == f"{module}_block"
    ]


def _our_blocks(monkeypatch, module, function):
    """The blocks our net function makes, and what it passes to the
    generic function besides them."""
    ours = MODULES[module]
    calls = []

    def generic(inputs, blocks, *args, **kwargs):
        calls.append((blocks, args, kwargs))
        return None, {}

    monkeypatch.setattr(ours, module, generic)
    getattr(ours, function)("images", CLASSES)
    monkeypatch.undo()
    ((blocks, args, kwargs),) = calls
    return blocks, (args, kwargs)


@pytest.mark.parametrize(
    "name",
    [
        f"resnet_{version}_{depth}"
        for version in ("v1", "v2")
        for depth in (50, 101, 152, 200)
    ],
)
def test_each_resnet_has_tf_slims_blocks(monkeypatch, name):
    module = name[: len("resnet_vN")]
    block_fn = getattr(MODULES[module], f"{module}_block")
    want = [block_fn(*a, **k) for a, k in _slim_blocks(module, name)]
    assert len(want) == 4
    got, call = _our_blocks(monkeypatch, module, name)
    assert got == want
    # The same generic call as the 50's, which the checkpoint test covers.
    assert call == _our_blocks(monkeypatch, module, f"{module}_50")[1]
