"""`keras_slim.train` on JAX (keras_slim/_jax/learning.py): the calls a
user writes, with arrays, a PyDataset, a generator and a tf.data dataset;
a finished run continued; a NaN batch rolled back once."""

import logging
import os

import keras
import numpy as np
import pytest

import keras_slim
from tests_jax import helpers


def _model(**kwargs):
    return helpers.compile_model(helpers.mlp(dropout=True), **kwargs)


def _weights(model):
    return {v.path: np.array(v) for v in model.trainable_variables}


def _assert_bitwise(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_the_simplest_call_trains_saves_and_returns_the_last_loss(tmp_path):
    model = _model()
    loss = keras_slim.train(
        model, helpers.data(64), str(tmp_path), number_of_steps=20,
        batch_size=8, save_interval_steps=5,
    )  # fmt: skip
    assert int(model.optimizer.iterations) == 20
    assert isinstance(loss, float) and np.isfinite(loss)
    steps = sorted(
        int(n.split("-")[-1])
        for n in os.listdir(tmp_path)
        if n.startswith("model.ckpt-")
    )
    assert steps == [5, 10, 15, 20]
    # A rerun at its target runs nothing and returns None.
    assert keras_slim.train(
        model, helpers.data(64), str(tmp_path), number_of_steps=20,
        batch_size=8,
    ) is None  # fmt: skip


def _checkpoint_steps(directory):
    return sorted(
        int(n.split("-")[-1])
        for n in os.listdir(directory)
        if n.startswith("model.ckpt-")
    )


def test_keep_checkpoint_every_n_hours_keeps_more_than_max(tmp_path):
    # Every 3.6 microseconds: each checkpoint is kept as an hourly one
    # (orbax's keep_time_interval).
    for logdir, hours in (("hourly", 1e-9), ("recent", None)):
        keras_slim.train(
            _model(), helpers.data(64), str(tmp_path / logdir),
            number_of_steps=5, batch_size=8, save_interval_steps=1,
            keep_checkpoint_max=1, keep_checkpoint_every_n_hours=hours,
            log_every_n_steps=None,
        )  # fmt: skip
    assert _checkpoint_steps(tmp_path / "hourly") == [1, 2, 3, 4, 5]
    assert _checkpoint_steps(tmp_path / "recent") == [5]


def test_a_finished_run_continued_to_more_steps_equals_a_straight_run(
    tmp_path,
):
    straight = _model()
    keras_slim.train(
        straight, helpers.data(64), None, number_of_steps=20, batch_size=8
    )
    first = _model()
    keras_slim.train(
        first, helpers.data(64), str(tmp_path), number_of_steps=11,
        batch_size=8,
    )  # fmt: skip
    again = _model()  # a new process would build it afresh
    keras_slim.train(
        again, helpers.data(64), str(tmp_path), number_of_steps=20,
        batch_size=8,
    )  # fmt: skip
    assert int(again.optimizer.iterations) == 20
    _assert_bitwise(_weights(straight), _weights(again))


def test_a_py_dataset_and_a_generator_train_like_arrays():
    x, y = helpers.data(64)
    arrays = _model()
    keras_slim.train(arrays, (x, y), None, number_of_steps=12, batch_size=8)
    py_dataset = _model()
    keras_slim.train(
        py_dataset, helpers.Batches(x, y), None, number_of_steps=12
    )
    _assert_bitwise(_weights(arrays), _weights(py_dataset))
    generator = _model()
    batches = ((x[i : i + 8], y[i : i + 8]) for i in range(0, 64, 8))
    keras_slim.train(generator, batches, None)
    assert int(generator.optimizer.iterations) == 8


def test_rollback_on_nan_with_a_tf_data_dataset_goes_on_once(tmp_path, caplog):
    # What the last review ran: one NaN batch, rollback_on_nan=1.
    tf = pytest.importorskip("tensorflow")
    caplog.set_level(logging.WARNING, logger="keras_slim")
    x, y = helpers.data(64)
    x[20] = np.nan
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    model = _model()
    keras_slim.train(model, dataset, str(tmp_path), rollback_on_nan=1)
    assert caplog.text.count("Non-finite loss at global step 3") == 1
    assert "rollback 2 of" not in caplog.text
    assert int(model.optimizer.iterations) == 7


def test_bad_data_and_a_plain_model_are_refused_before_any_step(tmp_path):
    model = _model()
    with pytest.raises(ValueError, match="Invalid value for argument `data`"):
        keras_slim.train(model, {"x": 1}, str(tmp_path))
    with pytest.raises(ValueError, match="`batch_size` is not set"):
        keras_slim.train(model, helpers.data(8), str(tmp_path))
    with pytest.raises(ValueError, match="startup_delay_steps"):
        keras_slim.train(
            model, helpers.data(8), None, batch_size=8, startup_delay_steps=2
        )
    plain = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    plain.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match="keras_slim.SlimModel"):
        keras_slim.train(plain, helpers.data(8), None, batch_size=8)
    assert int(model.optimizer.iterations) == 0
    assert not os.listdir(tmp_path)


def test_a_dataset_is_read_as_far_as_it_goes_arrays_until_the_target():
    # As on TensorFlow: a dataset (or a generator) once, arrays and a
    # PyDataset pass after pass until number_of_steps.
    tf = pytest.importorskip("tensorflow")
    x, y = helpers.data(64)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    once = _model()
    keras_slim.train(once, dataset, None, number_of_steps=20)
    assert int(once.optimizer.iterations) == 8
    repeated = _model()
    keras_slim.train(repeated, (x, y), None, number_of_steps=20, batch_size=8)
    assert int(repeated.optimizer.iterations) == 20
