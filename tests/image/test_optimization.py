"""keras_slim.image.optimizer and .learning_rate: TF-Slim's two helpers,
against TF1's.

TF-Slim's `_configure_optimizer` and `_configure_learning_rate`, stated in
TF1 calls in one graph-mode child (`_TF_SLIM` below), train the problem of
tests/optimizer_problem.py for 100 steps with every `--optimizer`, TF-Slim's
default flags and others, under every `--learning_rate_decay_type`; the
Keras optimizer `configure_optimizer(configure_learning_rate(...))` builds
must end where TF1's does. The same child evaluates TF1's learning rates
at many steps for `configure_learning_rate`'s.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim.image import learning_rate
from keras_slim.image import optimizer as optimizer_lib
from keras_slim.image import train_image_classifier as cli
from tests import optimizer_problem as problem
from tests.helpers import once_per_session

# TF-Slim's helpers in TF1 calls, with its flags' defaults.
_TF_SLIM = """
import types

TF_SLIM_FLAGS = {
    "optimizer": "rmsprop", "opt_epsilon": 1.0, "adadelta_rho": 0.95,
    "adagrad_initial_accumulator_value": 0.1, "adam_beta1": 0.9,
    "adam_beta2": 0.999, "ftrl_learning_rate_power": -0.5,
    "ftrl_initial_accumulator_value": 0.1, "ftrl_l1": 0.0, "ftrl_l2": 0.0,
    "momentum": 0.9, "rmsprop_momentum": 0.9, "rmsprop_decay": 0.9,
    "learning_rate_decay_type": "exponential", "learning_rate": 0.01,
    "end_learning_rate": 0.0001, "learning_rate_decay_factor": 0.94,
    "num_epochs_per_decay": 2.0, "sync_replicas": False,
    "replicas_to_aggregate": 1, "batch_size": 32,
}


def slim_flags(given):
    return types.SimpleNamespace(**{**TF_SLIM_FLAGS, **given})


def slim_learning_rate(f, num_samples_per_epoch, global_step):
    steps = int(num_samples_per_epoch * f.num_epochs_per_decay / f.batch_size)
    if f.sync_replicas:
        steps /= f.replicas_to_aggregate
    kind = f.learning_rate_decay_type
    if kind == "fixed":
        return tf.constant(f.learning_rate)
    if kind == "exponential":
        return tf1.train.exponential_decay(
            f.learning_rate, global_step, steps, f.learning_rate_decay_factor,
            staircase=True)
    return tf1.train.polynomial_decay(
        f.learning_rate, global_step, steps, f.end_learning_rate,
        power=1.0, cycle=False)


def slim_optimizer(f, lr):
    train = tf1.train
    return {
        "adadelta": lambda: train.AdadeltaOptimizer(
            lr, rho=f.adadelta_rho, epsilon=f.opt_epsilon),
        "adagrad": lambda: train.AdagradOptimizer(
            lr,
            initial_accumulator_value=f.adagrad_initial_accumulator_value),
        "adam": lambda: train.AdamOptimizer(
            lr, beta1=f.adam_beta1, beta2=f.adam_beta2,
            epsilon=f.opt_epsilon),
        "ftrl": lambda: train.FtrlOptimizer(
            lr, learning_rate_power=f.ftrl_learning_rate_power,
            initial_accumulator_value=f.ftrl_initial_accumulator_value,
            l1_regularization_strength=f.ftrl_l1,
            l2_regularization_strength=f.ftrl_l2),
        "momentum": lambda: train.MomentumOptimizer(
            lr, momentum=f.momentum, name="Momentum"),
        "rmsprop": lambda: train.RMSPropOptimizer(
            lr, decay=f.rmsprop_decay, momentum=f.rmsprop_momentum,
            epsilon=f.opt_epsilon),
        "sgd": lambda: train.GradientDescentOptimizer(lr),
    }[f.optimizer]()


def make_optimizer(spec, global_step):
    f = slim_flags(spec["flags"])
    lr = slim_learning_rate(f, spec["num_samples"], global_step)
    return slim_optimizer(f, lr)
"""

_RATES = """
def slim_rates(spec):
    with tf.Graph().as_default():
        step = tf1.placeholder(tf.int64, [])
        lr = slim_learning_rate(
            slim_flags(spec["flags"]), spec["num_samples"], step)
        with tf1.Session() as sess:
            return [float(sess.run(lr, {step: s})) for s in RATE_STEPS]


