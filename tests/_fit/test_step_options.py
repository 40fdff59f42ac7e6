"""Callbacks declare the step's options; the train function fixes them once."""

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim._fit import step_options
from keras_slim.callbacks import NanLossGuard
from keras_slim.callbacks import StepCallback
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import mlp
from tests.helpers import weights


class Declares(StepCallback):
    """A step callback declaring the given options."""

    def __init__(self, **options):
        super().__init__()
        self.options = options

    def step_options(self, model):
        return dict(self.options)

    def on_train_end(self, logs=None):
        #: The options the model's step was traced with in this fit.
        self.traced = self.model.step_options


def _nan_data():
    x, y = classification_data(96)
    x[40] = np.nan  # in the second batch of 32
    return x, y


def test_declarations_merge_and_undeclared_fields_keep_their_defaults():
    hook = object()
    callbacks = [
        Declares(raise_on_nonfinite=False),
        keras.callbacks.History(),  # declares nothing
        StepCallback(),  # declares nothing: `{}`
        Declares(raise_on_nonfinite=False, step_summaries=hook),
    ]
    merged = step_options.declared(callbacks, model=None)
    assert merged == {"raise_on_nonfinite": False, "step_summaries": hook}
    options = step_options.StepOptions(**step_options.declared([], None))
    assert options == step_options.DEFAULT


def test_two_callbacks_declaring_different_values_name_both():
    callbacks = [Declares(), NanLossGuard(fail=True), NanLossGuard(fail=False)]
    with pytest.raises(ValueError) as error:
        step_options.declared(callbacks, model=None)
    message = str(error.value)
    assert "`raise_on_nonfinite`" in message
    assert "NanLossGuard (callbacks[1])" in message
    assert "NanLossGuard (callbacks[2])" in message


def test_options_the_train_function_owns_cannot_be_declared():
    with pytest.raises(ValueError, match="'skipped_steps'.*'step_summaries'"):
        step_options.declared([Declares(skipped_steps=1)], model=None)
    assert "defer_check" not in step_options.DECLARABLE


def test_a_conflict_fails_the_fit_before_any_step():
    x, y = classification_data(64)
    model = compile_model(mlp(), keras.optimizers.Adam(0.01))
    before = weights(model)
    guards = [NanLossGuard(fail=True), NanLossGuard(fail=False)]
    with pytest.raises(ValueError, match="different step options"):
        model.fit(x, y, batch_size=32, verbose=0, callbacks=guards)
    assert global_step(model) == 0
    assert max_abs_diff(weights(model), before) == 0


def test_a_custom_declaration_reaches_the_traced_step():
    """A step callback declaring `raise_on_nonfinite=False` makes the step
    skip the batch with a NaN: the run equals one without that batch."""
    x, y = _nan_data()

    def build():
        return compile_model(mlp(), keras.optimizers.Adam(0.01))

    model, reference = build(), build()
    reference.fit(x[:32], y[:32], batch_size=32, verbose=0)
    reference.optimizer.iterations.assign_add(1)
    reference.fit(x[64:], y[64:], batch_size=32, verbose=0)
    declares = Declares(raise_on_nonfinite=False)
    model.fit(
        x, y, batch_size=32, shuffle=False, verbose=0, callbacks=[declares]
    )
    assert not declares.traced.raise_on_nonfinite
    assert declares.traced.skipped_steps.read() == (1, 2, 2)
    assert global_step(model) == 3
    assert max_abs_diff(weights(model), weights(reference)) < 1e-6
    # The next fit declares nothing: its step raises again.
    with pytest.raises(keras_slim.NanLossDuringTrainingError):
        model.fit(x, y, batch_size=32, shuffle=False, verbose=0)
