"""NanLossGuard: raise with the step, or go on as if nothing happened."""

import logging

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _run
from keras_slim.callbacks import NanLossGuard
from tests.callbacks import common


def poisoned(bad_steps, n=64, total=12):
    """Batches where the steps in `bad_steps` (1-based) have a NaN input."""
    x, y, _ = common.full_batch(n)
    bad = x.copy()
    bad[0, 0] = np.nan
    batches = [(bad if s in bad_steps else x, y) for s in range(1, total + 1)]
    xs = np.stack([b[0] for b in batches])
    ys = np.stack([b[1] for b in batches])
    return tf.data.Dataset.from_tensor_slices((xs, ys))


def test_plain_keras_model_raises_with_the_step():
    model = common.model("keras")
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(poisoned({4}), verbose=0, callbacks=[NanLossGuard()])
    assert info.value.step == 4
    assert np.isnan(info.value.loss)
    assert "at global step 4" in str(info.value)


def test_slim_model_without_numeric_check_raises_too():
    policy = keras_slim.GradientPolicy(check_numerics=False)
    model = common.model(policy=policy)
    with pytest.raises(keras_slim.NanLossDuringTrainingError, match="step 3"):
        model.fit(poisoned({3}), verbose=0, callbacks=[NanLossGuard()])


def test_fail_false_on_slim_model_skips_the_step_and_goes_on():
    model = common.model()
    model.fit(poisoned({3, 7}), verbose=0, callbacks=[NanLossGuard(False)])
    # Two steps were skipped: 12 batches, 12 steps, 10 updates.
    assert common.step(model) == 12
    assert common.all_finite(model)
    # The skipped steps do not count in the reported loss.
    assert np.isfinite(model.history.history["loss"][0])
    # Equal to training on the 10 good batches, the step count advancing
    # at the two skipped ones (the optimizer's step count is the global
    # step: learning-rate schedules and Adam's correction see it).
    _, _, data = common.full_batch()
    reference = common.model()
    for updates in (2, 3, 5):
        common.fit(reference, data, updates)
        reference.optimizer.iterations.assign_add(1)
    reference.optimizer.iterations.assign_add(-1)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_fail_false_is_undone_after_fit():
    model = common.model()
    model.fit(
        poisoned({2}, total=3), verbose=0, callbacks=[NanLossGuard(False)]
    )
    assert _run.current(model) is None  # the mode ended with the run
    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        model.fit(poisoned({2}, total=3), verbose=0)


def test_fail_false_on_keras_model_goes_on_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model = common.model("keras")
    model.fit(poisoned({5}), verbose=0, callbacks=[NanLossGuard(fail=False)])
    assert common.step(model) == 12
    assert "at global step 5; the step was applied" in caplog.text


def test_finite_training_is_untouched():
    _, _, data = common.full_batch()
    guarded = common.model("keras")
    common.fit(guarded, data, 5, [NanLossGuard()])
    plain = common.model("keras")
    common.fit(plain, data, 5)
    for a, b in zip(guarded.get_weights(), plain.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_bad_fail():
    with pytest.raises(ValueError, match="Received: fail='no'"):
        NanLossGuard(fail="no")


def test_is_a_keras_callback():
    assert isinstance(NanLossGuard(), keras.callbacks.Callback)
