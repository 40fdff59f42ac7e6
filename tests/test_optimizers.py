"""keras_slim.optimizers: TF1's optimizers, step for step, in Keras 3.

Every class is compared with its `tf.compat.v1.train` class run in graph
mode in one child process (tests/optimizer_problem.py): 100 steps of a
least-squares problem, dense and sparse gradients, TF1's arguments and
others. TF-Slim's flags under each decay type are in
tests/image/test_optimization.py.
"""

import copy

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _keras_optimizer
from keras_slim import optimizers
from tests import optimizer_problem as problem
from tests.helpers import global_step
from tests.helpers import once_per_session

CASES = {
    # Each class with TF1's defaults (TF1 requires the rate, and
    # Momentum's momentum).
    "GradientDescent": problem.case("GradientDescent", {}, ("constant", 0.1)),
    "Momentum": problem.case("Momentum", {"momentum": 0.9}, ("constant", 0.05)),
    "RMSProp": problem.case("RMSProp", {}, ("constant", 0.01)),
    "Adam": problem.case("Adam", {}, ("constant", 0.05)),
    "Adagrad": problem.case("Adagrad", {}, ("constant", 0.1)),
    "Adadelta": problem.case("Adadelta", {}, ("constant", 1.0)),
    "Ftrl": problem.case("Ftrl", {}, ("constant", 0.1)),
    # TF1's arguments TF-Slim does not set.
    "Momentum-nesterov": problem.case(
        "Momentum",
        {"momentum": 0.5, "use_nesterov": True},
        ("constant", 0.05),
    ),
    "RMSProp-centered": problem.case(
        "RMSProp",
        {"decay": 0.8, "momentum": 0.5, "epsilon": 1e-3, "centered": True},
        ("constant", 0.01),
    ),
    "Adam-locking": problem.case(
        "Adam",
        {"beta1": 0.8, "beta2": 0.99, "epsilon": 1e-3, "use_locking": True},
        ("constant", 0.05),
    ),
    "Ftrl-shrinkage": problem.case(
        "Ftrl",
        {
            "l1_regularization_strength": 0.01,
            "l2_shrinkage_regularization_strength": 0.05,
            "beta": 0.1,
        },
        ("constant", 0.1),
    ),
    # The rate after the accumulator (TF1), not before (Keras's SGD).
    "Momentum-decay": problem.case(
        "Momentum", {"momentum": 0.9}, ("exponential", 0.05, 10, 0.5)
    ),
    "RMSProp-decay": problem.case(
        "RMSProp",
        {"momentum": 0.9, "epsilon": 1.0},
        ("exponential", 0.05, 10, 0.5),
    ),
}
for _name in problem.TF1_CLASSES:
    _dense = CASES[_name]
    CASES[f"{_name}-sparse"] = problem.case(
        _name, _dense["kwargs"], _dense["rate"], sparse=True
    )

# Each class with a momentum where it has one, the rate halved every 10
# steps, for 40 steps of SlimModel.fit on a Dense layer.
FIT = {
    "GradientDescent": ({}, 0.05),
    "Momentum": ({"momentum": 0.9}, 0.05),
    "RMSProp": ({"decay": 0.9, "momentum": 0.9, "epsilon": 1.0}, 0.05),
    "Adam": ({"epsilon": 1e-3}, 0.05),
    "Adagrad": ({}, 0.05),
    "Adadelta": ({"rho": 0.9, "epsilon": 1e-3}, 1.0),
    "Ftrl": ({"l1_regularization_strength": 0.01}, 0.05),
}
FIT_STEPS = 40
TF1_CASES = dict(CASES)
for _name, (_kwargs, _rate) in FIT.items():
    TF1_CASES[f"{_name}-fit"] = problem.case(
        _name,
        _kwargs,
        ("exponential", _rate, 10, 0.5),
        dense=True,
        steps=FIT_STEPS,
    )


