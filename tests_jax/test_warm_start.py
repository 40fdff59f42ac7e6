"""`keras_slim.callbacks.WarmStart` on JAX (keras_slim/_jax/callbacks/
warm_start.py): from a Keras weights file always, from a TF-Slim
checkpoint when TensorFlow is installed; never over a resumed run."""

import contextlib
import json
import logging
import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim._jax.callbacks import _base
from tests_jax import helpers
from tests_jax import no_tensorflow

# TF-Slim's names for the MLP's layers, under a model scope.
SLIM_NAME_MAP = {
    r"(.*)/kernel": r"MLP/\1/weights",
    r"(.*)/bias": r"MLP/\1/biases",
}

# Written with TensorFlow in its own process, as TF-Slim did: graph mode,
# a `tf.compat.v1.train.Saver`, a global step.
_WRITE_TF1 = """
import sys
import numpy as np
import tensorflow as tf

out, prefix = sys.argv[1:]
with np.load(out) as saved:
    values = {name: saved[name] for name in saved.files}
with tf.Graph().as_default():
    for name, value in values.items():
        tf.compat.v1.Variable(value, name=name)
    global_step = tf.compat.v1.train.get_or_create_global_step()
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
        session.run(tf.compat.v1.global_variables_initializer())
        session.run(global_step.assign(1234))
        saver.save(session, prefix)
"""


class _FirstStep(keras.callbacks.Callback):
    """The model's weights just before the first step, by path (read from
    `_model`: the variables hold them until the step takes them)."""

    values = None

    def on_train_batch_begin(self, batch, logs=None):
        if self.values is None:
            self.values = _values(self._model)


def _values(model):
    return {v.path: np.array(v) for v in model.weights}


def _fit(model, callbacks):
    """Two steps; the weights before the first."""
    x, y = helpers.data(16)
    probe = _FirstStep()
    model.fit(
        x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
        callbacks=[*callbacks, probe],
    )  # fmt: skip
    return probe.values


def _assert_from(values, expected, paths):
    for path in paths:
        np.testing.assert_array_equal(values[path], expected[path], path)


def _keras_file(tmp_path, model, name="source.weights.h5"):
    path = str(tmp_path / name)
    model.save_weights(path)
    return path


