"""Rollback on divergence: back to the last checkpoint, past the bad batch.

A batch planted with a NaN makes its step's loss not finite. With
`rollback_on_nan`, the run rolls back to its last checkpoint, replays to
the step before, skips that batch and goes on: it ends as a run on the
same data without that batch (every variable, slot and moving average).
"""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import NanLossGuard
from tests.helpers import augmented
from tests.helpers import compile_model
from tests.helpers import mlp
from tests.test_position import X
from tests.test_position import Y
from tests.test_position import assert_same_checkpoints
from tests.test_position import build


def stream(bad=(), drop=False):
    """Shuffled, augmented, repeated batches; those whose index in the
    stream is in `bad` hold a NaN (or, with `drop`, are left out)."""
    data = tf.data.Dataset.from_tensor_slices((X, Y))
    data = data.shuffle(60, seed=3, reshuffle_each_iteration=True).batch(10)
    data = augmented(data.repeat())
    bad = tf.constant(list(bad) or [-1], tf.int64)
    data = data.enumerate()
    if drop:
        return data.filter(
            lambda i, batch: tf.reduce_all(tf.not_equal(i, bad))
        ).map(lambda i, batch: batch)

    def poison(i, batch):
        images, labels = batch
        hit = tf.reduce_any(tf.equal(i, bad))
        return tf.where(hit, images * np.nan, images), labels

    return data.map(poison)


def train(directory, bad=(), drop=False, **kwargs):
    model = build()
    # After the build, which sets the global seed the stream's ops use.
    data = stream(bad, drop)
    keras_slim.train(
        model,
        data,
        str(directory),
        number_of_steps=30,
        save_interval_steps=5,
        save_summaries_secs=None,
        log_every_n_steps=None,
        **kwargs,
    )
    return model


class Diverge(keras.callbacks.Callback):
    """Scales the weights after global step 16: what went wrong before
    the NaN showed (only the last checkpoint, at 15, is sound)."""

    def on_train_batch_end(self, batch, logs=None):
        if int(self.model.optimizer.iterations.numpy()) == 16:
            for weight in self.model.trainable_weights:
                weight.assign(weight * 1.5)


def test_a_diverging_batch_is_rolled_back_and_skipped(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="keras_slim")
    train(tmp_path / "without", bad=[17], drop=True)
    model = train(
        tmp_path / "rolled", bad=[17], rollback_on_nan=2, callbacks=[Diverge()]
    )
    assert int(model.optimizer.iterations.numpy()) == 30
    # Batch 17 of the stream is read by step 18.
    assert "at global step 18 (epoch 0, batch 17 of the epoch)" in caplog.text
    assert "model.ckpt-15 with its input position" in caplog.text
    assert "rollback 1 of 2" in caplog.text
    assert_same_checkpoints(tmp_path / "without", tmp_path / "rolled")


def test_rollbacks_past_the_budget_stop_training(tmp_path):
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as caught:
        train(tmp_path, bad=[7, 21], rollback_on_nan=1)
    # Step 8 read batch 7 and was rolled back; batch 8 is read by step 8,
    # batch 21 by step 21.
    assert caught.value.step == 21
    assert not caught.value.applied


def test_rollback_needs_checkpoints_fail_and_a_slim_model(tmp_path):
    data = stream()
    model = build()
    with pytest.raises(ValueError, match="Checkpoints"):
        model.fit(data, steps_per_epoch=3, callbacks=[NanLossGuard(rollback=1)])
    with pytest.raises(ValueError, match="fail=True"):
        NanLossGuard(fail=False, rollback=1)
    with pytest.raises(ValueError, match="non-negative integer"):
        NanLossGuard(rollback=-1)
    plain = compile_model(mlp(cls=keras.Model), metrics=None)
    with pytest.raises(ValueError, match="SlimModel"):
        plain.fit(
            data,
            steps_per_epoch=3,
            callbacks=[Checkpoints(tmp_path), NanLossGuard(rollback=1)],
        )
    with pytest.raises(ValueError, match="logdir=None"):
        keras_slim.train(
            model, data, None, number_of_steps=3, rollback_on_nan=1
        )