@pytest.fixture(scope="module")
def tf1(tmp_path_factory):
    return once_per_session(
        tmp_path_factory,
        "tf1_optimizers",
        lambda: problem.tf1_results(TF1_CASES),
    )


def keras_rate(rate):
    """The Keras learning rate of a case's TF1 rate."""
    if rate[0] == "constant":
        return rate[1]
    if rate[0] == "exponential":
        return keras.optimizers.schedules.ExponentialDecay(
            rate[1], rate[2], rate[3], staircase=True
        )
    return keras.optimizers.schedules.PolynomialDecay(
        rate[1], rate[2], rate[3], power=1.0
    )


def build(spec):
    name = spec["key"].split("-")[0]
    cls = getattr(optimizers, name)
    return cls(keras_rate(spec["rate"]), **spec["kwargs"])


@pytest.mark.parametrize("key", sorted(CASES))
def test_100_steps_equal_tf1s(tf1, key):
    spec = dict(CASES[key], key=key)
    variables = problem.keras_variables(spec["sparse"])
    final = problem.train(build(spec), variables, spec["sparse"], 100)
    # Measured: 0 (bit for bit) except Adam (beta powers as powers of the
    # step, TF1's as running products: <= 1.8e-7) and GradientDescent's
    # sparse path (summed before the scatter: 1.2e-7).
    assert problem.relative_difference(final, tf1[key]) < 1e-5


def test_the_sparse_cases_leave_untouched_rows_as_tf1(tf1):
    # Rows 1 and 3 of the table get no gradient: TF1's sparse kernels
    # leave them, its sparse Adam moves them with the decayed moments.
    start = problem.TABLE
    for name in ("RMSProp", "Adagrad", "Ftrl", "Momentum"):
        (table,) = tf1[f"{name}-sparse"]
        np.testing.assert_array_equal(np.array(table)[[1, 3]], start[[1, 3]])


@pytest.mark.parametrize(
    "optimizer, slots",
    [
        (optimizers.GradientDescent(0.1), {}),
        (optimizers.Momentum(0.1, 0.9), {"momentum": 0.0}),
        (optimizers.RMSProp(0.1), {"rms": 1.0, "momentum": 0.0}),
        (
            optimizers.RMSProp(0.1, centered=True),
            {"rms": 1.0, "mg": 0.0, "momentum": 0.0},
        ),
        (optimizers.Adam(), {"m": 0.0, "v": 0.0}),
        (optimizers.Adagrad(0.1, 0.3), {"accumulator": 0.3}),
        (optimizers.Adadelta(), {"accum": 0.0, "accum_update": 0.0}),
        (optimizers.Ftrl(0.1, -0.5, 0.2), {"accum": 0.2, "linear": 0.0}),
    ],
    ids=[
        "GradientDescent",
        "Momentum",
        "RMSProp",
        "RMSProp-centered",
        "Adam",
        "Adagrad",
        "Adadelta",
        "Ftrl",
    ],
)
def test_slots_have_tf1s_names_and_initial_values(optimizer, slots):
    kernel = keras.Variable(np.zeros((2, 3), "float32"), name="kernel")
    optimizer.build([kernel])
    found = {
        v.name.removeprefix("kernel_"): v.numpy().flat[0]
        for v in optimizer.variables
        if v.name.startswith("kernel_")
    }
    assert found == {k: np.float32(v) for k, v in slots.items()}
    assert optimizer.slot_names() == list(slots)
    for name in slots:
        assert optimizer.slot(kernel, name).shape == (2, 3)