@pytest.fixture(scope="module")
def slim_checkpoint(tmp_path_factory):
    """A TF-Slim-style TF1 checkpoint: `(directory, prefix, values)`."""
    directory = tmp_path_factory.mktemp("slim")
    rng = np.random.default_rng(7)
    shapes = {"fc1": (8, 16), "fc2": (16, 16), "logits": (16, 3)}
    values = {}
    for layer, shape in shapes.items():
        values[f"MLP/{layer}/weights"] = rng.normal(size=shape)
        values[f"MLP/{layer}/biases"] = rng.normal(size=shape[-1:])
    values = {k: v.astype("float32") for k, v in values.items()}
    np.savez(directory / "values.npz", **values)
    prefix = str(directory / "model.ckpt")
    result = subprocess.run(
        [sys.executable, "-c", _WRITE_TF1, str(directory / "values.npz"),
         prefix],
        env=dict(os.environ, KERAS_BACKEND="tensorflow"),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return str(directory), prefix, values


def test_the_jax_class_takes_the_public_name():
    warm = keras_slim.callbacks.WarmStart("/tmp/a.weights.h5")
    assert type(warm).__module__ == "keras_slim._jax.callbacks.warm_start"
    assert isinstance(warm, _base.RunCallback)


@pytest.mark.parametrize("devices", [1, 4], ids=["one_device", "four"])
def test_a_keras_file_with_include_and_exclude(tmp_path, caplog, devices):
    caplog.set_level(logging.INFO, logger="keras_slim")
    source_model = helpers.mlp(seed=5)
    source = _values(source_model)
    path = _keras_file(tmp_path, source_model)
    scope = contextlib.nullcontext()
    if devices > 1:
        config = keras_slim.DeploymentConfig(
            num_clones=devices, clone_on_cpu=True
        )
        scope = config.strategy().scope()
    with scope:
        model = helpers.compile_model(helpers.mlp(seed=1))
        initial = _values(model)
        warm = keras_slim.callbacks.WarmStart(
            path, include=["fc.*"], exclude="fc2/bias"
        )
        first = _fit(model, [warm])
    restored = ["fc1/bias", "fc1/kernel", "fc2/kernel"]
    _assert_from(first, source, restored)
    _assert_from(first, initial, ["fc2/bias", "logits/bias", "logits/kernel"])
    assert not np.array_equal(initial["fc1/kernel"], source["fc1/kernel"])
    assert warm.report == {
        "restored": restored,
        "missing": [],
        "mismatched": [],
    }
    assert warm.resumed_from is None
    assert (
        f"Warm start from {path} (Keras weights file): 3 restored, 0 "
        "missing, 0 mismatched." in caplog.text
    )
    assert int(model.optimizer.iterations) == 2


def test_another_models_file_through_a_name_map(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    keras.utils.set_random_seed(3)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, name="encoder")(inputs)
    h = keras.layers.Dense(5, name="fc2")(h)  # fc2 is 16 x 16 in the MLP
    other = keras.Model(inputs, keras.layers.Dense(3, name="head")(h))
    path = _keras_file(tmp_path, other)
    names = [v.name for v in keras_slim.checkpoints.list_variables(path)]
    # Keras names a file's groups by class: encoder, fc2, head.
    assert names[:4] == [
        "layers/dense/vars/0",
        "layers/dense/vars/1",
        "layers/dense_1/vars/0",
        "layers/dense_1/vars/1",
    ]
    encoder = other.get_layer("encoder")
    model = helpers.compile_model(helpers.mlp())
    initial = _values(model)
    warm = keras_slim.callbacks.WarmStart(
        path,
        include=["fc1/", "fc2/kernel", "logits/bias"],
        name_map={
            r"^fc1/kernel$": "layers/dense/vars/0",
            r"^fc1/bias$": "layers/dense/vars/1",
            r"^fc2/kernel$": "layers/dense_1/vars/0",
        },
        ignore_missing=True,
        ignore_shape_mismatch=True,
    )
    first = _fit(model, [warm])
    np.testing.assert_array_equal(first["fc1/kernel"], encoder.kernel)
    np.testing.assert_array_equal(first["fc1/bias"], encoder.bias)
    _assert_from(
        first,
        initial,
        ["fc2/kernel", "fc2/bias", "logits/kernel", "logits/bias"],
    )
    assert warm.report == {
        "restored": ["fc1/bias", "fc1/kernel"],
        "missing": ["logits/bias"],
        "mismatched": ["fc2/kernel"],
    }
    assert "2 restored, 1 missing, 1 mismatched." in caplog.text
    assert "  missing    logits/bias (key 'logits/bias')" in caplog.text
    assert (
        "  mismatched fc2/kernel (key 'layers/dense_1/vars/0')" in caplog.text
    )


def test_a_missing_variable_fails_before_any_step(tmp_path):
    path = _keras_file(tmp_path, helpers.mlp(seed=5))
    model = helpers.compile_model(helpers.mlp())
    initial = _values(model)
    warm = keras_slim.callbacks.WarmStart(
        path, name_map={r"^fc1/kernel$": "layers/nowhere/vars/0"}
    )
    with pytest.raises(ValueError, match="'layers/nowhere/vars/0'"):
        _fit(model, [warm])
    assert int(model.optimizer.iterations) == 0
    _assert_from(_values(model), initial, sorted(initial))


def test_a_tf_slim_checkpoint_with_a_name_map(slim_checkpoint, caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    directory, prefix, values = slim_checkpoint
    model = helpers.compile_model(helpers.mlp())
    initial = _values(model)
    warm = keras_slim.callbacks.WarmStart(
        directory, name_map=SLIM_NAME_MAP, exclude="logits/"
    )
    first = _fit(model, [warm])
    for layer in ("fc1", "fc2"):
        np.testing.assert_array_equal(
            first[f"{layer}/kernel"], values[f"MLP/{layer}/weights"]
        )
        np.testing.assert_array_equal(
            first[f"{layer}/bias"], values[f"MLP/{layer}/biases"]
        )
    _assert_from(first, initial, ["logits/kernel", "logits/bias"])
    assert warm.report == {
        "restored": ["fc1/bias", "fc1/kernel", "fc2/bias", "fc2/kernel"],
        "missing": [],
        "mismatched": [],
    }
    assert (
        f"Warm start from {prefix} (TF1 name-based checkpoint): 4 restored"
        in caplog.text
    )
    # The checkpoint's global step (1234) is not restored.
    assert int(model.optimizer.iterations) == 2


def test_a_resumed_run_is_not_warm_started(tmp_path):
    path = _keras_file(tmp_path, helpers.mlp(seed=5))
    run_dir = str(tmp_path / "run")

    def callbacks():
        # The warm start listed first: it still waits for the restore.
        return [
            keras_slim.callbacks.WarmStart(path),
            keras_slim.callbacks.Checkpoints(
                run_dir, every_n_steps=1, every_n_secs=None
            ),
        ]

    first = helpers.compile_model(helpers.mlp())
    warm, saver = callbacks()
    _fit(first, [warm, saver])
    assert saver.restored_path is None
    assert len(warm.report["restored"]) == 6
    trained = _values(first)

    again = helpers.compile_model(helpers.mlp())
    warm, saver = callbacks()
    values = _fit(again, [warm, saver])
    assert warm.resumed_from == os.path.join(run_dir, "model.ckpt-2")
    assert warm.report == {"restored": [], "missing": [], "mismatched": []}
    _assert_from(values, trained, sorted(trained))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"checkpoint": None}, "Received: checkpoint=None"),
        ({"include": [1]}, r"Received: include=\[1\]"),
        ({"exclude": "("}, r"in `exclude`: '\('"),
        ({"name_map": 3}, "Received: name_map=3"),
        ({"name_map": {"(": "x"}}, r"in `name_map`: '\('"),
        ({"values": [1]}, r"Received: values=\[1\]"),
        ({"ignore_missing": "yes"}, "Received: ignore_missing='yes'"),
        ({"checkpoint": ""}, "checkpoint"),
    ],
)
def test_bad_arguments_name_the_value(kwargs, match):
    kwargs = {"checkpoint": "/tmp/a.weights.h5", **kwargs}
    with pytest.raises(ValueError, match=match):
        keras_slim.callbacks.WarmStart(**kwargs)


