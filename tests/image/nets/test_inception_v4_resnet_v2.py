"""keras_slim's inception_v4 and inception_resnet_v2 against published facts.

TF-Slim's own nets for these are in tensorflow/models (research/slim
nets/inception_v4.py, nets/inception_resnet_v2.py), not in the tf_slim
package, so no peer builds them here. What is published about them:

- their variables: the tables below, one per block, written from the
  block definitions of those two files (scope, kernel, depth, input),
  with each block's input depth from their tests' end point shapes
  (nets/inception_v4_test.py `testAllEndPointsShapes`,
  nets/inception_resnet_v2_test.py
  `testBuildAndCheckAllEndPointsUptoPreAuxLogits`); a convolution has
  `weights` and `BatchNorm/{beta,moving_mean,moving_variance}` (no
  `gamma`: `batch_norm_scale=False`), or `weights` and `biases` for the
  residual projections, and the fully connected logits `weights` and
  `biases`;
- the end point shapes at 299 pixels, from those tests;
- parameter counts, for 1000 classes and no auxiliary head: Keras
  Applications' InceptionResNetV2, TF-Slim's checkpoint ported, counts
  55,873,736 (keras-team/keras docs/templates/applications.md, its
  moving statistics included); timm's model cards, also ported from
  TF-Slim's checkpoints (huggingface.co/timm/inception_v4.tf_in1k and
  timm/inception_resnet_v2.tf_in1k, "Params (M)"), 42.7 and 55.8 million,
  counting a `gamma` and a `beta` per batch-norm channel and no moving
  statistics. (research/slim's README publishes no parameter counts.)

Then a TF1 checkpoint of `tf.compat.v1` variables under those names loads
every variable through `nets.slim_name_map`, and the net runs on it at its
smallest side, 107 (the auxiliary head's 5x5 `VALID` pool needs the 17x17
maps of 299 pixels at least 5x5).
"""

import contextlib
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim import checkpoints
from keras_slim.image import nets
from tests.image.nets import peer

# Tables: `scope kernel depth input [bias]`. `kernel` is `HxW`, or `fc`
# for a fully connected layer; `depth` a number or `in` (the block's input
# depth); `input` is `in` (the block's input), `-` (the line above), a
# scope above, or `ends` (the concatenation of the last convolution of
# each branch); `bias`: biases, no batch norm.

