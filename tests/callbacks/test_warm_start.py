"""WarmStart: fine-tune from TF1, TF2 and Keras checkpoints."""

import logging

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import WarmStart
from tests import checkpoint_files as files
from tests.callbacks.common import fit
from tests.callbacks.common import full_batch
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp

KERAS_TO_SLIM = files.SLIM_NAME_MAP


class FirstStepValues(keras.callbacks.Callback):
    """The model's values just before the first step, and the step then."""

    def on_train_batch_begin(self, batch, logs=None):
        if not hasattr(self, "values"):
            self.values = files.values_of(self.model)
            self.step = global_step(self.model)


def fresh(seed=2, **kwargs):
    return compile_model(mlp(seed=seed, **kwargs))


def warm_fit(model, warm, steps=2, extra=()):
    _, _, data = full_batch()
    probe = FirstStepValues()
    fit(model, data, steps, [warm, *extra, probe])
    return probe


def test_tf1_slim_checkpoint_with_a_name_map(tf1):
    prefix, values = tf1
    model = fresh()
    warm = WarmStart(prefix, name_map=KERAS_TO_SLIM)
    probe = warm_fit(model, warm)
    assert probe.step == 0
    for path, name in [
        ("fc1/kernel", "MLP/fc1/weights"),
        ("fc1/bias", "MLP/fc1/biases"),
        ("logits/kernel", "MLP/logits/weights"),
        ("logits/bias", "MLP/logits/biases"),
    ]:
        np.testing.assert_array_equal(probe.values[path], values[name])
    assert warm.report == {
        "restored": ["fc1/bias", "fc1/kernel", "logits/bias", "logits/kernel"],
        "missing": [],
        "mismatched": [],
    }
    # The checkpoint's global step (1234) is not restored.
    assert global_step(model) == 2


def test_name_map_as_a_callable(tf1):
    prefix, values = tf1
    model = fresh()
    slim = {"kernel": "weights", "bias": "biases"}

    def to_slim(path):
        layer, name = path.split("/")
        return f"MLP/{layer}/{slim[name]}"

    WarmStart(prefix, name_map=to_slim).apply(model)
    np.testing.assert_array_equal(
        model.get_layer("logits").kernel.numpy(), values["MLP/logits/weights"]
    )


def test_tf2_checkpoint_of_checkpoints_all_but_the_logits(tmp_path, source):
    """The fine-tuning recipe: a new head of another size, the rest restored."""
    run = str(tmp_path / "pretrain")
    _, _, data = full_batch()
    fit(source, data, 1, [Checkpoints(run)])
    expected = files.values_of(source)
    model = fresh(classes=5)
    head = files.values_of(model)
    warm = WarmStart(run, exclude="logits/")
    probe = warm_fit(model, warm)
    for path in ("fc1/kernel", "fc1/bias"):
        np.testing.assert_array_equal(probe.values[path], expected[path])
    for path in ("logits/kernel", "logits/bias"):
        np.testing.assert_array_equal(probe.values[path], head[path])
    assert warm.report["restored"] == ["fc1/bias", "fc1/kernel"]
    # The optimizer state is not restored: iterations count this run only.
    assert global_step(model) == 2


@pytest.mark.parametrize("suffix", [".weights.h5", ".keras"])
def test_keras_files(tmp_path, source, suffix):
    path = str(tmp_path / f"model{suffix}")
    if suffix == ".keras":
        source.save(path)
    else:
        source.save_weights(path)
    model = fresh()
    warm = WarmStart(path, include="fc1/")
    probe = warm_fit(model, warm)
    expected = files.values_of(source)
    for name in ("fc1/kernel", "fc1/bias"):
        np.testing.assert_array_equal(probe.values[name], expected[name])
    assert not np.array_equal(
        probe.values["logits/kernel"], expected["logits/kernel"]
    )
    assert warm.report["restored"] == ["fc1/bias", "fc1/kernel"]


