"""Comparing keras_slim's nets with TF-Slim's own (tests/image/nets/
slim_peer.py runs those in graph mode, in tests/tf_slim_peer.py's
child)."""

import json
import pathlib

import keras
import numpy as np

from keras_slim import checkpoints
from keras_slim.image import nets
from tests import tf_slim_peer
from tests.helpers import once_per_session

SCRIPT = pathlib.Path(__file__).parent / "slim_peer.py"


def run(tmp_path_factory, key, specs, timeout=600):
    """Runs the peer once per test session for `specs` (in the TF-Slim
    child tests/tf_slim_peer.py keeps); returns its output directory."""

    def make():
        out = tmp_path_factory.mktemp(key)
        tf_slim_peer.run(
            f"""
            if {str(SCRIPT.parent)!r} not in sys.path:
                sys.path.insert(0, {str(SCRIPT.parent)!r})
            import slim_peer
            for spec in {specs!r}:
                slim_peer.build(spec, {str(out)!r})
            print("null")
            """,
            timeout=timeout,
        )
        return str(out)

    return pathlib.Path(once_per_session(tmp_path_factory, key, make))


def slim_variables(out, name):
    """TF-Slim's variables of the net: `{name: shape}`, `global_step`
    aside."""
    variables = json.loads((out / f"{name}.json").read_text())
    return {k: tuple(v) for k, v in variables.items() if k != "global_step"}


def keras_variables(model_name, model):
    """The model's variables as TF-Slim names them: `{name: shape}`."""
    name_map = nets.slim_name_map(model_name)
    return {
        name_map(v.path): tuple(v.shape)
        for v in checkpoints.variables_to_restore(model)
    }


def build(model_name, num_classes, image_size, features, channels=3):
    """The Keras net as a model of `(logits, features[, aux logits])`."""
    keras.utils.set_random_seed(1)
    network_fn = nets.get_network_fn(model_name, num_classes)
    images = keras.Input((image_size, image_size, channels))
    logits, end_points = network_fn(images)
    outputs = [logits, end_points[features]]
    if "AuxLogits" in end_points:
        outputs.append(end_points["AuxLogits"])
    return keras.Model(images, outputs)


def assert_same_variables(model_name, model, out, slim_name):
    """Every TF-Slim variable, and only those, with TF-Slim's shapes."""
    ours = keras_variables(model_name, model)
    theirs = slim_variables(out, slim_name)
    assert sorted(set(theirs) - set(ours)) == [], "missing in keras_slim"
    assert sorted(set(ours) - set(theirs)) == [], "not in TF-Slim's net"
    assert ours == theirs


def assert_same_end_point_shapes(model_name, out, slim_name, end_points):
    """The end points TF-Slim's net and ours both have are of the same
    shapes (TF-Slim's keys hold the net's scope; ours do not)."""
    scope = nets.nets_factory._NETS[model_name].scope
    theirs = json.loads((out / f"{slim_name}.end_points.json").read_text())
    theirs = {key.removeprefix(f"{scope}/"): v for key, v in theirs.items()}
    shared = sorted(set(theirs) & set(end_points))
    assert len(shared) >= 5, (sorted(theirs), sorted(end_points))
    for key in shared:
        assert list(end_points[key].shape[1:]) == theirs[key], key


def restore(model_name, model, out, slim_name):
    """Assigns every variable of the model from TF-Slim's checkpoint."""
    name_map = nets.slim_name_map(model_name)
    var_map = {
        name_map(v.path): v for v in checkpoints.variables_to_restore(model)
    }
    prefix = str(out / slim_name / "model.ckpt")
    assert checkpoints.assign_from_checkpoint(var_map, prefix) == len(var_map)


def assert_same_function(model_name, model, out, slim_name, rtol=1e-4):
    """Loaded from TF-Slim's checkpoint, the model gives TF-Slim's
    pre-logit features and logits on TF-Slim's batch."""
    assert_same_variables(model_name, model, out, slim_name)
    restore(model_name, model, out, slim_name)
    with np.load(out / f"{slim_name}.npz") as expected:
        logits, features = model(expected["images"], training=False)[:2]
        for got, want in (
            (features, expected["features"]),
            (logits, expected["logits"]),
        ):
            got = np.asarray(got).reshape(want.shape)
            scale = np.abs(want).max()
            assert np.abs(got - want).max() <= rtol * scale, (
                np.abs(got - want).max(),
                scale,
            )
