"""Every private internal of Keras's JAX trainer keras_slim touches,
pinned (keras_slim/_jax/_keras.py, and the optimizers' internals the JAX
step uses through keras_slim/_keras_optimizer.py), so that a Keras
upgrade fails here first."""

import inspect

import jax
import keras
import numpy as np
from keras.src.backend.jax import trainer as jax_trainer
from keras.src.optimizers import base_optimizer

import keras_slim
from keras_slim import _keras_optimizer
from keras_slim._jax import _keras as jax_keras
from tests_jax import helpers


def test_keras_version_is_the_pinned_one():
    assert keras.__version__.startswith("3.15."), keras.__version__


def test_the_trainer_is_jaxs_and_its_step_takes_the_state():
    assert keras.Model.__mro__[1:].count(jax_trainer.JAXTrainer) == 1
    step = inspect.signature(jax_trainer.JAXTrainer.train_step)
    assert list(step.parameters) == ["self", "state", "data"]
    loss = inspect.signature(jax_trainer.JAXTrainer.compute_loss_and_updates)
    assert list(loss.parameters) == [
        "self", "trainable_variables", "non_trainable_variables",
        "metrics_variables", "x", "y", "sample_weight", "training",
        "optimizer_variables",
    ]  # fmt: skip


def test_fit_calls_the_train_function_with_the_state_and_syncs_it_last():
    fit = inspect.getsource(jax_trainer.JAXTrainer.fit)
    assert "self.train_function(state, iterator)" in fit
    assert "self._jax_state = {" in fit
    assert "self._jax_state_synced = False" in fit
    assert "finally:\n            self.jax_state_sync()" in fit
    # The compiled step donates its input state.
    make = inspect.getsource(jax_trainer.JAXTrainer.make_train_function)
    assert "donate_argnums=0" in make
    sync = inspect.getsource(jax_trainer.JAXTrainer.jax_state_sync)
    for key in (
        "trainable_variables", "non_trainable_variables",
        "optimizer_variables", "metrics_variables",
    ):  # fmt: skip
        assert f'"{key}", None' in sync, key


def test_every_state_sync_point_calls_jax_state_sync():
    # SlimModel reads the numeric check's verdict in its jax_state_sync:
    # fit's end of epoch (before validation and on_epoch_end), its
    # `finally`, train_on_batch, and Callback.model all call it.
    fit = inspect.getsource(jax_trainer.JAXTrainer.fit)
    loop_end = fit.index("self.jax_state_sync()")
    assert loop_end < fit.index("self.evaluate(")
    assert loop_end < fit.index("callbacks.on_epoch_end(")
    batch = inspect.getsource(jax_trainer.JAXTrainer.train_on_batch)
    assert "self.jax_state_sync()" in batch
    from keras.src.callbacks import callback

    model = inspect.getsource(callback.Callback.model.fget)
    assert "jax_state_sync()" in model


def test_attach_state_is_what_the_sync_reads():
    x, y = helpers.data(16)
    model = helpers.compile_model(helpers.mlp())
    model.fit(x, y, batch_size=16, verbose=0)
    state = (
        [v.value + 1.0 for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in model.optimizer.variables],
        [v.value for v in model.metrics_variables],
    )
    expected = [np.array(v) + 1.0 for v in model.trainable_variables]
    jax_keras.attach_state(model, state)
    model.jax_state_sync()
    for variable, value in zip(model.trainable_variables, expected):
        np.testing.assert_array_equal(np.array(variable), value)


def test_state_shardings_under_a_distribution():
    assert jax_keras.distribution() is None
    devices = keras.distribution.list_devices("cpu")
    with keras.distribution.DataParallel(devices=devices).scope():
        assert jax_keras.distribution() is not None
        model = helpers.compile_model(helpers.mlp())
        model.build((None, 8))
        model.optimizer.build(model.trainable_variables)
        shardings = jax_keras.state_shardings(model)
    assert len(shardings) == 4
    assert len(shardings[0]) == len(model.trainable_variables)
    assert all(isinstance(s, jax.sharding.Sharding) for s in shardings[0])