V4_STEM = """
Conv2d_1a_3x3 3x3 32 in
Conv2d_2a_3x3 3x3 32 -
Conv2d_2b_3x3 3x3 64 -
"""
V4_MIXED_3A = """
Branch_1/Conv2d_0a_3x3 3x3 96 in
"""
V4_MIXED_4A = """
Branch_0/Conv2d_0a_1x1 1x1 64 in
Branch_0/Conv2d_1a_3x3 3x3 96 -
Branch_1/Conv2d_0a_1x1 1x1 64 in
Branch_1/Conv2d_0b_1x7 1x7 64 -
Branch_1/Conv2d_0c_7x1 7x1 64 -
Branch_1/Conv2d_1a_3x3 3x3 96 -
"""
V4_MIXED_5A = """
Branch_0/Conv2d_1a_3x3 3x3 192 in
"""
INCEPTION_A = """
Branch_0/Conv2d_0a_1x1 1x1 96 in
Branch_1/Conv2d_0a_1x1 1x1 64 in
Branch_1/Conv2d_0b_3x3 3x3 96 -
Branch_2/Conv2d_0a_1x1 1x1 64 in
Branch_2/Conv2d_0b_3x3 3x3 96 -
Branch_2/Conv2d_0c_3x3 3x3 96 -
Branch_3/Conv2d_0b_1x1 1x1 96 in
"""
REDUCTION_A = """
Branch_0/Conv2d_1a_3x3 3x3 384 in
Branch_1/Conv2d_0a_1x1 1x1 192 in
Branch_1/Conv2d_0b_3x3 3x3 224 -
Branch_1/Conv2d_1a_3x3 3x3 256 -
"""
INCEPTION_B = """
Branch_0/Conv2d_0a_1x1 1x1 384 in
Branch_1/Conv2d_0a_1x1 1x1 192 in
Branch_1/Conv2d_0b_1x7 1x7 224 -
Branch_1/Conv2d_0c_7x1 7x1 256 -
Branch_2/Conv2d_0a_1x1 1x1 192 in
Branch_2/Conv2d_0b_7x1 7x1 192 -
Branch_2/Conv2d_0c_1x7 1x7 224 -
Branch_2/Conv2d_0d_7x1 7x1 224 -
Branch_2/Conv2d_0e_1x7 1x7 256 -
Branch_3/Conv2d_0b_1x1 1x1 128 in
"""
REDUCTION_B = """
Branch_0/Conv2d_0a_1x1 1x1 192 in
Branch_0/Conv2d_1a_3x3 3x3 192 -
Branch_1/Conv2d_0a_1x1 1x1 256 in
Branch_1/Conv2d_0b_1x7 1x7 256 -
Branch_1/Conv2d_0c_7x1 7x1 320 -
Branch_1/Conv2d_1a_3x3 3x3 320 -
"""
INCEPTION_C = """
Branch_0/Conv2d_0a_1x1 1x1 256 in
Branch_1/Conv2d_0a_1x1 1x1 384 in
Branch_1/Conv2d_0b_1x3 1x3 256 Branch_1/Conv2d_0a_1x1
Branch_1/Conv2d_0c_3x1 3x1 256 Branch_1/Conv2d_0a_1x1
Branch_2/Conv2d_0a_1x1 1x1 384 in
Branch_2/Conv2d_0b_3x1 3x1 448 -
Branch_2/Conv2d_0c_1x3 1x3 512 -
Branch_2/Conv2d_0d_1x3 1x3 256 Branch_2/Conv2d_0c_1x3
Branch_2/Conv2d_0e_3x1 3x1 256 Branch_2/Conv2d_0c_1x3
Branch_3/Conv2d_0b_1x1 1x1 256 in
"""
V4_AUX = """
Conv2d_1b_1x1 1x1 128 in
Conv2d_2a {aux} 768 -
Aux_logits fc 1001 -
"""
LOGITS = """
Logits fc 1001 in
"""

#: (scope, table, input depth) of InceptionV4, in order.
INCEPTION_V4 = (
    ("", V4_STEM, 3),
    ("Mixed_3a", V4_MIXED_3A, 64),
    ("Mixed_4a", V4_MIXED_4A, 160),
    ("Mixed_5a", V4_MIXED_5A, 192),
    *((f"Mixed_5{c}", INCEPTION_A, 384) for c in "bcde"),
    ("Mixed_6a", REDUCTION_A, 384),
    *((f"Mixed_6{c}", INCEPTION_B, 1024) for c in "bcdefgh"),
    ("Mixed_7a", REDUCTION_B, 1024),
    *((f"Mixed_7{c}", INCEPTION_C, 1536) for c in "bcd"),
    ("AuxLogits", V4_AUX, 1024),
    ("Logits", LOGITS, 1536),
)

