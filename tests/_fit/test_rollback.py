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
from tests._fit.test_position import X
from tests._fit.test_position import Y
from tests._fit.test_position import assert_same_checkpoints
from tests._fit.test_position import build
from tests.helpers import assert_gradient_not_finite
from tests.helpers import augmented
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp


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
        if global_step(self.model) == 16:
            for weight in self.model.trainable_weights:
                weight.assign(weight * 1.5)


def test_a_diverging_batch_is_rolled_back_and_skipped(tmp_path, caplog):
    assert_gradient_not_finite(build(), X[:10] * np.nan, Y[:10])
    caplog.set_level(logging.WARNING, logger="keras_slim")
    train(tmp_path / "without", bad=[17], drop=True)
    model = train(
        tmp_path / "rolled", bad=[17], rollback_on_nan=2, callbacks=[Diverge()]
    )
    assert global_step(model) == 30
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
    unchecked = compile_model(
        mlp(keras_slim.GradientPolicy(check_numerics=False)), metrics=None
    )
    with pytest.raises(ValueError, match="check_numerics=False"):
        unchecked.fit(
            data,
            steps_per_epoch=3,
            callbacks=[Checkpoints(tmp_path), NanLossGuard(rollback=1)],
        )
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


# The simplest call: arrays or from_tensor_slices(...).batch(8), one NaN
# in batch 9 (read by global step 10), checkpoints every 4 steps.
BATCH = 8
BAD_BATCH = 9


def simple_data(kind, *, bad):
    """The inputs of `keras_slim.train`: `"arrays"` (with `batch_size`),
    `"slices"` (`from_tensor_slices(...).batch(8)`), or `"repeated"`
    (the same, `repeat()`ed). With `bad`, batch 9 holds a NaN; without,
    that batch is left out."""
    x, y = classification_data(n=120, seed=4)
    rows = slice(BAD_BATCH * BATCH, (BAD_BATCH + 1) * BATCH)
    if bad:
        x = x.copy()
        x[rows.start + 3, 2] = np.nan
    else:
        x = np.delete(x, np.r_[rows], axis=0)
        y = np.delete(y, np.r_[rows], axis=0)
    if kind == "arrays":
        return (x, y), {"batch_size": BATCH}
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH)
    return (data.repeat() if kind == "repeated" else data), {}


def simple_train(directory, kind, *, bad, policy=None, rollback=0):
    """13 steps of `keras_slim.train` with summaries and the log of every
    step; returns `(model, last loss, {step: logged loss})`."""
    model = compile_model(
        mlp(policy, seed=3, dropout=0.2),
        keras.optimizers.Adam(0.01, use_ema=True, ema_momentum=0.9),
    )
    data, kwargs = simple_data(kind, bad=bad)
    logger = logging.getLogger("keras_slim")
    records = []
    handler = logging.Handler(logging.INFO)
    handler.emit = records.append
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        loss = keras_slim.train(
            model,
            data,
            str(directory),
            number_of_steps=13,
            save_interval_steps=4,
            save_summaries_steps=1,
            rollback_on_nan=rollback,
            **kwargs,
        )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    logged = [r.getMessage() for r in records]
    return model, loss, logged


def scalar_summaries(directory):
    """`{tag: {step: value}}` of the scalars written in `directory`, but
    the steps' speed."""
    from tests.callbacks.test_summaries import read_events

    return {
        tag: {step: float(value) for step, value in steps.items()}
        for tag, steps in read_events(directory).items()
        if tag != "global_step/sec"
    }


def step_losses(logged):
    return [line.split(" (")[0] for line in logged if ": loss = " in line]


@pytest.mark.parametrize(
    "kind, budget, policy",
    [
        ("arrays", 1, None),
        ("slices", 1, None),
        (
            "repeated",
            2,
            keras_slim.GradientPolicy(
                multipliers={"logits/.*": 2.0}, clip_norm=1.0
            ),
        ),
    ],
)
def test_the_simplest_call_rolls_back_once_and_ends_as_without_the_batch(
    kind, budget, policy, tmp_path
):
    (x, y), _ = simple_data("arrays", bad=True)
    rows = slice(BAD_BATCH * BATCH, (BAD_BATCH + 1) * BATCH)
    assert_gradient_not_finite(compile_model(mlp(seed=3)), x[rows], y[rows])
    _, loss0, logged0 = simple_train(tmp_path / "without", kind, bad=False)
    model, loss, logged = simple_train(
        tmp_path / "rolled", kind, bad=True, policy=policy, rollback=budget
    )
    rollbacks = [line for line in logged if "rolling back" in line]
    assert len(rollbacks) == 1, rollbacks  # one bad batch, one rollback
    assert "at global step 10 (epoch 0, batch 9 of the epoch)" in rollbacks[0]
    assert "model.ckpt-8 with its input position" in rollbacks[0]
    assert f"rollback 1 of {budget})" in rollbacks[0]
    assert global_step(model) == 13
    if policy is None:
        # Every variable, slot and average; the last step's loss; each
        # step's logged loss; the summaries (the epoch's running accuracy
        # and loss mean included: no trace of the rolled-back step).
        assert_same_checkpoints(tmp_path / "without", tmp_path / "rolled")
        assert loss == pytest.approx(loss0, rel=1e-6)
        assert step_losses(logged) == step_losses(logged0)
        assert len(step_losses(logged)) == 13
        rolled = scalar_summaries(tmp_path / "rolled")
        without = scalar_summaries(tmp_path / "without")
        assert sorted(rolled) == sorted(without)
        for tag, steps in without.items():
            assert sorted(rolled[tag]) == list(range(1, 14)), tag
            for step, value in steps.items():
                assert rolled[tag][step] == pytest.approx(
                    value, rel=1e-6, abs=1e-7
                ), (tag, step)


def test_a_failing_step_leaves_no_trace_in_the_running_loss():
    # Whatever order the step's ops run in: the tracker's update does not
    # wait for the step's assertion, so the step itself leaves the loss of
    # a step its check fails out of the mean (a rollback goes on from it).
    (x, y), _ = simple_data("arrays", bad=True)
    model = compile_model(mlp(seed=3), metrics=None)
    model.fit(x[:BATCH], y[:BATCH], batch_size=BATCH, verbose=0)
    tracker = next(m for m in model.metrics if m.name == "loss")
    before = float(tracker.total.numpy()), float(tracker.count.numpy())
    bad = slice(BAD_BATCH * BATCH, (BAD_BATCH + 1) * BATCH)
    data = tf.data.Dataset.from_tensor_slices((x[bad], y[bad])).batch(BATCH)
    iterator = iter(data)
    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        model.train_function(iterator)
    after = float(tracker.total.numpy()), float(tracker.count.numpy())
    assert after == before
