"""GradientPolicy: validation, serialization, resolution, describe, apply."""

import logging
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import gradients
from keras_slim.policy import PolicyPlan
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import mlp


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"clip_norm": 0}, "Received: clip_norm=0"),
        ({"clip_norm": -1.0}, "Received: clip_norm=-1.0"),
        ({"clip_norm": "1"}, "Received: clip_norm='1'"),
        ({"clip_norm": float("nan")}, "Received: clip_norm=nan"),
        ({"clip_global_norm": 0.0}, "Received: clip_global_norm=0.0"),
        (
            {"clip_norm": 1.0, "clip_global_norm": 2.0},
            "Only one of `clip_norm` and `clip_global_norm`",
        ),
        ({"multipliers": [("fc1/.*", 2.0)]}, "Received: multipliers="),
        ({"multipliers": {"fc1/.*": "2"}}, "multiplier for 'fc1/.*' must be"),
        ({"multipliers": {"fc1/.*": True}}, "must be a finite number"),
        ({"multipliers": {"fc1/.*": float("inf")}}, "must be a finite"),
        ({"multipliers": {3: 1.0}}, "Received: multipliers=3"),
        ({"freeze": ["fc1/(kernel"]}, "'fc1/\\(kernel' is not a valid"),
        ({"freeze": 3}, "Received: freeze=3"),
        ({"trainable": [None]}, "Received: trainable=None"),
        ({"check_numerics": 1}, "Received: check_numerics=1"),
    ],
)
def test_bad_arguments_fail_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        keras_slim.GradientPolicy(**kwargs)


def test_single_pattern_string_is_a_list_of_one():
    policy = keras_slim.GradientPolicy(freeze="fc1/.*", trainable="logits")
    assert policy.freeze == ("fc1/.*",)
    assert policy.trainable == ("logits",)


def test_config_round_trip():
    policy = keras_slim.GradientPolicy(
        multipliers={"a": 2, r".*/bias": 0.5},
        freeze=["b"],
        trainable=["a"],
        clip_global_norm=3,
        check_numerics=False,
    )
    config = policy.get_config()
    before_lr_multipliers = {
        "multipliers": {"a": 2.0, ".*/bias": 0.5},
        "freeze": ["b"],
        "trainable": ["a"],
        "clip_norm": None,
        "clip_global_norm": 3.0,
        "check_numerics": False,
    }
    assert config == {
        **before_lr_multipliers,
        "lr_multipliers": {},
        "layer_decay": None,
        "layer_groups": None,
    }
    assert keras_slim.GradientPolicy.from_config(config) == policy
    # A config saved before learning-rate multipliers existed still loads.
    old = keras_slim.GradientPolicy.from_config(before_lr_multipliers)
    assert old == policy
    serialized = keras.saving.serialize_keras_object(policy)
    assert serialized["registered_name"] == "keras_slim>GradientPolicy"
    assert keras.saving.deserialize_keras_object(serialized) == policy


def test_resolve_multipliers_multiply_and_selection():
    model = mlp()
    policy = keras_slim.GradientPolicy(
        multipliers={r".*/bias": 0.5, "logits/.*": 4.0}, freeze=["fc1/bias"]
    )
    plan = policy.resolve(model)
    paths = [v.path for v in plan.variables]
    assert paths == ["fc1/kernel", "logits/kernel", "logits/bias"]
    assert plan.multipliers == (None, 4.0, 2.0)


def test_trainable_patterns_select_variables():
    plan = keras_slim.GradientPolicy(trainable=["logits/"]).resolve(mlp())
    assert [v.path for v in plan.variables] == ["logits/kernel", "logits/bias"]


@pytest.mark.parametrize(
    "kwargs,argument,pattern",
    [
        ({"multipliers": {"conv9/.*": 2.0}}, "multipliers", "conv9/.*"),
        ({"freeze": ["fc1/.*", "fc2"]}, "freeze", "fc2"),
        ({"trainable": ["kernel"]}, "trainable", "kernel"),
    ],
)
def test_pattern_matching_nothing_names_pattern_and_paths(
    kwargs, argument, pattern
):
    policy = keras_slim.GradientPolicy(**kwargs)
    with pytest.raises(ValueError) as info:
        policy.resolve(mlp())
    message = str(info.value)
    assert f"`{argument}` pattern {pattern!r}" in message
    assert "model 'mlp'" in message
    assert "['fc1/kernel', 'fc1/bias', 'logits/kernel', 'logits/bias']" in (
        message
    )


def test_policy_that_trains_nothing_is_an_error():
    policy = keras_slim.GradientPolicy(freeze=[".*"])
    with pytest.raises(ValueError, match="leaves no variable of model 'mlp'"):
        policy.resolve(mlp())


