"""`keras_slim.callbacks.NanLossGuard` on JAX (keras_slim/_jax/callbacks/
nan_loss_guard.py): fail, skip with its warnings, and rollback equal to
the run without the bad batch."""

import logging

import numpy as np
import pytest

import keras_slim
from tests_jax import helpers


def _model(**kwargs):
    """What users train: dropout and batch norm, AdamW."""
    return helpers.compile_model(
        helpers.mlp(batch_norm=True, dropout=True), **kwargs
    )


def _data(bad=None):
    x, y = helpers.data(64)
    if bad is not None:
        x[bad] = np.nan
    return x, y


def _fit(model, x, y, callbacks=(), epochs=2):
    return model.fit(
        x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
        callbacks=list(callbacks),
    )  # fmt: skip


def _weights(model):
    """Every variable of the model, by its path without Keras's process
    numbering (`seed_generator_1`), in order."""
    variables = model.trainable_variables + model.non_trainable_variables
    return {f"{i}:{v.name}": np.array(v) for i, v in enumerate(variables)}


def test_the_simplest_rollback_goes_on_past_one_bad_batch_once(caplog):
    # One NaN batch, rollback=1: one rollback, no second, no failure.
    caplog.set_level(logging.WARNING, logger="keras_slim")
    x, y = _data(bad=20)  # batch 2 of each epoch
    model = _model()
    history = _fit(
        model, x, y, [keras_slim.callbacks.NanLossGuard(rollback=2)],
        epochs=1,
    )  # fmt: skip
    assert caplog.text.count("Non-finite loss at global step 3") == 1
    assert caplog.text.count("rollback 1 of 2") == 1
    assert "rollback 2 of" not in caplog.text
    assert int(model.optimizer.iterations) == 7
    assert np.isfinite(history.history["loss"][-1])
    # The run on the same data without that batch.
    reference = _model()
    _fit(
        reference,
        np.delete(x, range(16, 24), 0),
        np.delete(y, range(16, 24)),
        epochs=1,
    )
    for key, value in _weights(reference).items():
        np.testing.assert_array_equal(value, _weights(model)[key], key)


def test_rollback_budget_spent_then_the_next_failure_stops():
    x, y = _data(bad=20)
    model = _model()
    with pytest.raises(keras_slim.NanLossDuringTrainingError) as info:
        _fit(model, x, y, [keras_slim.callbacks.NanLossGuard(rollback=1)])
    # Epoch 2's bad batch: global step 7 (+ 3) in the run without epoch 1's.
    assert info.value.step == 10
    assert int(model.optimizer.iterations) == 9
    assert all(np.isfinite(v).all() for v in _weights(model).values())


def test_fail_leaves_batch_norm_and_seeds_as_before():
    x, y = _data(bad=20)
    model = _model()
    _fit(model, x[:16], y[:16], epochs=1)
    before = _weights(model)
    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        _fit(model, x[16:], y[16:], [keras_slim.callbacks.NanLossGuard()])
    after = _weights(model)
    for key in before:
        np.testing.assert_array_equal(before[key], after[key], key)


def test_skip_warns_once_then_at_the_end_and_counts(caplog):
    caplog.set_level(logging.WARNING, logger="keras_slim")
    x, y = _data(bad=20)
    model = _model()
    _fit(model, x, y, [keras_slim.callbacks.NanLossGuard(fail=False)])
    assert int(model.optimizer.iterations) == 16
    assert model.skipped_steps == (2, 3, 11)
    assert "2 steps skipped so far" in caplog.text
    assert all(np.isfinite(v).all() for v in _weights(model).values())


def test_bad_arguments_and_rollback_preconditions():
    with pytest.raises(ValueError, match="needs fail=True"):
        keras_slim.callbacks.NanLossGuard(fail=False, rollback=1)
    with pytest.raises(ValueError, match="rollback"):
        keras_slim.callbacks.NanLossGuard(rollback=-1)
    model = _model(steps_per_execution=2)
    with pytest.raises(ValueError, match="steps_per_execution=1"):
        _fit(model, *_data(), [keras_slim.callbacks.NanLossGuard(rollback=1)])
    assert int(model.optimizer.iterations) == 0
