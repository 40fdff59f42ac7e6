"""NanLossGuard: raise with the step, or go on as if nothing happened."""

import logging
import pickle

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim.callbacks import NanLossGuard
from tests.callbacks import common
from tests.helpers import global_step


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


def test_the_error_names_why_the_step_was_applied():
    # A SlimModel has a gate: "use a SlimModel" only for a model without.
    policy = keras_slim.GradientPolicy(check_numerics=False)
    for model, why, wrong in [
        (common.model(policy=policy), "check_numerics=False", "no update"),
        (common.model("keras"), "no update gate", "check_numerics"),
    ]:
        with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
            model.fit(poisoned({3}), verbose=0, callbacks=[NanLossGuard()])
        assert info.value.applied
        assert why in str(info.value) and wrong not in str(info.value)
        # It pickles (errors cross process boundaries in clusters).
        again = pickle.loads(pickle.dumps(info.value))
        assert str(again) == str(info.value)


def test_fail_false_on_slim_model_skips_the_step_and_goes_on():
    model = common.model()
    model.fit(poisoned({3, 7}), verbose=0, callbacks=[NanLossGuard(False)])
    # Two steps were skipped: 12 batches, 12 steps, 10 updates.
    assert global_step(model) == 12
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
    assert "_keras_slim_run" not in vars(model)  # the mode ended with the run
    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        model.fit(poisoned({2}, total=3), verbose=0)


def test_fail_false_on_keras_model_goes_on_with_a_warning(caplog):
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model = common.model("keras")
    model.fit(poisoned({5}), verbose=0, callbacks=[NanLossGuard(fail=False)])
    assert global_step(model) == 12
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


def regression(total=8, bad_step=5):
    """A plain keras.Model and batches whose step `bad_step` has a target
    of 1e30: its loss overflows to inf while its update stays finite (the
    weights become about 1e28), so only the loss tells."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((4,))
    model = keras.Model(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer=keras.optimizers.SGD(0.01), loss="mse")
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(total, 16, 4)).astype("float32")
    ys = rng.normal(size=(total, 16, 1)).astype("float32")
    ys[bad_step - 1] = 1e30
    return model, tf.data.Dataset.from_tensor_slices((xs, ys))


@pytest.mark.parametrize("guard_first", [True, False])
def test_an_applied_inf_step_is_never_saved(tmp_path, guard_first):
    model, data = regression()
    callbacks = [
        keras_slim.callbacks.Checkpoints(tmp_path, every_n_steps=1),
        NanLossGuard(),
    ]
    if guard_first:
        callbacks.reverse()
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(data, verbose=0, callbacks=callbacks)
    assert (info.value.step, info.value.applied) == (5, True)
    assert np.isinf(info.value.loss)
    assert "The step was applied" in str(info.value)
    assert "skipped" not in str(info.value)
    # The update was applied and is finite, yet not saved.
    assert common.all_finite(model)
    assert np.abs(model.get_weights()[0]).max() > 1e20
    newest = tf.train.latest_checkpoint(str(tmp_path))
    assert newest.endswith("model.ckpt-4")
    # A rerun resumes from step 4, with the weights of step 4.
    rerun, _ = regression()
    rerun.fit(
        data.take(4),
        verbose=0,
        callbacks=[keras_slim.callbacks.Checkpoints(tmp_path, restore=True)],
    )
    assert global_step(rerun) == 8
    assert np.abs(rerun.get_weights()[0]).max() < 100


def guarded_sqrt(cls):
    """A model with `sqrt(relu(h + 10))`: a unit below -10 gives a finite
    output (0) and loss, but a NaN gradient (the square root's infinite
    slope at 0 times the ReLU's 0)."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    hidden = keras.layers.Dense(4, name="fc1")(inputs)
    root = keras.layers.Lambda(
        lambda h: keras.ops.sqrt(keras.ops.relu(h + 10.0))
    )(hidden)
    model = cls(inputs, keras.layers.Dense(3, name="logits")(root))
    model.compile(
        optimizer=keras.optimizers.SGD(0.01),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return model


def nan_gradient_batches(good=1):
    """`good` ordinary batches, then one whose first row is 1000s."""
    x, y, _ = common.full_batch()
    bad = x.copy()
    bad[0] = 1000.0 * np.sign(np.random.default_rng(1).normal(size=8))
    return x, y, bad


def test_a_slim_model_names_a_nan_gradient_with_a_finite_loss():
    x, y, bad = nan_gradient_batches()
    model = guarded_sqrt(keras_slim.SlimModel)
    before = model.get_weights()
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        model.fit(bad, y, batch_size=64, verbose=0)
    error = info.value
    assert (error.step, error.cause, error.applied) == (1, "gradient", False)
    assert np.isfinite(error.loss)
    assert np.isnan(error.gradient_norm)
    assert "Non-finite gradient during training" in str(error)
    assert "at global step 1" in str(error)
    assert "The step was skipped" in str(error)
    for a, b in zip(model.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    # A plain model does not see it: the loss is finite, the weights NaN.
    plain = guarded_sqrt(keras.Model)
    history = plain.fit(
        bad, y, batch_size=64, verbose=0, callbacks=[NanLossGuard()]
    )
    assert np.isfinite(history.history["loss"][0])
    assert not common.all_finite(plain)


def test_a_nan_gradient_is_skipped_like_a_nan_loss_with_fail_false():
    x, y, bad = nan_gradient_batches()
    data = tf.data.Dataset.from_tensor_slices(
        (np.stack([x, bad, x]), np.stack([y] * 3))
    )
    model = guarded_sqrt(keras_slim.SlimModel)
    model.fit(data, verbose=0, callbacks=[NanLossGuard(fail=False)])
    assert global_step(model) == 3
    assert common.all_finite(model)