def test_describe_table():
    inputs = keras.Input((4,))
    hidden = keras.layers.Dense(8, name="fc1")(inputs)
    hidden = keras.layers.BatchNormalization(name="bn")(hidden)
    outputs = keras.layers.Dense(1, name="logits")(hidden)
    model = keras.Model(inputs, outputs)
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0, r".*/bias": 0.5},
        freeze=["fc1/.*"],
        trainable=["fc1", "logits"],
        clip_norm=1.0,
    )
    # logits/bias: 2.0 (logits/.*) times 0.5 (.*/bias).
    assert policy.describe(model).splitlines() == [
        "variable            shape   select              multiply  lr  clip",
        "fc1/kernel          (4, 8)  frozen by 'fc1/.*'  -         -   -",
        "fc1/bias            (8,)    frozen by 'fc1/.*'  -         -   -",
        "bn/gamma            (8,)    not in `trainable`  -         -   -",
        "bn/beta             (8,)    not in `trainable`  -         -   -",
        "bn/moving_mean      (8,)    not trainable       -         -   -",
        "bn/moving_variance  (8,)    not trainable       -         -   -",
        "logits/kernel       (8, 1)  train               2         1   "
        "norm <= 1",
        "logits/bias         (1,)    train               1         1   "
        "norm <= 1",
    ]


def test_describe_needs_a_built_model():
    model = keras.Sequential([keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="has no variables yet"):
        keras_slim.GradientPolicy().describe(model)


def _plan(**kwargs):
    variables = tuple(tf.Variable(np.zeros(2, "float32")) for _ in range(2))
    return PolicyPlan(variables=variables, **kwargs)


def test_plan_apply_multiplies_then_clips_per_tensor():
    plan = _plan(multipliers=(2.0, None), clip_norm=5.0)
    out = plan.apply([tf.constant([3.0, 4.0]), tf.constant([30.0, 40.0])])
    # [6, 8] has norm 10 -> [3, 4]; [30, 40] has norm 50 -> [3, 4].
    np.testing.assert_allclose(out[0].numpy(), [3.0, 4.0], rtol=1e-6)
    np.testing.assert_allclose(out[1].numpy(), [3.0, 4.0], rtol=1e-6)


def test_plan_apply_global_norm_and_loss_scale():
    plan = _plan(multipliers=(None, None), clip_global_norm=1.0)
    grads = [tf.constant([3.0, 0.0]), tf.constant([0.0, 4.0])]
    out = plan.apply(grads)
    np.testing.assert_allclose(out[0].numpy(), [0.6, 0.0], rtol=1e-6)
    scaled = plan.apply([g * 128.0 for g in grads], scale=128.0)
    np.testing.assert_allclose(
        scaled[1].numpy() / 128.0, out[1].numpy(), rtol=1e-6
    )


@pytest.mark.parametrize("clip", ["clip_norm", "clip_global_norm"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_policy_update_is_clip_of_multiply_from_gradients(clip, seed):
    """One SGD(1) step of a SlimModel equals the weights minus
    `clip(multiply_gradients(...))` of keras_slim.gradients, on random
    multipliers that include 0.0 (the variable must not move) and
    negative values."""
    rng = np.random.default_rng(seed)
    x, y = classification_data(64, seed=seed)
    model = mlp()
    paths = [v.path for v in model.trainable_variables]
    values = [0.0, -1.5, float(rng.uniform(0.1, 3.0)), 1.0]
    chosen = rng.permutation(values)
    multipliers = {path: float(m) for path, m in zip(paths, chosen)}
    policy = keras_slim.GradientPolicy(
        multipliers={re.escape(p) + "$": m for p, m in multipliers.items()},
        **{clip: 0.5},
    )
    model = compile_model(mlp(policy), keras.optimizers.SGD(1.0))
    before = [v.numpy() for v in model.trainable_variables]
    with tf.GradientTape() as tape:
        loss = model.compute_loss(x=x, y=y, y_pred=model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    pairs = keras_slim.gradients.multiply_gradients(
        list(zip(grads, model.trainable_variables)), multipliers
    )
    if clip == "clip_norm":
        pairs = keras_slim.gradients.clip_gradient_norms(pairs, 0.5)
    else:
        pairs = keras_slim.gradients.clip_by_global_norm(pairs, 0.5)
    model.fit(x, y, batch_size=64, epochs=1, shuffle=False, verbose=0)
    for path, start, (grad, variable) in zip(paths, before, pairs):
        np.testing.assert_allclose(
            variable.numpy(), start - grad.numpy(), atol=1e-6, err_msg=path
        )
        if multipliers[path] == 0.0:
            np.testing.assert_array_equal(variable.numpy(), start)


def test_an_empty_pattern_is_ignored_as_in_tf_slim(caplog):
    # One meaning across GradientPolicy and keras_slim.gradients.
    caplog.set_level(logging.WARNING, logger="keras_slim")
    policy = keras_slim.GradientPolicy(
        freeze=["", "fc1/kernel"], multipliers={"": 3.0, "logits/.*": 2.0}
    )
    assert policy.freeze == ("fc1/kernel",)
    assert policy.multipliers == {"logits/.*": 2.0}
    assert "ignores the empty pattern in `freeze`" in caplog.text
    assert "ignores the empty pattern in `multipliers`" in caplog.text
    model = mlp(policy)
    plan = policy.resolve(model)
    paths = [v.path for v in plan.variables]
    assert paths == ["fc1/bias", "logits/kernel", "logits/bias"]
    assert plan.multipliers == (None, 2.0, 2.0)
    # keras_slim.gradients does the same with the same patterns.
    pairs = [(tf.ones_like(v), v) for v in model.trainable_variables]
    kept = gradients.freeze_gradients_matching_regex(pairs, ["", "fc1/kernel"])
    assert [v.path for _, v in kept] == paths