def fitted(name, strategy):
    """A SlimModel (a Dense layer on the problem, the MSE loss) fitted
    under `strategy` with full batches of 8 (2 per replica on 4)."""
    spec = dict(TF1_CASES[f"{name}-fit"], key=name)
    with strategy.scope():
        inputs = keras.Input((3,))
        outputs = keras.layers.Dense(
            2,
            kernel_initializer=keras.initializers.Constant(
                problem.INITIAL["kernel"]
            ),
            bias_initializer=keras.initializers.Constant(
                problem.INITIAL["bias"]
            ),
        )(inputs)
        model = keras_slim.SlimModel(inputs, outputs)
        model.compile(optimizer=build(spec), loss="mse")
    data = tf.data.Dataset.from_tensors((problem.X, problem.Y)).repeat()
    model.fit(data, steps_per_epoch=FIT_STEPS, epochs=1, verbose=0)
    assert global_step(model) == FIT_STEPS
    return model


@pytest.mark.parametrize("name", sorted(FIT))
def test_fit_on_four_replicas_equals_tf1_on_one_device(tf1, mirrored, name):
    model = fitted(name, mirrored)
    # Keras's MSE and the sum of 4 replicas' gradients, against TF1's
    # reduce_mean on one device: only the order of the sums differs
    # (measured <= 5.2e-7, Adam's).
    difference = problem.relative_difference(
        [w.numpy() for w in model.weights], tf1[f"{name}-fit"]
    )
    assert difference < 1e-5
    # Each replica's copy of every slot is the same.
    for variable in model.optimizer.variables:
        copies = mirrored.experimental_local_results(variable.value)
        for replica in copies[1:]:
            np.testing.assert_array_equal(replica.numpy(), copies[0].numpy())


@pytest.mark.parametrize("key", sorted(problem.TF1_CLASSES))
def test_a_restored_checkpoint_continues_identically(tmp_path, key):
    spec = dict(CASES[key], key=key)
    whole = problem.train(
        build(spec), problem.keras_variables(False), False, 60
    )

    variables = problem.keras_variables(False)
    optimizer = build(spec)
    problem.train(optimizer, variables, False, 30)
    saved = tf.train.Checkpoint(optimizer=optimizer, variables=variables)
    path = saved.save(str(tmp_path / "ckpt"))
    # Keras's layout: the slots once, as the optimizer's variables (not
    # also as TF1-style slot references, .OPTIMIZER_SLOT).
    names = [name for name, _ in tf.train.list_variables(path)]
    slots = [n for n in names if n.startswith("optimizer/_variables/")]
    assert len(slots) == len(optimizer.variables) - 2  # iterations, rate
    assert not [n for n in names if "OPTIMIZER_SLOT" in n]

    variables = problem.keras_variables(False)
    optimizer = build(spec)
    optimizer.build(variables)
    tf.train.Checkpoint(optimizer=optimizer, variables=variables).restore(
        path
    ).assert_consumed()
    assert global_step(optimizer) == 30
    resumed = problem.train(optimizer, variables, False, 30)
    for a, b in zip(resumed, whole):
        np.testing.assert_array_equal(a, b)


CONFIGS = [
    optimizers.GradientDescent(0.5, use_locking=True, name="sgd"),
    optimizers.Momentum(0.1, 0.5, use_nesterov=True, clipnorm=1.0),
    optimizers.RMSProp(
        keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5, True),
        decay=0.8,
        momentum=0.5,
        epsilon=1.0,
        centered=True,
    ),
    optimizers.Adam(0.01, 0.8, 0.99, 1e-3, use_ema=True, ema_momentum=0.9),
    optimizers.Adagrad(0.1, 0.3),
    optimizers.Adadelta(1.0, 0.9, 1e-6),
    optimizers.Ftrl(
        0.1, -0.25, 0.2, 0.01, 0.02, l2_shrinkage_regularization_strength=0.1
    ),
]


