"""keras_slim.checkpoints: listing and restoring from every format."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim import checkpoints
from keras_slim import training_state
from tests import checkpoint_files as files
from tests.helpers import compile_model
from tests.helpers import mlp


def fresh(**kwargs):
    return compile_model(mlp(seed=2, **kwargs))


def test_list_variables_of_a_tf1_checkpoint(tf1):
    prefix, values = tf1
    listed = checkpoints.list_variables(prefix)
    assert [v.name for v in listed] == sorted(list(values) + ["global_step"])
    by_name = {v.name: v for v in listed}
    assert by_name["MLP/fc1/weights"].shape == (8, 16)
    assert by_name["MLP/fc1/weights"].dtype == "float32"
    assert by_name["global_step"] == ("global_step", (), "int64")


def test_list_variables_of_a_tf2_checkpoint_by_object_path(tmp_path, source):
    prefix = files.write_tf2(tmp_path / "model.ckpt-3", source)
    names = {v.name: v.shape for v in checkpoints.list_variables(prefix)}
    # Model variables under their paths below `model`, mapped back through
    # the object graph (the stored keys read `model/fc1.Skernel/...`).
    assert names["model/fc1/kernel"] == (8, 16)
    assert names["model/logits/bias"] == (3,)
    assert names["optimizer/_iterations"] == ()
    assert not any(".ATTRIBUTES" in name for name in names)


def test_a_directory_means_its_latest_checkpoint(tmp_path, source):
    files.write_tf2(tmp_path / "model.ckpt-1", source)
    manager = tf.train.CheckpointManager(
        training_state.training_checkpoint(source), str(tmp_path), 3
    )
    manager.save(checkpoint_number=9)
    assert checkpoints.list_variables(str(tmp_path)) == (
        checkpoints.list_variables(manager.latest_checkpoint)
    )


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_list_variables_of_keras_files(tmp_path, source, suffix):
    path = str(tmp_path / f"model{suffix}")
    if suffix == ".keras":
        source.save(path)
    else:
        source.save_weights(path)
    names = {v.name: v.shape for v in checkpoints.list_variables(path)}
    assert names["layers/dense/vars/0"] == (8, 16)
    assert names["layers/dense_1/vars/1"] == (3,)


def test_checkpoint_format_tells_the_three_apart(tf1, tmp_path, source):
    prefix, _ = tf1
    assert checkpoints.checkpoint_format(prefix) == "tf1"
    tf2 = files.write_tf2(tmp_path / "model.ckpt-3", source)
    assert checkpoints.checkpoint_format(tf2) == "tf2"
    weights = str(tmp_path / "model.weights.h5")
    source.save_weights(weights)
    assert checkpoints.checkpoint_format(weights) == "keras"
    with pytest.raises(FileNotFoundError, match="nothing"):
        checkpoints.checkpoint_format(str(tmp_path / "nothing"))


@pytest.mark.parametrize("name", ["nothing", "nothing.weights.h5", "dir"])
def test_missing_checkpoint_is_named(tmp_path, name):
    path = tmp_path / name
    if name == "dir":
        path.mkdir()
    with pytest.raises(FileNotFoundError, match=str(path)):
        checkpoints.list_variables(str(path))


def test_variables_to_restore_filters_by_path():
    model = compile_model(mlp(seed=1))
    every = [v.path for v in checkpoints.variables_to_restore(model)]
    assert every == ["fc1/kernel", "fc1/bias", "logits/kernel", "logits/bias"]
    assert [
        v.path
        for v in checkpoints.variables_to_restore(model, exclude="logits")
    ] == ["fc1/kernel", "fc1/bias"]
    assert [
        v.path
        for v in checkpoints.variables_to_restore(
            model, include=[".*/kernel"], exclude=["fc1"]
        )
    ] == ["logits/kernel"]


def test_variables_to_restore_skips_seed_generator_state():
    inputs = keras.Input((4,))
    hidden = keras.layers.Dropout(0.5)(keras.layers.Dense(3, name="fc")(inputs))
    model = keras.Model(inputs, hidden)
    assert any("seed_generator_state" in v.path for v in model.variables)
    paths = [v.path for v in checkpoints.variables_to_restore(model)]
    assert paths == ["fc/kernel", "fc/bias"]


def test_invalid_patterns_are_named():
    model = fresh()
    with pytest.raises(ValueError, match=r"`exclude`: '\(oops'"):
        checkpoints.variables_to_restore(model, exclude="(oops")
    with pytest.raises(ValueError, match="Received: include=3"):
        checkpoints.variables_to_restore(model, include=3)


def test_assign_from_checkpoint_with_slim_names(tf1):
    prefix, values = tf1
    model = fresh()
    fc1 = model.get_layer("fc1")
    count = checkpoints.assign_from_checkpoint(
        {"MLP/fc1/weights": fc1.kernel, "MLP/fc1/biases": fc1.bias}, prefix
    )
    assert count == 2
    np.testing.assert_array_equal(fc1.kernel.numpy(), values["MLP/fc1/weights"])
    np.testing.assert_array_equal(fc1.bias.numpy(), values["MLP/fc1/biases"])


def test_assign_from_a_tf2_checkpoint_by_path(tmp_path, source):
    prefix = files.write_tf2(tmp_path / "model.ckpt-3", source)
    model = fresh()
    # A list of variables is keyed by path, below the checkpoint's `model`.
    checkpoints.assign_from_checkpoint(model.weights, prefix)
    files.assert_values(model, files.values_of(source))


def test_tf_slims_positional_calls(tf1):
    """As TF-Slim's callers and tests write them: `get_variables_to_restore(
    include, exclude)`, `assign_from_checkpoint(model_path, var_list,
    ignore_missing_vars)`, object_detection's `get_variables_available_in_
    checkpoint(variables, checkpoint_path)`."""
    prefix, values = tf1
    model = fresh()
    fc1 = model.get_layer("fc1")
    restored = checkpoints.variables_to_restore(model, ["fc1"], ["fc1/bias"])
    assert [v.path for v in restored] == ["fc1/kernel"]

    var_map = {"MLP/fc1/weights": fc1.kernel, "MLP/fc1/nope": fc1.bias}
    bias = fc1.bias.numpy()
    with pytest.raises(ValueError, match="ignore_missing_vars=True"):
        checkpoints.assign_from_checkpoint(prefix, var_map)
    assert checkpoints.assign_from_checkpoint(prefix, var_map, True) == 1
    np.testing.assert_array_equal(fc1.kernel.numpy(), values["MLP/fc1/weights"])
    np.testing.assert_array_equal(fc1.bias.numpy(), bias)  # left as it was

    available = checkpoints.available_in_checkpoint(var_map, prefix)
    assert list(available) == ["MLP/fc1/weights"]
    with pytest.raises(TypeError, match="Expected a checkpoint path"):
        checkpoints.assign_from_checkpoint(var_map, var_map)


def _missing_keys(model):
    fc1 = model.get_layer("fc1")
    var_map = {
        "MLP/fc1/weights": fc1.kernel,
        "MLP/fc1/nope": fc1.bias,
        "nope2": model.get_layer("logits").bias,
    }
    return var_map, r"\['MLP/fc1/nope', 'nope2'\]"


def _a_shape_mismatch(model):
    var_map = {
        "MLP/logits/weights": model.get_layer("logits").kernel,
        "MLP/fc1/biases": model.get_layer("fc1").bias,
    }
    return var_map, r"MLP/logits/weights: checkpoint"


@pytest.mark.parametrize(
    "case, classes", [(_missing_keys, 3), (_a_shape_mismatch, 5)]
)
def test_assign_from_checkpoint_names_every_bad_key_and_assigns_none(
    tf1, case, classes
):
    prefix, _ = tf1
    model = fresh(classes=classes)
    before = files.values_of(model)
    var_map, expected = case(model)
    with pytest.raises(ValueError, match=expected):
        checkpoints.assign_from_checkpoint(var_map, prefix)
    files.assert_values(model, before)


def test_available_in_checkpoint_keeps_present_keys_of_matching_shape(tf1):
    prefix, _ = tf1
    model = fresh(classes=5)
    fc1 = model.get_layer("fc1")
    logits = model.get_layer("logits")
    var_map = {
        "MLP/fc1/weights": fc1.kernel,
        "MLP/fc1/missing": fc1.bias,
        "MLP/logits/weights": logits.kernel,  # (16, 5) vs (16, 3)
    }
    available = checkpoints.available_in_checkpoint(var_map, prefix)
    assert list(available) == ["MLP/fc1/weights"]
    assert available["MLP/fc1/weights"] is fc1.kernel


def test_assign_from_values():
    model = fresh()
    value = np.arange(3, dtype="float32")
    assert checkpoints.assign_from_values(model, {"logits/bias": value}) == 1
    np.testing.assert_array_equal(model.get_layer("logits").bias.numpy(), value)


@pytest.mark.parametrize(
    "values, message",
    [
        (
            {"logits/bias": np.zeros(3), "nope/bias": 1.0},
            r"no variables \['nope",
        ),
        ({"fc1/bias": np.zeros(3)}, r"'fc1/bias' has shape \(3,\)"),
        ([1, 2], "Received: values='list'"),
    ],
)
def test_assign_from_values_errors_assign_nothing(values, message):
    model = fresh()
    before = files.values_of(model)
    with pytest.raises(ValueError, match=message):
        checkpoints.assign_from_values(model, values)
    files.assert_values(model, before)