IR_STEM = """
Conv2d_1a_3x3 3x3 32 in
Conv2d_2a_3x3 3x3 32 -
Conv2d_2b_3x3 3x3 64 -
Conv2d_3b_1x1 1x1 80 -
Conv2d_4a_3x3 3x3 192 -
"""
IR_MIXED_5B = """
Branch_0/Conv2d_1x1 1x1 96 in
Branch_1/Conv2d_0a_1x1 1x1 48 in
Branch_1/Conv2d_0b_5x5 5x5 64 -
Branch_2/Conv2d_0a_1x1 1x1 64 in
Branch_2/Conv2d_0b_3x3 3x3 96 -
Branch_2/Conv2d_0c_3x3 3x3 96 -
Branch_3/Conv2d_0b_1x1 1x1 64 in
"""
BLOCK35 = """
Branch_0/Conv2d_1x1 1x1 32 in
Branch_1/Conv2d_0a_1x1 1x1 32 in
Branch_1/Conv2d_0b_3x3 3x3 32 -
Branch_2/Conv2d_0a_1x1 1x1 32 in
Branch_2/Conv2d_0b_3x3 3x3 48 -
Branch_2/Conv2d_0c_3x3 3x3 64 -
Conv2d_1x1 1x1 in ends bias
"""
IR_MIXED_6A = """
Branch_0/Conv2d_1a_3x3 3x3 384 in
Branch_1/Conv2d_0a_1x1 1x1 256 in
Branch_1/Conv2d_0b_3x3 3x3 256 -
Branch_1/Conv2d_1a_3x3 3x3 384 -
"""
BLOCK17 = """
Branch_0/Conv2d_1x1 1x1 192 in
Branch_1/Conv2d_0a_1x1 1x1 128 in
Branch_1/Conv2d_0b_1x7 1x7 160 -
Branch_1/Conv2d_0c_7x1 7x1 192 -
Conv2d_1x1 1x1 in ends bias
"""
IR_MIXED_7A = """
Branch_0/Conv2d_0a_1x1 1x1 256 in
Branch_0/Conv2d_1a_3x3 3x3 384 -
Branch_1/Conv2d_0a_1x1 1x1 256 in
Branch_1/Conv2d_1a_3x3 3x3 288 -
Branch_2/Conv2d_0a_1x1 1x1 256 in
Branch_2/Conv2d_0b_3x3 3x3 288 -
Branch_2/Conv2d_1a_3x3 3x3 320 -
"""
BLOCK8 = """
Branch_0/Conv2d_1x1 1x1 192 in
Branch_1/Conv2d_0a_1x1 1x1 192 in
Branch_1/Conv2d_0b_1x3 1x3 224 -
Branch_1/Conv2d_0c_3x1 3x1 256 -
Conv2d_1x1 1x1 in ends bias
"""
IR_TOP = """
Conv2d_7b_1x1 1x1 1536 in
"""
IR_AUX = """
Conv2d_1b_1x1 1x1 128 in
Conv2d_2a_5x5 {aux} 768 -
Logits fc 1001 -
"""

#: (scope, table, input depth) of InceptionResnetV2, in order.
INCEPTION_RESNET_V2 = (
    ("", IR_STEM, 3),
    ("Mixed_5b", IR_MIXED_5B, 192),
    *((f"Repeat/block35_{i}", BLOCK35, 320) for i in range(1, 11)),
    ("Mixed_6a", IR_MIXED_6A, 320),
    *((f"Repeat_1/block17_{i}", BLOCK17, 1088) for i in range(1, 21)),
    ("Mixed_7a", IR_MIXED_7A, 1088),
    *((f"Repeat_2/block8_{i}", BLOCK8, 2080) for i in range(1, 10)),
    ("Block8", BLOCK8, 2080),
    ("", IR_TOP, 2080),
    ("AuxLogits", IR_AUX, 1088),
    ("Logits", LOGITS, 1536),
)

NETS = {
    "inception_v4": ("InceptionV4", INCEPTION_V4),
    "inception_resnet_v2": ("InceptionResnetV2", INCEPTION_RESNET_V2),
}