@pytest.mark.parametrize("optimizer", CONFIGS, ids=lambda o: type(o).__name__)
def test_get_config_round_trip(optimizer):
    config = optimizer.get_config()
    # Keras's from_config replaces the schedule's config in place.
    copied = copy.deepcopy(config)
    assert type(optimizer).from_config(copied).get_config() == config
    restored = keras.optimizers.deserialize(
        keras.optimizers.serialize(optimizer)
    )
    assert type(restored) is type(optimizer)
    assert restored.get_config() == config
    assert keras.saving.get_registered_name(type(optimizer)) == (
        f"keras_slim>{type(optimizer).__name__}"
    )


def test_use_ema_averages_the_weights_as_keras():
    variables = problem.keras_variables(False)
    optimizer = optimizers.RMSProp(0.1, use_ema=True, ema_momentum=0.5)
    first = problem.train(optimizer, variables, False, 1)
    second = problem.train(optimizer, variables, False, 1)
    pairs = _keras_optimizer.moving_averages(optimizer)
    assert [v.name for v, _ in pairs] == ["kernel", "bias", "scale"]
    for (_, average), a, b in zip(pairs, first, second):
        # Keras's: the first step copies the weights, then the momentum.
        np.testing.assert_allclose(average.numpy(), 0.5 * a + 0.5 * b)
    optimizer.finalize_variable_values(variables)
    for variable, (_, average) in zip(variables, pairs):
        np.testing.assert_array_equal(variable.numpy(), average.numpy())


@pytest.mark.parametrize(
    "make, message",
    [
        (
            lambda: optimizers.GradientDescent(-0.1),
            "Received: learning_rate=-0.1. Expected a non-negative number",
        ),
        (
            lambda: optimizers.GradientDescent(float("nan")),
            "Received: learning_rate=nan",
        ),
        (
            lambda: optimizers.Adam("0.1"),
            "Received: learning_rate='0.1'",
        ),
        (
            lambda: optimizers.Momentum(0.1, 1.5),
            r"Received: momentum=1.5. Expected a number in \[0, 1\]",
        ),
        (
            lambda: optimizers.Momentum(0.1, 0.9, use_nesterov="yes"),
            "Received: use_nesterov='yes'. Expected True or False",
        ),
        (
            lambda: optimizers.RMSProp(0.1, decay=-0.1),
            r"Received: decay=-0.1. Expected a number in \[0, 1\]",
        ),
        (
            lambda: optimizers.RMSProp(0.1, epsilon=-1.0),
            "Received: epsilon=-1.0. Expected a non-negative number",
        ),
        (
            lambda: optimizers.Adam(0.1, beta1=1.0),
            r"Received: beta1=1.0. Expected a number in \[0, 1\)",
        ),
        (
            lambda: optimizers.Adam(0.1, beta2=None),
            "Received: beta2=None",
        ),
        (
            lambda: optimizers.Adagrad(0.1, 0.0),
            "Received: initial_accumulator_value=0.0. Expected a positive",
        ),
        (
            lambda: optimizers.Adadelta(0.1, rho=2.0),
            "Received: rho=2.0",
        ),
        (
            lambda: optimizers.Ftrl(0.1, learning_rate_power=0.5),
            "Received: learning_rate_power=0.5. Expected a number <= 0",
        ),
        (
            lambda: optimizers.Ftrl(0.1, l1_regularization_strength=-1),
            "Received: l1_regularization_strength=-1",
        ),
        (
            lambda: optimizers.Ftrl(0.1, beta=-1.0),
            "Received: beta=-1.0",
        ),
        (
            lambda: optimizers.Adam(0.1, use_locking=1),
            "Received: use_locking=1. Expected True or False",
        ),
        # Keras's own arguments, checked by Keras.
        (
            lambda: optimizers.Adam(0.1, clipnorm=1.0, clipvalue=1.0),
            "Only one of `clipnorm`, `clipvalue`",
        ),
        (
            lambda: optimizers.Adam(0.1, lr_decay=0.5),
            "Argument\\(s\\) not recognized",
        ),
    ],
)
def test_bad_arguments_are_named(make, message):
    with pytest.raises(ValueError, match=message):
        make()
