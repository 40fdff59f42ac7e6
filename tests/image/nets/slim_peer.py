"""TF-Slim's own nets (the `tf_slim` package), built in graph mode.

Usage: python slim_peer.py SPECS_JSON OUT_DIR

For each spec (a dict: `name`, `module` of `tf_slim.nets`, `function`,
`arg_scope`, `kwargs`, `num_classes`, `image_size`, `batch`, `features`:
the end point of the pre-logit features, `checkpoint`: whether to save
one), builds the net in its own graph with `is_training=False`, gives
every variable random values (the initializers' weights; batch-norm
statistics, `beta` and `gamma` drawn at random), and writes
`OUT_DIR/<name>.json`: the variables' names and shapes,
`OUT_DIR/<name>.end_points.json`: the end points' shapes; with
`checkpoint`, also `OUT_DIR/<name>/model.ckpt` (TF1, TF-Slim's names) and
`OUT_DIR/<name>.npz`: a fixed random batch (`images`), its `logits` and
its `features`. TF-Slim 1.1.0 on TF 2.21 needs two shims (see
../shared/notes/keras3-feasibility.md); they are installed before
`tf_slim` is imported.
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


def build(spec, out_dir):
    module = importlib.import_module(f"tf_slim.nets.{spec['module']}")
    function = getattr(module, spec["function"])
    arg_scope = getattr(module, spec["arg_scope"])
    size = spec["image_size"]
    graph = tf.Graph()
    with graph.as_default():
        images = tf1.placeholder(tf.float32, [None, size, size, 3])
        with slim.arg_scope(arg_scope()):
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
        if not spec.get("checkpoint"):
            return
        features = _end_point(end_points, graph, spec["features"])
        rng = np.random.default_rng(0)
        batch = rng.uniform(-1, 1, (spec["batch"], size, size, 3))
        with tf1.Session(graph=graph) as session:
            session.run(tf1.global_variables_initializer())
            _randomize(session, rng)
            prefix = os.path.join(out_dir, spec["name"], "model.ckpt")
            tf1.train.Saver().save(session, prefix, write_meta_graph=False)
            got_logits, got_features = session.run(
                [logits, features], {images: batch.astype(np.float32)}
            )
        np.savez(
            os.path.join(out_dir, f"{spec['name']}.npz"),
            images=batch.astype(np.float32),
            logits=got_logits,
            features=got_features,
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