RATE_STEPS = %r
results["rates"] = {k: slim_rates(v) for k, v in %r.items()}
"""

# TF-Slim's flags set to other values than its defaults.
OTHER_OPTIMIZER_FLAGS = {
    "opt_epsilon": 1e-3,
    "adadelta_rho": 0.8,
    "adagrad_initial_accumulator_value": 0.5,
    "adam_beta1": 0.8,
    "adam_beta2": 0.99,
    "ftrl_learning_rate_power": -0.25,
    "ftrl_initial_accumulator_value": 0.3,
    "ftrl_l1": 0.01,
    "ftrl_l2": 0.02,
    "momentum": 0.5,
    "rmsprop_momentum": 0.5,
    "rmsprop_decay": 0.8,
}
# int(160 * 2.5 / 16) / 3 = 8.33 steps per decay: a float, as TF-Slim's.
OTHER_RATE_FLAGS = {
    "learning_rate": 0.05,
    "learning_rate_decay_factor": 0.5,
    "end_learning_rate": 0.001,
    "num_epochs_per_decay": 2.5,
    "batch_size": 16,
    "sync_replicas": True,
    "replicas_to_aggregate": 3,
}
# With TF-Slim's defaults: int(160 * 2.0 / 32) = 10 steps per decay.
NUM_SAMPLES = 160
# TF-Slim's decay types (cosine is not: tested against TF1's below).
SLIM_DECAY_TYPES = ("exponential", "fixed", "polynomial")


def _spec(flags, num_samples=NUM_SAMPLES):
    return {
        "flags": flags,
        "num_samples": num_samples,
        "sparse": False,
        "dense": False,
        "steps": problem.STEPS,
    }


CASES = {
    f"{name}-{variant}-{kind}": _spec(
        {
            "optimizer": name,
            "learning_rate_decay_type": kind,
            **(
                {**OTHER_OPTIMIZER_FLAGS, **OTHER_RATE_FLAGS}
                if variant == "other"
                else {}
            ),
        }
    )
    for name in optimizer_lib.OPTIMIZERS
    for variant in ("defaults", "other")
    for kind in SLIM_DECAY_TYPES
}

RATE_STEPS = list(range(101)) + [1600, 1601, 1602, 3202, 3203, 80072, 10**6]
RATES = {
    **{
        f"{variant}-{kind}": _spec(
            {
                "learning_rate_decay_type": kind,
                **(OTHER_RATE_FLAGS if variant == "other" else {}),
            }
        )
        for variant in ("defaults", "other")
        for kind in SLIM_DECAY_TYPES
    },
    # ImageNet on 50 synchronous replicas: 80072 / 50 = 1601.44 steps.
    **{
        f"imagenet-sync-{kind}": _spec(
            {
                "learning_rate_decay_type": kind,
                "learning_rate": 0.045,
                "sync_replicas": True,
                "replicas_to_aggregate": 50,
            },
            num_samples=1281167,
        )
        for kind in ("exponential", "polynomial")
    },
    # replicas_to_aggregate without sync_replicas divides nothing.
    "imagenet-async": _spec(
        {"replicas_to_aggregate": 50, "learning_rate": 0.045},
        num_samples=1281167,
    ),
}


@pytest.fixture(scope="module")
def tf1(tmp_path_factory):
    return once_per_session(
        tmp_path_factory,
        "tf1_tf_slim_optimization",
        lambda: problem.tf1_results(
            CASES, prelude=_TF_SLIM, extra=_RATES % (RATE_STEPS, RATES)
        ),
    )


def _split(flags):
    rate = {
        k: v for k, v in flags.items() if k in learning_rate.LEARNING_RATE_FLAGS
    }
    return rate, {k: v for k, v in flags.items() if k not in rate}


@pytest.mark.parametrize("key", sorted(CASES))
def test_100_steps_equal_tf_slims_tf1_optimizer(tf1, key):
    spec = CASES[key]
    rate_flags, optimizer_flags = _split(spec["flags"])
    rate = learning_rate.configure_learning_rate(
        spec["num_samples"], None, **rate_flags
    )
    optimizer = optimizer_lib.configure_optimizer(rate, **optimizer_flags)
    variables = problem.keras_variables(False)
    final = problem.train(optimizer, variables, False, problem.STEPS)
    # Measured: 0 (bit for bit) except adam (<= 3e-7: the beta powers).
    assert problem.relative_difference(final, tf1[key]) < 1e-5


@pytest.mark.parametrize("key", sorted(RATES))
def test_learning_rates_equal_tf_slims_at_every_step(tf1, key):
    spec = RATES[key]

    # In a graph, as the train step evaluates it (and as TF1's: Grappler
    # rewrites the division by the constant decay steps alike).
    @tf.function
    def rates(steps):
        return learning_rate.configure_learning_rate(
            spec["num_samples"], steps, **spec["flags"]
        )

    steps = tf.constant(RATE_STEPS, tf.int64)  # all at once
    ours = np.broadcast_to(rates(steps).numpy(), steps.shape)
    np.testing.assert_array_equal(ours, np.float32(tf1["rates"][key]))


@pytest.mark.parametrize(
    "name, cls, config",
    [
        ("adadelta", "Adadelta", {"rho": 0.95, "epsilon": 1.0}),
        ("adagrad", "Adagrad", {"initial_accumulator_value": 0.1}),
        ("adam", "Adam", {"beta1": 0.9, "beta2": 0.999, "epsilon": 1.0}),
        (
            "ftrl",
            "Ftrl",
            {
                "learning_rate_power": -0.5,
                "initial_accumulator_value": 0.1,
                "l1_regularization_strength": 0.0,
                "l2_regularization_strength": 0.0,
            },
        ),
        ("momentum", "Momentum", {"momentum": 0.9, "name": "Momentum"}),
        (
            "rmsprop",
            "RMSProp",
            {"decay": 0.9, "momentum": 0.9, "epsilon": 1.0},
        ),
        ("sgd", "GradientDescent", {"name": "GradientDescent"}),
    ],
)
def test_each_optimizer_with_tf_slims_defaults(name, cls, config):
    optimizer = optimizer_lib.configure_optimizer(0.1, optimizer=name)
    assert type(optimizer) is getattr(keras_slim.optimizers, cls)
    given = optimizer.get_config()
    assert {k: given[k] for k in config} == config
    assert given["learning_rate"] == pytest.approx(0.1)
    assert not given["use_ema"]


def test_rmsprop_is_tf_slims_default():
    optimizer = optimizer_lib.configure_optimizer(0.1)
    assert type(optimizer) is keras_slim.optimizers.RMSProp


def test_moving_average_decay_is_keras_ema():
    optimizer = optimizer_lib.configure_optimizer(
        0.1, optimizer="sgd", moving_average_decay=0.9999
    )
    assert optimizer.use_ema and optimizer.ema_momentum == 0.9999


def test_the_rate_given_is_the_optimizers():
    schedule = learning_rate.configure_learning_rate(1000, None)
    optimizer = optimizer_lib.configure_optimizer(schedule, optimizer="adam")
    given = optimizer.get_config()["learning_rate"]
    assert given["config"] == schedule.get_config()
    assert learning_rate.configure_learning_rate(
        1000, None, learning_rate_decay_type="fixed", learning_rate=0.3
    ) == pytest.approx(0.3)


@pytest.mark.parametrize(
    "num_samples, flags, steps",
    [
        # TF-Slim's: int(num_samples * num_epochs_per_decay / batch_size).
        (1281167, {}, 80072),
        (1000, {"batch_size": 100, "num_epochs_per_decay": 2.5}, 25),
        (1000, {"batch_size": 300}, 6),  # int(6.67)
        # Divided by replicas_to_aggregate when sync_replicas: a float.
        (
            1281167,
            {"sync_replicas": True, "replicas_to_aggregate": 50},
            80072 / 50,
        ),
        (1281167, {"replicas_to_aggregate": 50}, 80072),
    ],
)
def test_decay_steps_are_tf_slims(num_samples, flags, steps):
    for kind in ("exponential", "polynomial"):
        schedule = learning_rate.configure_learning_rate(
            num_samples, None, learning_rate_decay_type=kind, **flags
        )
        assert schedule.decay_steps == steps


@pytest.mark.parametrize("kind", ["exponential", "polynomial"])
def test_zero_decay_steps_are_an_error_naming_the_values(kind):
    message = (
        "decay every 0 steps .* Received: num_samples_per_epoch=10, "
        "num_epochs_per_decay=2.0, batch_size=32"
    )
    with pytest.raises(ValueError, match=message):
        learning_rate.configure_learning_rate(
            10, None, learning_rate_decay_type=kind
        )
    # A fixed rate has no decay steps.
    rate = learning_rate.configure_learning_rate(
        10, 5, learning_rate_decay_type="fixed"
    )
    assert rate.dtype == tf.float32 and float(rate) == np.float32(0.01)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (
            lambda: optimizer_lib.configure_optimizer(0.1, optimizer="lbfgs"),
            ValueError,
            "Received: optimizer='lbfgs'. Expected one of",
        ),
        (
            lambda: optimizer_lib.configure_optimizer(0.1, adam_beta3=0.5),
            TypeError,
            r"configure_optimizer\(\) got unknown flags \['adam_beta3'\]",
        ),
        (
            # A learning-rate flag is configure_learning_rate's.
            lambda: optimizer_lib.configure_optimizer(
                0.1, learning_rate_decay_type="fixed"
            ),
            TypeError,
            r"unknown flags \['learning_rate_decay_type'\]",
        ),
        (
            lambda: optimizer_lib.configure_optimizer(0.1, rmsprop_decay=1.5),
            ValueError,
            "Received: decay=1.5",
        ),
        (
            lambda: optimizer_lib.configure_optimizer(-0.1),
            ValueError,
            "Received: learning_rate=-0.1",
        ),
        (
            lambda: learning_rate.configure_learning_rate(
                100, None, learning_rate_decay_type="linear"
            ),
            ValueError,
            "Received: learning_rate_decay_type='linear'. Expected one of",
        ),
        (
            lambda: learning_rate.configure_learning_rate(
                100, None, momentum=0.9
            ),
            TypeError,
            r"configure_learning_rate\(\) got unknown flags \['momentum'\]",
        ),
        (
            lambda: learning_rate.configure_learning_rate(
                100, None, learning_rate=0
            ),
            ValueError,
            "Received: learning_rate=0. Expected a positive number",
        ),
        (
            lambda: learning_rate.configure_learning_rate(
                100, None, batch_size=0
            ),
            ValueError,
            "Received: batch_size=0",
        ),
        (
            lambda: learning_rate.configure_learning_rate(
                100, None, sync_replicas=True, replicas_to_aggregate=0
            ),
            ValueError,
            "Received: replicas_to_aggregate=0",
        ),
        (
            lambda: learning_rate.configure_learning_rate(None, None),
            ValueError,
            "Received: num_samples_per_epoch=None",
        ),
    ],
)
def test_bad_flags_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_commands_flags_default_to_these():
    flags = cli.parser().parse_args([])
    defaults = {
        "optimizer": "rmsprop",
        "moving_average_decay": None,
        **{k: v for k, (v, _) in optimizer_lib.OPTIMIZER_FLAGS.items()},
        **learning_rate.LEARNING_RATE_FLAGS,
    }
    # The command's default is --worker_replicas' (1 here).
    defaults.pop("replicas_to_aggregate")
    assert {k: getattr(flags, k) for k in defaults} == defaults


def test_gradient_accumulation_steps_is_checked():
    with pytest.raises(ValueError, match="gradient_accumulation_steps=0"):
        optimizer_lib.configure_optimizer(0.1, gradient_accumulation_steps=0)
    optimizer = optimizer_lib.configure_optimizer(
        0.1, optimizer="sgd", gradient_accumulation_steps=2
    )
    assert optimizer.gradient_accumulation_steps == 2


# --- cosine and warmup (not TF-Slim's) --------------------------------------


def _tf1(decay, *args, **kwargs):
    """TF1's decay function at a step, eagerly (it returns a callable)."""
    return float(getattr(tf.compat.v1.train, decay)(*args, **kwargs)())