def test_missing_variables_are_listed_before_any_step(tf1):
    prefix, _ = tf1
    model = fresh()
    before = files.values_of(model)
    # Without the name map, no slim name matches a Keras path.
    with pytest.raises(ValueError, match="4 variables to warm-start") as error:
        warm_fit(model, WarmStart(prefix))
    for path in ("fc1/kernel", "fc1/bias", "logits/kernel", "logits/bias"):
        assert path in str(error.value)
    assert "ignore_missing=True" in str(error.value)
    assert global_step(model) == 0
    files.assert_values(model, before)


def test_ignore_missing(tf1):
    prefix, values = tf1
    model = fresh()
    rename = {r"fc1/kernel": "MLP/fc1/weights", r"logits/bias": "nope"}
    warm = WarmStart(prefix, name_map=rename, ignore_missing=True)
    warm_fit(model, warm)
    assert warm.report["restored"] == ["fc1/kernel"]
    assert warm.report["missing"] == [
        "fc1/bias",
        "logits/bias",
        "logits/kernel",
    ]


def test_shape_mismatch_is_named_before_any_step(tmp_path, source):
    prefix = files.write_tf2(tmp_path / "model.ckpt-3", source)
    model = fresh(classes=5)
    before = files.values_of(model)
    with pytest.raises(
        ValueError, match=r"logits/kernel: checkpoint \(16, 3\)"
    ):
        warm_fit(model, WarmStart(prefix))
    assert global_step(model) == 0
    files.assert_values(model, before)


def test_ignore_shape_mismatch_skips(tmp_path, source):
    prefix = files.write_tf2(tmp_path / "model.ckpt-3", source)
    model = fresh(classes=5)
    head = files.values_of(model)
    warm = WarmStart(prefix, ignore_shape_mismatch=True)
    warm.apply(model)
    assert warm.report == {
        "restored": ["fc1/bias", "fc1/kernel"],
        "missing": [],
        "mismatched": ["logits/bias", "logits/kernel"],
    }
    files.assert_values(model, head, ["logits/kernel", "logits/bias"])
    files.assert_values(model, files.values_of(source), ["fc1/kernel"])


def test_a_path_that_does_not_exist_fails_before_any_step(tmp_path):
    model = fresh()
    missing = str(tmp_path / "no" / "model.ckpt-5")
    with pytest.raises(FileNotFoundError, match=missing):
        warm_fit(model, WarmStart(missing))
    assert global_step(model) == 0


@pytest.mark.parametrize("warm_first", [True, False])
def test_resume_beats_warm_start_in_either_order(tmp_path, tf1, warm_first):
    prefix, _ = tf1
    run = str(tmp_path / "run")
    _, _, data = full_batch()
    first = fresh()
    fit(first, data, 3, [Checkpoints(run)])
    resumed = files.values_of(first)
    model = fresh(seed=9)
    warm = WarmStart(prefix, name_map=KERAS_TO_SLIM)
    order = [warm, Checkpoints(run)] if warm_first else [Checkpoints(run), warm]
    probe = warm_fit(model, order[0], extra=order[1:])
    for path, value in resumed.items():
        np.testing.assert_array_equal(probe.values[path], value)
    assert probe.step == 3
    assert warm.resumed_from.endswith("model.ckpt-3")
    assert warm.report["restored"] == []


def test_a_new_run_with_checkpoints_warm_starts(tmp_path, tf1):
    prefix, values = tf1
    model = fresh()
    warm = WarmStart(prefix, name_map=KERAS_TO_SLIM)
    probe = warm_fit(model, warm, extra=[Checkpoints(str(tmp_path / "run"))])
    np.testing.assert_array_equal(
        probe.values["fc1/kernel"], values["MLP/fc1/weights"]
    )
    assert warm.resumed_from is None


def test_acts_once_across_fits(tf1):
    prefix, values = tf1
    model = fresh()
    warm = WarmStart(prefix, name_map=KERAS_TO_SLIM)
    warm_fit(model, warm)
    trained = files.values_of(model)
    probe = warm_fit(model, warm)
    for path, value in trained.items():
        np.testing.assert_array_equal(probe.values[path], value)


