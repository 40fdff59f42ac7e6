"""StepPlan: the stages of a run's update, in order, built once per run."""

import keras
import pytest

import keras_slim
from keras_slim.model import SlimModel
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import mlp


def _stages(model):
    """The stage names of `model.describe()`'s plan, in order."""
    plan = model.describe().split("\n\n")[0]
    return [
        line.split(".", 1)[1].split("  ")[0].strip()
        for line in plan.splitlines()
    ]


def test_describe_shows_the_stages_above_the_policy_table():
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0}, clip_global_norm=1.0
    )
    model = compile_model(mlp(policy))
    text = model.describe()
    plan, table = text.split("\n\n")
    assert table == policy.describe(model)
    assert _stages(model) == ["gate", "policy", "apply"]
    lines = plan.splitlines()
    assert "fails the step" in lines[0]
    assert "4 variables trained, 2 gradients multiplied" in lines[1]
    assert "global norm clipped to 1" in lines[1]
    assert "SGD on the summed gradients" in lines[2]


def test_accumulation_and_lr_multipliers_are_stages_of_the_plan():
    policy = keras_slim.GradientPolicy(lr_multipliers={"fc1/.*": 0.1})
    model = compile_model(
        mlp(policy), keras.optimizers.SGD(0.1, gradient_accumulation_steps=3)
    )
    assert _stages(model) == ["accumulate", "gate", "policy", "apply"]
    plan = model.describe().split("\n\n")[0].splitlines()
    assert "every 3 micro-batches" in plan[0]
    assert "2 variables at a scaled learning rate" in plan[3]


def test_a_loss_scale_is_a_stage_and_no_check_drops_the_gate():
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        model = compile_model(mlp())
    finally:
        keras.mixed_precision.set_global_policy("float32")
    assert _stages(model) == ["gate", "policy", "loss scale", "apply"]
    unchecked = compile_model(
        mlp(keras_slim.GradientPolicy(check_numerics=False))
    )
    assert _stages(unchecked) == ["policy", "apply"]


def test_a_run_plan_follows_its_callbacks(tmp_path):
    """A run's plan has the stages its callbacks' step options ask for:
    in-step summaries after the policy, a gate that skips."""
    seen = []

    class Plan(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(self.model.step_plan.describe())

    x, y = classification_data(32)
    model = compile_model(mlp())
    model.fit(
        x,
        y,
        batch_size=16,
        verbose=0,
        callbacks=[
            keras_slim.callbacks.NanLossGuard(fail=False),
            keras_slim.callbacks.Summaries(tmp_path, gradients=True),
            Plan(),
        ],
    )
    lines = seen[-1].splitlines()
    assert [line.split()[1] for line in lines] == [
        "gate",
        "policy",
        "summaries",
        "apply",
    ]
    assert "skips the step" in lines[0]
    assert "write gradients" in lines[2]
    # Outside the run, the step's default plan again.
    assert "fails the step" in model.describe().splitlines()[0]


def test_the_plan_is_built_once_per_run_under_replicas(mirrored, monkeypatch):
    built = []
    original = SlimModel.make_step_plan
    monkeypatch.setattr(
        SlimModel,
        "make_step_plan",
        lambda self, options: built.append(options) or original(self, options),
    )
    x, y = classification_data(64)
    with mirrored.scope():
        model = compile_model(mlp())
    model.fit(x, y, batch_size=16, epochs=2, verbose=0)
    assert len(built) == 1  # 4 replicas traced it; one plan
    model.fit(x, y, batch_size=16, verbose=0)
    assert len(built) == 1  # the same options: the same functions and plan
    guard = keras_slim.callbacks.NanLossGuard(fail=False)
    model.fit(x, y, batch_size=16, verbose=0, callbacks=[guard])
    assert len(built) == 2
    assert not built[1].raise_on_nonfinite


def test_describe_needs_a_compiled_model():
    with pytest.raises(ValueError, match="'mlp' is not compiled"):
        mlp().describe()