def _rates(num_samples, steps, **flags):
    schedule = learning_rate.configure_learning_rate(num_samples, None, **flags)
    return [float(schedule(step)) for step in steps]


@pytest.mark.parametrize(
    "flags, decay_steps",
    [
        # To --max_number_of_steps when it is set ...
        ({"max_number_of_steps": 40}, 40),
        # ... else over num_epochs_per_decay epochs: int(1000 * 2.0 / 32).
        ({}, 62),
        ({"num_epochs_per_decay": 0.5, "batch_size": 50}, 10),
        # Global steps: divided by replicas_to_aggregate, as TF-Slim's.
        ({"sync_replicas": True, "replicas_to_aggregate": 4}, 62 / 4),
    ],
)
def test_cosine_equals_tf1_cosine_decay(flags, decay_steps):
    flags = {"learning_rate": 0.1, "end_learning_rate": 0.004, **flags}
    steps = range(0, 70, 3)
    got = _rates(1000, steps, learning_rate_decay_type="cosine", **flags)
    want = [
        _tf1("cosine_decay", 0.1, step, decay_steps, alpha=0.004 / 0.1)
        for step in steps
    ]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[-1] == pytest.approx(0.004)  # the floor, after the decay


@pytest.mark.parametrize(
    "kind, tf1_decay",
    [
        ("cosine", lambda step: _tf1("cosine_decay", 0.1, step, 30, 0.01)),
        (
            "exponential",
            lambda step: _tf1(
                "exponential_decay", 0.1, step, 10, 0.5, staircase=True
            ),
        ),
        (
            "polynomial",
            lambda step: _tf1("polynomial_decay", 0.1, step, 10, 0.001),
        ),
        ("fixed", lambda step: 0.1),
    ],
)
def test_warmup_ramps_then_every_decay_starts(kind, tf1_decay):
    """1 epoch = int(500 / 50) = 10 steps of linear ramp from 0, then the
    decay from its step 0 (the cosine lasts to --max_number_of_steps)."""
    flags = {
        "learning_rate": 0.1,
        "batch_size": 50,
        "num_epochs_per_decay": 1.0,
        "learning_rate_decay_factor": 0.5,
        "end_learning_rate": 0.001,
        "warmup_epochs": 1.0,
        "max_number_of_steps": 40,
    }
    steps = list(range(45))
    got = _rates(500, steps, learning_rate_decay_type=kind, **flags)
    ramp = 0.1 * np.arange(10) / 10
    np.testing.assert_allclose(got[:10], ramp, rtol=1e-6, atol=1e-9)
    after = [tf1_decay(step - 10) for step in steps[10:]]
    np.testing.assert_allclose(got[10:], after, rtol=1e-6)