def test_the_optimizer_internals_of_the_jax_step():
    model = helpers.compile_model(
        helpers.mlp(),
        keras.optimizers.AdamW(
            0.01, gradient_accumulation_steps=2, use_ema=True
        ),
    )
    model.build((None, 8))
    optimizer = model.optimizer
    optimizer.build(model.trainable_variables)
    counter = _keras_optimizer.micro_step_counter(optimizer)
    assert counter is optimizer._iterations
    kernel = model.get_layer("fc1").kernel
    (accumulator,) = _keras_optimizer.accumulators(optimizer, [kernel])
    assert accumulator.shape == kernel.shape
    pairs = _keras_optimizer.moving_averages(optimizer)
    assert [v.path for v, _ in pairs] == [
        v.path for v in model.trainable_variables
    ]
    # `iterations` is the micro-step count over k (the step reads both).
    assert "floor_divide" in inspect.getsource(
        base_optimizer.BaseOptimizer.iterations.fget
    )
    # The loss-scale wrapper's state the step moves.
    lso = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD())
    lso.build(model.trainable_variables)
    assert _keras_optimizer.loss_scale_optimizer(lso) is lso
    assert lso.dynamic_scale in lso.variables
    assert lso.step_counter in lso.variables
    assert lso.dynamic_growth_steps > 0


def test_a_callback_sets_the_epoch_fit_starts_at_after_train_begin():
    # Checkpoints resumes a run at its saved epoch through
    # `model._initial_epoch` (as Keras's BackupAndRestore), which fit reads
    # after `on_train_begin`; SlimModel.fit clears it after the fit.
    fit = inspect.getsource(jax_trainer.JAXTrainer.fit)
    begin = fit.index("callbacks.on_train_begin()")
    assert fit.index("self._initial_epoch or initial_epoch") > begin
    from keras.src.callbacks import callback

    setter = inspect.getsource(callback.Callback.set_model)
    assert "self._model = model" in setter


def test_orbax_step_names_are_the_protocol_checkpoint_store_implements():
    from orbax.checkpoint._src.path import step as orbax_step

    protocol = orbax_step.NameFormat
    for name in ("build_name", "find_all", "find_step"):
        assert hasattr(protocol, name), name
    metadata = orbax_step.Metadata(step=3, path="/tmp/x")
    assert metadata.step == 3


def test_the_configured_learning_rate_is_what_the_optimizer_evaluates():
    schedule = keras.optimizers.schedules.ExponentialDecay(0.1, 10, 0.5)
    optimizer = keras.optimizers.SGD(schedule)
    assert _keras_optimizer.configured_learning_rate(optimizer) is schedule
    constant = keras.optimizers.SGD(0.25)
    rate = _keras_optimizer.configured_learning_rate(constant)
    assert float(rate) == float(constant.learning_rate) == 0.25


def test_a_stateless_scope_takes_each_assignment_through_add_update():
    # The JAX step's gated scope keeps or drops each update as it is
    # assigned: Keras's variables assign through `add_update`.
    from keras_slim._jax.step import _GatedScope

    variable = keras.Variable(np.float32(1.0))
    for take, expected in ((True, 3.0), (False, 1.0)):
        with _GatedScope(jax.numpy.asarray(take), [(variable, 1.0)]) as scope:
            variable.assign(2.0)
            variable.assign_add(1.0)  # reads the kept value
        assert float(scope.get_current_value(variable)) == expected
    assert float(variable.value) == 1.0


def test_the_summarizing_forward_pass_is_keras_compute_loss_and_updates():
    # keras_slim/_jax/step_summaries.py's `forward` is Keras's
    # `compute_loss_and_updates` through a probe (its `_losses_override`
    # for the activity regularizer's term): the same loss, outputs and
    # updates, batch norm and dropout included.
    from keras_slim._jax import step_summaries

    keras.utils.set_random_seed(2)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(
        16, activation="relu", name="fc1",
        activity_regularizer=keras.regularizers.L2(0.1),
    )(inputs)  # fmt: skip
    h = keras.layers.BatchNormalization(name="bn")(h)
    h = keras.layers.Dropout(0.3, seed=2)(h)
    outputs = keras.layers.Dense(3, name="logits")(h)
    model = helpers.compile_model(keras_slim.SlimModel(inputs, outputs))
    model.build((None, 8))
    model.optimizer.build(model.trainable_variables)
    x, y = helpers.data(16)
    plan = step_summaries.plan_for(model, True, ("fc1",))
    state = (
        [v.value for v in model.trainable_variables],
        [v.value for v in model.non_trainable_variables],
        [v.value for v in model.metrics_variables],
    )
    args = (*state, x, y, None)
    kwargs = {
        "training": True,
        "optimizer_variables": [v.value for v in model.optimizer.variables],
    }
    keras_loss, keras_aux = model.compute_loss_and_updates(*args, **kwargs)
    loss, aux = step_summaries.forward(model, plan, *args, **kwargs)
    assert float(loss) == float(keras_loss)
    assert len(aux) == len(keras_aux) + 1
    for ours, theirs in zip(
        jax.tree.leaves(aux[:4]), jax.tree.leaves(keras_aux)
    ):
        np.testing.assert_array_equal(ours, theirs)
    (fc1,) = aux[4]
    assert fc1.shape == (16, 16) and float(np.min(fc1)) >= 0.0
