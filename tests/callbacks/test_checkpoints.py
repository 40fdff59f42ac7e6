"""Checkpoints: slim's file names, intervals, exact resume, safe restore."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _run
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import StopAtStep
from tests.callbacks import common
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import weights


def steps_on_disk(directory):
    return sorted(
        int(name[len("model.ckpt-") : -len(".index")])
        for name in os.listdir(directory)
        if name.startswith("model.ckpt-") and name.endswith(".index")
    )


def test_every_n_steps_names_and_final_save(tmp_path):
    _, _, data = common.full_batch()
    model = common.model()
    saver = Checkpoints(tmp_path, every_n_secs=None, every_n_steps=4)
    common.fit(model, data, 10, [saver])
    assert steps_on_disk(tmp_path) == [4, 8, 10]
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(
        tmp_path / "model.ckpt-10"
    )


def test_max_to_keep(tmp_path):
    _, _, data = common.full_batch()
    saver = Checkpoints(
        tmp_path, every_n_secs=None, every_n_steps=1, max_to_keep=2
    )
    common.fit(common.model(), data, 6, [saver])
    assert steps_on_disk(tmp_path) == [5, 6]


@pytest.mark.parametrize("keep", [0, None, np.int64(0)])
def test_max_to_keep_0_or_none_keeps_all(tmp_path, keep):
    # TF1's Saver(max_to_keep=0 or None), contrib.learn's RunConfig.
    _, _, data = common.full_batch()
    saver = Checkpoints(
        tmp_path, every_n_secs=None, every_n_steps=1, max_to_keep=keep
    )
    common.fit(common.model(), data, 7, [saver])
    assert steps_on_disk(tmp_path) == [1, 2, 3, 4, 5, 6, 7]


def test_every_n_secs_with_a_fake_clock(tmp_path):
    _, _, data = common.full_batch()
    saver = Checkpoints(tmp_path, every_n_secs=60)
    ticks = iter([0.0] + [30.0 * i for i in range(1, 100)])
    saver._trigger._clock = lambda: next(ticks)
    common.fit(common.model(), data, 5, [saver])
    # t = 30, 60, 90, 120, 150 at steps 1..5: saves at 60 and 120, + end.
    assert steps_on_disk(tmp_path) == [2, 4, 5]


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_resume_equals_an_uninterrupted_run(kind, tmp_path):
    _, _, data = common.full_batch()
    uninterrupted = common.model(kind)
    common.fit(uninterrupted, data, 20)

    first = common.model(kind)
    common.fit(first, data, 8, [Checkpoints(tmp_path, every_n_steps=5)])
    # A new process would build a fresh model: different initial weights.
    second = common.model(kind)
    second.set_weights([w * 0 + 1 for w in second.get_weights()])
    saver = Checkpoints(tmp_path)
    common.fit(second, data, 12, [saver])
    assert saver.restored_path == str(tmp_path / "model.ckpt-8")
    assert global_step(second) == 20
    assert max_abs_diff(weights(second), weights(uninterrupted)) == 0.0
    assert steps_on_disk(tmp_path) == [5, 8, 20]


@pytest.mark.parametrize("every_n_steps", [None, 1, 3, 6])
def test_when_checkpoints_are_written_does_not_change_the_data(
    every_n_steps, tmp_path
):
    """A pipeline reshuffling inside `repeat()` draws each repetition's
    seeds from a generator its iterators share: the run's iterators are
    all made before any is read, so saving (which holds the next pass's
    iterator) at any step leaves the batches, hence the weights, as
    without checkpoints."""

    def train(callbacks):
        model = common.model()  # sets the global seed: before the data's
        x, y = common.classification_data(n=64)
        data = tf.data.Dataset.from_tensor_slices((x, y))
        data = data.shuffle(64, seed=5).batch(16).repeat()
        common.fit(model, data, 12, callbacks)  # 3 repetitions
        return weights(model)

    saver = [Checkpoints(tmp_path, every_n_steps=every_n_steps)]
    reference = train([])
    assert max_abs_diff(train(saver if every_n_steps else []), reference) == 0


def test_restores_before_stop_at_step_in_any_order(tmp_path):
    _, _, data = common.full_batch()
    common.fit(common.model(), data, 6, [Checkpoints(tmp_path)])
    model = common.model()
    model.fit(
        data,
        epochs=1,
        verbose=0,
        callbacks=[StopAtStep(last_step=10), Checkpoints(tmp_path)],
    )
    assert global_step(model) == 10


def test_restore_false_starts_fresh(tmp_path):
    _, _, data = common.full_batch()
    common.fit(common.model(), data, 6, [Checkpoints(tmp_path)])
    model = common.model()
    common.fit(model, data, 2, [Checkpoints(tmp_path, restore=False)])
    assert global_step(model) == 2


def test_non_trainable_state_is_saved(tmp_path):
    """Batch-norm statistics resume too, not only the trainable weights."""

    def build():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((8,))
        h = keras.layers.BatchNormalization(name="bn")(inputs)
        out = keras.layers.Dense(3, name="logits")(h)
        model = keras_slim.SlimModel(inputs, out)
        model.compile(
            optimizer="adam",
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
        return model

    _, _, data = common.full_batch()
    trained = build()
    common.fit(trained, data, 5, [Checkpoints(tmp_path)])
    restored = build()
    common.fit(
        restored, data, 0 + 1, [StopAtStep(last_step=5), Checkpoints(tmp_path)]
    )
    moving_mean = restored.get_layer("bn").moving_mean.numpy()
    np.testing.assert_array_equal(
        moving_mean, trained.get_layer("bn").moving_mean.numpy()
    )
    assert not np.allclose(moving_mean, 0.0)


def truncate(path):
    data_file = path + ".data-00000-of-00001"
    with open(data_file, "r+b") as f:
        f.truncate(os.path.getsize(data_file) // 2)


def test_truncated_newest_falls_back_to_the_previous(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="keras_slim")
    _, _, data = common.full_batch()
    reference = common.model()
    common.fit(reference, data, 4)
    common.fit(
        common.model(),
        data,
        6,
        [Checkpoints(tmp_path, every_n_secs=None, every_n_steps=4)],
    )
    truncate(str(tmp_path / "model.ckpt-6"))
    model = common.model()
    saver = Checkpoints(tmp_path)
    model.fit(
        data, epochs=1, verbose=0, callbacks=[saver, StopAtStep(num_steps=1)]
    )
    assert saver.restored_path == str(tmp_path / "model.ckpt-4")
    assert "model.ckpt-6 cannot be restored" in caplog.text
    common.fit(reference, data, 1)
    assert max_abs_diff(weights(model), weights(reference)) == 0.0


def test_all_checkpoints_unreadable_is_an_error(tmp_path):
    _, _, data = common.full_batch()
    common.fit(common.model(), data, 2, [Checkpoints(tmp_path)])
    truncate(str(tmp_path / "model.ckpt-2"))
    model = common.model()
    with pytest.raises(RuntimeError, match="No checkpoint in .* can be"):
        common.fit(model, data, 1, [Checkpoints(tmp_path)])
    assert global_step(model) == 0


def test_unwritable_directory_fails_before_the_first_step(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    _, _, data = common.full_batch()
    model = common.model()
    before = weights(model)
    with pytest.raises(ValueError, match="checkpoints cannot be written"):
        common.fit(model, data, 3, [Checkpoints(blocker / "run")])
    assert global_step(model) == 0
    assert max_abs_diff(weights(model), before) == 0.0


def test_never_writes_a_non_finite_state(tmp_path):
    """A plain model applies a NaN step: no checkpoint after it."""
    _, _, data = common.full_batch()
    x, y, _ = common.full_batch()
    bad = x.copy()
    bad[:, 0] = np.nan
    xs = np.stack([x, x, x, bad, x, x])
    ys = np.stack([y] * 6)
    poisoned = tf.data.Dataset.from_tensor_slices((xs, ys))
    model = common.model("keras")
    model.fit(
        poisoned,
        verbose=0,
        callbacks=[
            Checkpoints(tmp_path, every_n_secs=None, every_n_steps=1),
            keras_slim.callbacks.NanLossGuard(fail=False),
        ],
    )
    assert steps_on_disk(tmp_path) == [1, 2, 3]
    for step in steps_on_disk(tmp_path):
        reader = tf.train.load_checkpoint(str(tmp_path / f"model.ckpt-{step}"))
        for name in reader.get_variable_to_shape_map():
            value = reader.get_tensor(name)
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert np.all(np.isfinite(value)), (step, name)


def test_non_chief_writes_nothing_in_the_directory(tmp_path):
    _, _, data = common.full_batch()
    saver = Checkpoints(tmp_path, every_n_steps=1)
    model = common.model()
    with _run.start(model, is_chief=False):
        common.fit(model, data, 3, [saver])
    assert os.listdir(tmp_path) == []


def test_under_mirrored_strategy_resume_is_exact(mirrored, tmp_path):
    _, _, data = common.full_batch()
    reference = common.model()
    common.fit(reference, data, 6)
    with mirrored.scope():
        first = common.model()
    common.fit(first, data, 3, [Checkpoints(tmp_path)])
    with mirrored.scope():
        second = common.model()
    common.fit(second, data, 3, [Checkpoints(tmp_path)])
    assert global_step(second) == 6
    assert max_abs_diff(weights(second), weights(reference)) < 1e-5


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"directory": ""}, "Received: directory=''"),
        ({"every_n_secs": 0}, "Received: every_n_secs=0"),
        ({"every_n_steps": -5}, "Received: every_n_steps=-5"),
        ({"max_to_keep": -1}, "Received: max_to_keep=-1"),
        ({"max_to_keep": 2.5}, "Received: max_to_keep=2.5"),
        (
            {"keep_checkpoint_every_n_hours": -1},
            "Received: keep_checkpoint_every_n_hours=-1",
        ),
        ({"restore": "yes"}, "Received: restore='yes'"),
    ],
)
def test_bad_arguments(kwargs, message, tmp_path):
    kwargs = {"directory": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=message):
        Checkpoints(**kwargs)


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_moving_averages_resume_exactly(kind, tmp_path):
    """Keras's fit writes the averages into the weights before
    on_train_end; the checkpoint keeps the training weights and the
    averages apart, so 20 + 20 steps equal 40, and the model left after
    fit holds the averages."""
    _, _, data = common.full_batch()

    def ema_model():
        optimizer = keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9)
        return common.model(kind, optimizer=optimizer)

    straight = ema_model()
    common.fit(straight, data, 40)
    first = ema_model()
    common.fit(first, data, 20, [Checkpoints(tmp_path)])
    reader = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-20"))
    saved = reader.get_tensor("model/fc1.Skernel/.ATTRIBUTES/VARIABLE_VALUE")
    # The checkpoint holds the training weights, not the averages.
    assert not np.array_equal(saved, first.get_layer("fc1").kernel.numpy())
    second = ema_model()
    common.fit(second, data, 20, [Checkpoints(tmp_path)])
    assert global_step(second) == 40
    assert max_abs_diff(weights(second), weights(straight)) == 0.0


def _warnings_of(caplog, model, data, tmp_path, **kwargs):
    caplog.clear()
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model.fit(
        data,
        verbose=0,
        callbacks=[Checkpoints(tmp_path, every_n_secs=None)],
        **kwargs,
    )
    return [
        r.getMessage()
        for r in caplog.records
        if "Checkpoints:" in r.getMessage()
    ]


def test_one_warning_says_what_resume_does_for_each_input(tmp_path, caplog):
    x, y, _ = common.full_batch()
    clean = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
    assert _warnings_of(caplog, common.model(), clean, tmp_path / "a") == []
    stateful = clean.map(lambda a, b: (a + tf.random.uniform(tf.shape(a)), b))
    (message,) = _warnings_of(caplog, common.model(), stateful, tmp_path / "b")
    assert "RandomUniform is stateful" in message
    assert "tf.random.stateless_" in message

    def generator():
        for i in range(0, 64, 16):
            yield x[i : i + 16], y[i : i + 16]

    (message,) = _warnings_of(
        caplog, common.model(), generator(), tmp_path / "c", steps_per_epoch=4
    )
    assert "cannot be saved (the input is a generator" in message
    assert "skips the batches" in message
    (message,) = _warnings_of(
        caplog, common.model("keras"), clean, tmp_path / "d"
    )
    assert "for a keras_slim.SlimModel only" in message