def test_the_ramp_is_keras_cosine_decays_own_warmup():
    """`CosineDecay(warmup_target=, warmup_steps=)` computes the same
    rates as the one ramp every decay type has."""
    flags = {"learning_rate": 0.2, "end_learning_rate": 0.01}
    got = _rates(
        640,
        range(60),
        learning_rate_decay_type="cosine",
        warmup_epochs=0.25,  # int(640 * 0.25 / 32) = 5 steps
        max_number_of_steps=50,
        **flags,
    )
    keras_own = keras.optimizers.schedules.CosineDecay(
        0.0, 45, alpha=0.05, warmup_target=0.2, warmup_steps=5
    )
    want = [float(keras_own(step)) for step in range(60)]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-9)


def test_warmup_steps_are_global_steps_as_the_decays():
    schedule = learning_rate.configure_learning_rate(
        1281167,
        None,
        warmup_epochs=5.0,
        batch_size=32,
        sync_replicas=True,
        replicas_to_aggregate=4,
    )
    assert schedule.warmup_steps == int(1281167 * 5.0 / 32) / 4
    assert schedule.schedule.decay_steps == int(1281167 * 2.0 / 32) / 4


def test_without_the_recipe_flags_the_schedules_are_tf_slims():
    for kind, cls in [
        ("exponential", keras.optimizers.schedules.ExponentialDecay),
        ("polynomial", keras.optimizers.schedules.PolynomialDecay),
    ]:
        schedule = learning_rate.configure_learning_rate(
            1000, None, learning_rate_decay_type=kind, warmup_epochs=0.0
        )
        assert type(schedule) is cls
    fixed = learning_rate.configure_learning_rate(
        1000, None, learning_rate_decay_type="fixed"
    )
    assert fixed == 0.01