def test_values_after_the_checkpoint(tf1):
    prefix, values = tf1
    model = fresh()
    bias = np.full(3, 7.0, dtype="float32")
    warm = WarmStart(
        prefix, name_map=KERAS_TO_SLIM, values={"logits/bias": bias}
    )
    probe = warm_fit(model, warm)
    np.testing.assert_array_equal(probe.values["logits/bias"], bias)
    np.testing.assert_array_equal(
        probe.values["logits/kernel"], values["MLP/logits/weights"]
    )


def test_bad_values_assign_nothing(tf1):
    prefix, _ = tf1
    model = fresh()
    before = files.values_of(model)
    warm = WarmStart(prefix, name_map=KERAS_TO_SLIM, values={"nope": 1.0})
    with pytest.raises(ValueError, match=r"no variables \['nope'\]"):
        warm_fit(model, warm)
    files.assert_values(model, before)


def test_report_is_logged(tf1, caplog):
    prefix, _ = tf1
    rename = dict(KERAS_TO_SLIM, **{"MLP/logits/biases": "gone"})
    warm = WarmStart(prefix, name_map=rename, ignore_missing=True)
    with caplog.at_level(logging.INFO, logger="keras_slim"):
        warm.apply(fresh())
    text = caplog.text
    assert "3 restored, 1 missing, 0 mismatched" in text
    assert "missing    logits/bias (key 'gone')" in text


def test_under_mirrored_strategy(mirrored, tf1):
    prefix, values = tf1
    with mirrored.scope():
        model = fresh()
    warm = WarmStart(prefix, name_map=KERAS_TO_SLIM)
    probe = warm_fit(model, warm)
    np.testing.assert_array_equal(
        probe.values["fc1/kernel"], values["MLP/fc1/weights"]
    )
    kernel = model.get_layer("fc1").kernel.value
    for replica in mirrored.experimental_local_results(kernel):
        np.testing.assert_array_equal(
            np.asarray(replica), np.asarray(kernel.numpy())
        )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"checkpoint": None}, "Received: checkpoint=None"),
        ({"checkpoint": ""}, "Received: checkpoint=''"),
        ({"checkpoint": "x", "include": "(bad"}, r"`include`: '\(bad'"),
        ({"checkpoint": "x", "name_map": 3}, "Received: name_map=3"),
        (
            {"checkpoint": "x", "name_map": {"(bad": "x"}},
            r"`name_map`: '\(bad'",
        ),
        ({"checkpoint": "x", "values": [1]}, r"Received: values=\[1\]"),
        (
            {"checkpoint": "x", "ignore_missing": 1},
            "Received: ignore_missing=1",
        ),
        (
            {"checkpoint": "x", "ignore_shape_mismatch": "yes"},
            "Received: ignore_shape_mismatch='yes'",
        ),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        WarmStart(**kwargs)


def test_exported():
    assert keras_slim.callbacks.WarmStart is WarmStart


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_truncated_checkpoint_is_named_before_any_step(tf1, tmp_path):
    """The index reads; a variable's bytes are missing from the data file:
    the read at the warm start names the checkpoint, no step runs."""
    prefix, _ = tf1
    _truncate(next((tmp_path / "tf1").glob("*.data-00000-of-00001")))
    model = fresh()
    with pytest.raises(
        ValueError,
        match=f"The checkpoint '{prefix}' could not be read .*truncated or "
        "damaged",
    ):
        warm_fit(model, WarmStart(prefix, name_map=KERAS_TO_SLIM))
    assert global_step(model) == 0


@pytest.mark.parametrize("name", ["random.weights.h5", "random.keras"])
def test_a_file_that_is_not_a_checkpoint_is_named(tmp_path, name):
    path = tmp_path / name
    path.write_bytes(b"\x00not a checkpoint" * 20)
    model = fresh()
    with pytest.raises(
        ValueError, match=f"The checkpoint '{path}' could not be read"
    ):
        warm_fit(model, WarmStart(str(path)))
    assert global_step(model) == 0
