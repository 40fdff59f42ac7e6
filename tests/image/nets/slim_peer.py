"""TF-Slim's own nets (the `tf_slim` package), built in graph mode.

Usage: python slim_peer.py SPECS_JSON OUT_DIR

For each spec (a dict: `name`, `module` of `tf_slim.nets` or
`research_nets` (research_nets.py here), `function`, `arg_scope`,
`arg_scope_kwargs`, `kwargs`, `num_classes`, `image_size`, `channels`
(3 by default), `batch`, `image_range` (the batch is uniform in
`[-image_range, image_range)`, 1 by default), `features`: the end point
of the pre-logit features, `checkpoint`: whether to save
one), builds the net in its own graph with `is_training=False`, gives
every variable random values (the initializers' weights; batch-norm
statistics, `beta` and `gamma` drawn at random), and writes
`OUT_DIR/<name>.json`: the variables' names and shapes,
`OUT_DIR/<name>.end_points.json`: the end points' shapes; with
`checkpoint`, also `OUT_DIR/<name>/model.ckpt` (TF1, TF-Slim's names) and
`OUT_DIR/<name>.npz`: a fixed random batch (`images`), its `logits` and
its `features`, and the weight decay's `penalties` (TF-Slim's
regularization losses, of the `arg_scope_kwargs` given to the arg scope)
with the variables they are on (`penalized`). TF-Slim 1.1.0 on TF 2.21
needs two shims (see ../shared/notes/keras3-feasibility.md); they are
installed before `tf_slim` is imported.
"""

import importlib
import json
import os
import sys

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf_keras.src.legacy_tf_layers as legacy  # noqa: E402
import tf_keras.src.legacy_tf_layers.normalization  # noqa: E402,F401
from tensorflow.python.framework import ops  # noqa: E402

# tf_slim 1.1.0 was written against TF 2.x before these moved.
ops.Tensor = tf.Tensor
ops.IndexedSlices = tf.IndexedSlices
sys.modules["tf_keras.legacy_tf_layers"] = legacy
sys.modules["tf_keras.legacy_tf_layers.normalization"] = legacy.normalization

tf1 = tf.compat.v1
tf1.disable_v2_behavior()

import tf_slim as slim  # noqa: E402


def _randomize(session, rng):
    """Random batch-norm statistics and affine terms, and biases; the
    weights as their initializers drew them. One run for all of them."""
    feeds, assigns = {}, []
    for variable in tf1.global_variables():
        name = variable.op.name
        shape = variable.shape.as_list()
        if name.endswith("moving_mean") or name.endswith("beta"):
            value = rng.normal(0.0, 0.1, shape)
        elif name.endswith("moving_variance"):
            value = rng.uniform(0.5, 1.5, shape)
        elif name.endswith("gamma"):
            value = rng.uniform(0.8, 1.2, shape)
        elif name.endswith("biases"):
            value = rng.normal(0.0, 0.1, shape)
        else:
            continue
        placeholder = tf1.placeholder(variable.dtype.base_dtype, shape)
        assigns.append(variable.assign(placeholder))
        feeds[placeholder] = value.astype(np.float32)
    if assigns:
        session.run(assigns, feeds)


def _end_point(end_points, graph, name):
    if name in end_points:
        return end_points[name]
    return graph.get_tensor_by_name(name)


def _module(name):
    """`tf_slim.nets.<name>`, or research_nets.py beside this script (the
    research/slim nets tf_slim lacks)."""
    if name == "research_nets":
        return importlib.import_module("research_nets")
    return importlib.import_module(f"tf_slim.nets.{name}")


def _penalized(penalty):
    """The variable a regularization loss is on: its scope, where
    tf_slim's layers still call `weights` by the core layer's name."""
    name = penalty.name.split("/Regularizer/")[0]
    return name.removesuffix("/kernel") + "/weights"


def build(spec, out_dir):
    module = _module(spec["module"])
    function = getattr(module, spec["function"])
    arg_scope = getattr(module, spec["arg_scope"])
    size = spec["image_size"]
    channels = spec.get("channels", 3)
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [None, size, size, channels])
        with slim.arg_scope(arg_scope(**spec.get("arg_scope_kwargs", {}))):
            logits, end_points = function(
                images,
                spec["num_classes"],
                is_training=False,
                **spec.get("kwargs", {}),
            )
        variables = {
            v.op.name: v.shape.as_list() for v in tf1.global_variables()
        }
        with open(os.path.join(out_dir, f"{spec['name']}.json"), "w") as f:
            json.dump(variables, f)
        shapes = {
            key: tensor.shape.as_list()[1:]
            for key, tensor in end_points.items()
        }
        shapes["logits"] = logits.shape.as_list()[1:]
        path = os.path.join(out_dir, f"{spec['name']}.end_points.json")
        with open(path, "w") as f:
            json.dump(shapes, f)
        penalties = tf1.losses.get_regularization_losses()
        if not spec.get("checkpoint"):
            return
        features = _end_point(end_points, graph, spec["features"])
        rng = np.random.default_rng(0)
        high = spec.get("image_range", 1.0)
        batch = rng.uniform(-high, high, (spec["batch"], size, size, channels))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            _randomize(session, rng)
            prefix = os.path.join(out_dir, spec["name"], "model.ckpt")
            tf1.train.Saver().save(session, prefix, write_meta_graph=False)
            got_logits, got_features, got_penalties = session.run(
                [logits, features, penalties],
                {images: batch.astype(np.float32)},
            )
        np.savez(
            os.path.join(out_dir, f"{spec['name']}.npz"),
            images=batch.astype(np.float32),
            logits=got_logits,
            features=got_features,
            penalties=np.array(got_penalties, np.float64),
            penalized=np.array([_penalized(t) for t in penalties], str),
        )


def main():
    specs_path, out_dir = sys.argv[1:3]
    with open(specs_path) as f:
        specs = json.load(f)
    for spec in specs:
        build(spec, out_dir)
    print("done")


if __name__ == "__main__":
    main()