def test_the_warmup_schedule_round_trips_through_keras_config():
    schedule = learning_rate.configure_learning_rate(
        1000, None, learning_rate_decay_type="cosine", warmup_epochs=0.5
    )
    again = keras.saving.deserialize_keras_object(
        keras.saving.serialize_keras_object(schedule)
    )
    steps = [0, 7, 15, 16, 40, 100]
    assert [float(again(s)) for s in steps] == [
        float(schedule(s)) for s in steps
    ]


@pytest.mark.parametrize(
    "flags, message",
    [
        (
            {"warmup_epochs": -1.0},
            "Received: warmup_epochs=-1.0. Expected a non-negative number",
        ),
        (
            {"warmup_epochs": 0.01},
            "Received: warmup_epochs=0.01, which is 0 steps of 32",
        ),
        (
            {"warmup_epochs": 2.0, "max_number_of_steps": 62},
            "warmup_epochs=2.0, 62 steps, not fewer than "
            "max_number_of_steps=62",
        ),
        (
            {
                "learning_rate_decay_type": "cosine",
                "num_epochs_per_decay": None,
            },
            "'cosine' needs a length. Received: max_number_of_steps=None, "
            "num_epochs_per_decay=None",
        ),
        (
            {
                "learning_rate_decay_type": "cosine",
                "end_learning_rate": 0.1,
            },
            "Received: end_learning_rate=0.1 above learning_rate=0.01",
        ),
    ],
)
def test_bad_recipe_values_are_named(flags, message):
    with pytest.raises(ValueError, match=message):
        learning_rate.configure_learning_rate(1000, None, **flags)