def test_a_checkpoint_not_there_fails_at_train_begin(tmp_path):
    model = helpers.compile_model(helpers.mlp())
    warm = keras_slim.callbacks.WarmStart(str(tmp_path / "none.ckpt"))
    with pytest.raises(FileNotFoundError, match="none.ckpt"):
        _fit(model, [warm])
    assert int(model.optimizer.iterations) == 0


# Where TensorFlow cannot be imported: a Keras file works, a TF checkpoint
# says that it needs TensorFlow, before any step.
_WITHOUT_TENSORFLOW = """
import json, os
import numpy as np
import keras_slim
from tests_jax import helpers

path, prefix = {path!r}, {prefix!r}
source = helpers.mlp(seed=5)
source.save_weights(path)
source = {{v.path: np.array(v) for v in source.weights}}
model = helpers.compile_model(helpers.mlp())
warm = keras_slim.callbacks.WarmStart(path, exclude="logits/")
x, y = helpers.data(16)
model.fit(x, y, batch_size=8, epochs=1, verbose=0,
          callbacks=[warm, keras_slim.callbacks.StopAtStep(last_step=0)])
same = all(
    np.array_equal(np.array(v), source[v.path])
    for v in model.weights if v.path.startswith("fc")
)
other = helpers.compile_model(helpers.mlp())
try:
    other.fit(x, y, batch_size=8, epochs=1, verbose=0,
              callbacks=[keras_slim.callbacks.WarmStart(prefix)])
    error = None
except ImportError as raised:
    error = str(raised)
print(json.dumps({{
    "restored": warm.report["restored"],
    "same": same,
    "steps": int(other.optimizer.iterations),
    "error": error,
    "tensorflow": sorted(m for m in sys.modules if m.startswith("tensorflow")),
}}))
"""


def test_without_tensorflow_a_keras_file_works_a_tf_checkpoint_says_so(
    tmp_path, slim_checkpoint
):
    _, prefix, _ = slim_checkpoint
    code = _WITHOUT_TENSORFLOW.format(
        path=str(tmp_path / "source.weights.h5"), prefix=prefix
    )
    env = dict(os.environ, KERAS_BACKEND="jax")
    env.pop("XLA_FLAGS", None)
    result = subprocess.run(
        [sys.executable, "-c", no_tensorflow.prelude() + textwrap.dedent(code)],
        cwd=no_tensorflow.ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["restored"] == [
        "fc1/bias",
        "fc1/kernel",
        "fc2/bias",
        "fc2/kernel",
    ]
    assert seen["same"] is True
    assert seen["steps"] == 0
    assert seen["tensorflow"] == []
    assert seen["error"].startswith(
        f"Reading the checkpoint {prefix!r} needs TensorFlow, which cannot "
        "be imported in this process"
    )
    assert ".weights.h5" in seen["error"]
