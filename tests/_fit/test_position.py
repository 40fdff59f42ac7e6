"""The input position: a finished run continued reads what a straight run
reads.

Each test trains straight to a target in one directory, and in another to
a lower target, then again to the higher one (a new model, as a new
process would build it), and compares the final checkpoints: every
variable, the optimizer's slots and moving averages. The input is
shuffled each pass and augmented with stateless ops seeded per batch; the
model has `Dropout`.
"""

import logging
import re
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim._fit.position import InputPosition
from tests.helpers import augmented
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp

rng = np.random.default_rng(0)
X = rng.normal(size=(60, 8)).astype("float32")
Y = rng.integers(0, 3, size=60).astype("int32")


def dataset(repeat=False):
    data = tf.data.Dataset.from_tensor_slices((X, Y))
    data = data.shuffle(60, seed=3, reshuffle_each_iteration=True).batch(10)
    if repeat:
        data = data.repeat()
    return augmented(data)


def build(steps_per_execution=1):
    return compile_model(
        mlp(seed=7, activation="relu", dropout=0.3),
        keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9),
        metrics=None,
        steps_per_execution=steps_per_execution,
    )


def saved_values(directory):
    """Every value of the newest checkpoint but the save counter and the
    input position (the iterators' state, a variant), by name without the
    counters of automatic names (`seed_generator_2`: a model built again
    in this process)."""
    reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(directory))
    return {
        re.sub(r"_\d+(?=[./])", "", name): reader.get_tensor(name)
        for name, dtype in reader.get_variable_to_dtype_map().items()
        if dtype != tf.variant
        and not name.startswith(
            ("save_counter", "data/", "structure", "_CHECKPOINT")
        )
    }


def assert_same_checkpoints(a, b, *, rtol=1e-6, atol=1e-7):
    """The newest checkpoints of directories `a` and `b` hold the same
    values (floats within `rtol`, `atol`), moving averages included."""
    first, second = saved_values(a), saved_values(b)
    assert sorted(first) == sorted(second)
    assert any(name.startswith("averages/") for name in first)
    for name, value in first.items():
        if not np.issubdtype(value.dtype, np.floating):
            np.testing.assert_array_equal(second[name], value, err_msg=name)
            continue
        np.testing.assert_allclose(
            second[name], value, rtol=rtol, atol=atol, err_msg=name
        )


def fit(directory, epochs, **kwargs):
    model = build()
    saver = keras_slim.callbacks.Checkpoints(directory, every_n_secs=None)
    model.fit(dataset(), epochs=epochs, verbose=0, callbacks=[saver], **kwargs)
    return model


@pytest.mark.parametrize("initial_epoch", [0, 2])
def test_a_fit_continued_with_more_epochs_equals_a_straight_fit(
    initial_epoch, tmp_path
):
    fit(tmp_path / "straight", 4)
    fit(tmp_path / "split", 2)
    model = fit(tmp_path / "split", 4, initial_epoch=initial_epoch)
    assert global_step(model) == 24
    assert_same_checkpoints(tmp_path / "straight", tmp_path / "split")


def test_a_fit_with_no_more_epochs_runs_its_own_schedule(tmp_path):
    """A finished fit's `epochs` again: the new fit trains that many epochs
    (Keras's meaning of a second `fit`), from the restored weights."""
    fit(tmp_path, 2)
    model = fit(tmp_path, 2)
    assert global_step(model) == 24


def train(directory, steps, steps_per_execution=1):
    model = build(steps_per_execution)
    keras_slim.train(
        model,
        dataset(repeat=True),
        str(directory),
        number_of_steps=steps,
        save_summaries_secs=None,
        log_every_n_steps=None,
    )
    return model


@pytest.mark.parametrize(
    "steps_per_execution, first, then",
    [(1, 13, 30), ("auto", 10, 20)],
    ids=["one-step-per-call", "blocks"],
)
def test_train_continued_to_a_higher_target_equals_a_straight_run(
    steps_per_execution, first, then, tmp_path, caplog
):
    """TF-Slim's way to go on: the same call with a higher
    `number_of_steps`. With the steps per call chosen by the model, the
    two targets allow the same steps per call (blocks of 10 batches)."""
    caplog.set_level(logging.WARNING, logger="keras_slim")
    train(tmp_path / "straight", then, steps_per_execution)
    train(tmp_path / "split", first, steps_per_execution)
    model = train(tmp_path / "split", then, steps_per_execution)
    assert global_step(model) == then
    assert "read in blocks of" not in caplog.text
    assert_same_checkpoints(tmp_path / "straight", tmp_path / "split")


def test_train_continued_with_other_blocks_warns_and_reaches_the_target(
    tmp_path, caplog
):
    """Targets that need other steps per call (blocks of 10, then one
    batch per call for 23): a restored iterator would keep its blocks, so
    the data goes on from a new pass, and a warning says so."""
    caplog.set_level(logging.WARNING, logger="keras_slim")
    train(tmp_path, 10, "auto")
    model = train(tmp_path, 23, "auto")
    assert "read in blocks of 10 batches, this fit reads 1" in caplog.text
    assert global_step(model) == 23


def test_a_restored_epoch_that_ended_leaves_the_next_nothing_to_skip():
    """Keras's own iterator (a PyDataset's): a position saved at the last
    batch of an epoch (a stop there) skips nothing in the epoch after."""
    position = InputPosition()
    position.state.step.assign(4)
    position.resume(types.SimpleNamespace())
    assert position.skips == 4
    position.epoch_begins(0)
    assert [position.batch_begins(batch) for batch in range(4)] == [True] * 4
    position.epoch_ends(0, stopped=False)
    position.epoch_begins(1)
    assert not position.batch_begins(0)
    assert position.skips == 0