#: End point shapes at 299 (batch aside), from research/slim's tests.
V4_END_POINTS = {
    "Conv2d_1a_3x3": (149, 149, 32),
    "Conv2d_2a_3x3": (147, 147, 32),
    "Conv2d_2b_3x3": (147, 147, 64),
    "Mixed_3a": (73, 73, 160),
    "Mixed_4a": (71, 71, 192),
    "Mixed_5a": (35, 35, 384),
    **{f"Mixed_5{c}": (35, 35, 384) for c in "bcde"},
    "Mixed_6a": (17, 17, 1024),
    **{f"Mixed_6{c}": (17, 17, 1024) for c in "bcdefgh"},
    "Mixed_7a": (8, 8, 1536),
    **{f"Mixed_7{c}": (8, 8, 1536) for c in "bcd"},
    "AuxLogits": (1001,),
    "global_pool": (1, 1, 1536),
    "PreLogitsFlatten": (1536,),
    "Logits": (1001,),
    "Predictions": (1001,),
}
IR_END_POINTS = {
    "Conv2d_1a_3x3": (149, 149, 32),
    "Conv2d_2a_3x3": (147, 147, 32),
    "Conv2d_2b_3x3": (147, 147, 64),
    "MaxPool_3a_3x3": (73, 73, 64),
    "Conv2d_3b_1x1": (73, 73, 80),
    "Conv2d_4a_3x3": (71, 71, 192),
    "MaxPool_5a_3x3": (35, 35, 192),
    "Mixed_5b": (35, 35, 320),
    "Mixed_6a": (17, 17, 1088),
    "PreAuxLogits": (17, 17, 1088),
    "Mixed_7a": (8, 8, 2080),
    "Conv2d_7b_1x1": (8, 8, 1536),
    "AuxLogits": (1001,),
    "global_pool": (1, 1, 1536),
    "PreLogitsFlatten": (1536,),
    "Logits": (1001,),
    "Predictions": (1001,),
}
END_POINTS = {
    "inception_v4": V4_END_POINTS,
    "inception_resnet_v2": IR_END_POINTS,
}

#: The smallest side the nets build at (with their auxiliary head).
MINIMUM_SIZE = 107


def slim_variables(model_name, aux_kernel=(5, 5)):
    """TF-Slim's variables of the net, 1001 classes: `{name: shape}`."""
    net_scope, blocks = NETS[model_name]
    variables = {}
    for block, table, depth_in in blocks:
        prefix = "/".join(filter(None, (net_scope, block)))
        depths = {}
        previous = None
        table = table.format(aux="x".join(map(str, aux_kernel)))
        for line in table.strip().splitlines():
            scope, kernel, depth, source, *bias = line.split()
            depth = depth_in if depth == "in" else int(depth)
            if source == "in":
                cin = depth_in
            elif source == "-":
                cin = previous
            elif source == "ends":
                ends = {s.split("/")[0]: d for s, d in depths.items()}
                cin = sum(ends.values())
            else:
                cin = depths[source]
            name = f"{prefix}/{scope}"
            if kernel == "fc":
                variables[f"{name}/weights"] = (cin, depth)
                variables[f"{name}/biases"] = (depth,)
            else:
                height, width = map(int, kernel.split("x"))
                variables[f"{name}/weights"] = (height, width, cin, depth)
                if bias:
                    variables[f"{name}/biases"] = (depth,)
                else:
                    for v in ("beta", "moving_mean", "moving_variance"):
                        variables[f"{name}/BatchNorm/{v}"] = (depth,)
            depths[scope] = previous = depth
    return variables


@contextlib.contextmanager
def _zero_initial_weights():
    """Builds without drawing random weights (a third of the time of a
    build): these tests read shapes, or replace every value from a
    checkpoint."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            keras.initializers.VarianceScaling,
            "__call__",
            lambda self, shape, dtype=None: keras.ops.zeros(shape, dtype),
        )
        yield


def _build(name, size):
    """The net at `size`, 1001 classes: a model of the logits and the
    auxiliary logits, and the end points."""
    with _zero_initial_weights():
        images = keras.Input((size, size, 3))
        logits, end_points = nets.get_network_fn(name, 1001)(images)
        model = keras.Model(images, [logits, end_points["AuxLogits"]])
    return model, end_points


@pytest.fixture(scope="module", params=sorted(NETS))
def net(request):
    """The net at 299: `(name, end_points, variables)`."""
    name = request.param
    model, end_points = _build(name, 299)
    return name, end_points, peer.keras_variables(name, model)


def test_the_variables_are_tf_slims(net):
    name, _, ours = net
    theirs = slim_variables(name)
    assert len(theirs) == len(ours)
    assert sorted(set(theirs) - set(ours)) == [], "missing in keras_slim"
    assert sorted(set(ours) - set(theirs)) == [], "not in TF-Slim's net"
    assert ours == theirs


def test_the_end_points_have_tf_slims_shapes_at_299(net):
    name, end_points, _ = net
    shapes = {k: tuple(v.shape[1:]) for k, v in end_points.items()}
    assert shapes == END_POINTS[name]


def _counts(variables):
    """Parameters for 1000 classes without the auxiliary head: all
    variables (Keras's count), and trainable ones plus a `gamma` per
    batch-norm channel (timm's)."""
    sizes = {
        k: int(np.prod(s)) for k, s in variables.items() if "AuxLogits" not in k
    }
    one_class = 1536 + 1  # Logits/Logits: a column of weights, a bias.
    total = sum(sizes.values()) - one_class
    statistics = sum(
        n
        for k, n in sizes.items()
        if k.endswith(("moving_mean", "moving_variance"))
    )
    channels = statistics // 2
    return total, total - statistics + channels


def test_the_parameter_counts_are_the_published_ones(net):
    name, _, ours = net
    keras_count, timm_count = _counts(ours)
    if name == "inception_resnet_v2":
        assert keras_count == 55_873_736  # Keras Applications' table
        assert round(timm_count / 1e6, 1) == 55.8  # timm's card
    else:
        assert round(timm_count / 1e6, 1) == 42.7  # timm's card


def _write_tf1_checkpoint(variables, prefix):
    """`tf.compat.v1` variables of these names and shapes, random, saved
    by a TF1 `Saver` (eagerly: the same name-based checkpoint as in a
    graph, in a fraction of the time); returns their values."""
    rng = np.random.default_rng(0)
    values = {}
    for name, shape in variables.items():
        if name.endswith("moving_variance"):
            values[name] = 0.5 + rng.random(shape, dtype=np.float32)
            continue
        value = rng.standard_normal(shape, dtype=np.float32)
        if name.endswith("weights"):  # fan-in scaled: finite logits
            value /= np.sqrt(np.prod(shape[:-1]), dtype=np.float32)
        else:
            value *= np.float32(0.1)
        values[name] = value
    var_list = {n: tf.compat.v1.Variable(v, name=n) for n, v in values.items()}
    tf.compat.v1.train.Saver(var_list=var_list).save(
        None, prefix, write_meta_graph=False
    )
    return values


@pytest.mark.parametrize("name", sorted(NETS))
def test_runs_at_its_smallest_side_from_a_tf1_checkpoint(name, tmp_path):
    model, end_points = _build(name, MINIMUM_SIZE)
    # The auxiliary head's 5x5 VALID pool takes exactly its 5x5 input
    # (a side of 106 makes it 4x4), so its last convolution's kernel,
    # the pool's output, is 1x1.
    aux_input = "Mixed_6h" if name == "inception_v4" else "PreAuxLogits"
    assert end_points[aux_input].shape[1:3] == (5, 5)
    variables = slim_variables(name, aux_kernel=(1, 1))
    name_map = nets.slim_name_map(name)
    var_map = {
        name_map(v.path): v for v in checkpoints.variables_to_restore(model)
    }
    assert {k: tuple(v.shape) for k, v in var_map.items()} == variables
    prefix = os.path.join(tmp_path, "model.ckpt")
    values = _write_tf1_checkpoint(variables, prefix)
    # Name-based: TF1's, no object graph.
    keys = tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    assert sorted(keys) == sorted(values)
    assert checkpoints.assign_from_checkpoint(var_map, prefix) == len(values)
    for key in sorted(values)[::10]:
        np.testing.assert_array_equal(var_map[key].numpy(), values[key])
    size = (1, MINIMUM_SIZE, MINIMUM_SIZE, 3)
    batch = np.random.default_rng(1).uniform(-1, 1, size)
    got, aux = model(batch.astype(np.float32), training=False)
    assert got.shape == aux.shape == (1, 1001)
    assert np.isfinite(got).all() and np.isfinite(aux).all()
    assert np.std(got) > 0 and np.std(aux) > 0
