"""Every private Keras internal keras_slim touches, pinned and checked.

keras_slim pins `keras==3.15.*` and reaches into Keras and TensorFlow in
`keras_slim/_keras.py` (the optimizers' internals in
`keras_slim/_keras_optimizer.py`). When the pin moves, these tests say
which internal changed; the behavioural ones also say whether a
workaround is still needed.
"""

import inspect

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from keras.src.backend.tensorflow import trainer as tf_trainer
from keras.src.backend.tensorflow.optimizer import TFOptimizer
from keras.src.losses import loss as loss_module
from keras.src.models import functional
from keras.src.models import model as model_module

import keras_slim
from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim._fit import multi_worker
from keras_slim._step import apply as step_apply
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp


def test_keras_version_is_the_pinned_one():
    assert keras.__version__.startswith("3.15."), keras.__version__


def test_private_names_exist():
    assert callable(TFOptimizer._all_reduce_sum_gradients)
    assert "self._all_reduce_sum_gradients(" in inspect.getsource(
        TFOptimizer._backend_update_step
    )
    assert callable(tf_trainer.reduce_per_replica)
    assert callable(loss_module.unscale_loss_for_distribution)
    assert callable(model_module.functional_init_arguments)
    assert model_module.Trainer is tf_trainer.TensorFlowTrainer
    assert issubclass(functional.Functional, keras.Model)
    for name in (
        "_compute_loss",
        "_autoconvert_optionals",
        "_symbolic_build",
    ):
        assert callable(getattr(keras.Model, name)), name
    model = compile_model(mlp(cls=keras.Model))
    assert isinstance(model._loss_tracker, keras.metrics.Mean)
    assert model._call_has_training_arg in (True, False)
    lso = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD())
    lso.build(model.trainable_variables)
    assert lso.inner_optimizer is not None
    assert float(lso.dynamic_scale.numpy()) > 0
    # parameter_server_cluster: the attribute is set in __init__ (run end
    # to end by test_parameter_server.py's lost-workers test).
    source = inspect.getsource(tf.distribute.ParameterServerStrategy.__init__)
    assert "self._cluster_resolver = cluster_resolver" in source
    # allow_run_on_coordinator: the flag TensorFlow's warning reads (the
    # synchronous steps of test_sync_replicas.py run there end to end).
    module = inspect.getmodule(tf.distribute.ParameterServerStrategy)
    check = inspect.getsource(
        module.ParameterServerStrategyV2Extended._assert_being_scheduled_by_cluster_coordinator  # noqa: E501
    )
    assert "self._allow_run_without_coordinator" in check


def test_keras_functional_injection_rewrites_bases():
    """Why SlimModel.__init__ avoids keras.Model.__init__ for functional use."""
    source = inspect.getsource(keras.Model.__init__)
    assert "inject_functional_model_class(self.__class__)" in source


def test_optimizer_sums_across_replicas_unless_presummed(mirrored):
    with mirrored.scope():
        variable = keras.Variable(np.zeros(2, "float32"))
        optimizer = keras.optimizers.SGD(1.0)
        optimizer.build([variable])
    step_apply.install(optimizer)

    @tf.function
    def step(presummed):
        def replica_fn():
            grad = tf.ones(2)
            if presummed:
                with step_apply.presummed(optimizer):
                    optimizer.apply([grad], [variable])
            else:
                optimizer.apply([grad], [variable])

        mirrored.run(replica_fn)

    step(False)
    np.testing.assert_array_equal(variable.numpy(), [-4.0, -4.0])
    step(True)
    np.testing.assert_array_equal(variable.numpy(), [-5.0, -5.0])


def test_keras_multi_step_loop_still_fails_under_mirrored():
    """keras-team/keras#19246: why keras_slim has its own multi-step loop.

    Under a `MirroredStrategy` as TensorFlow makes it by default (with
    `CollectiveAllReduce` on CPUs; keras_slim's own CPU clones reduce on
    one device, where Keras's loop happens to work). If this starts
    passing, Keras fixed its loop and keras_slim/_fit/loops.py's first
    unconditional step may be retired.
    """
    x, y = classification_data(128)
    # The only strategy with collectives over these devices in the suite.
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    cross_device_ops = strategy.extended._cross_device_ops
    assert type(cross_device_ops).__name__ == "CollectiveAllReduce"
    with strategy.scope():
        model = compile_model(mlp(cls=keras.Model), steps_per_execution=2)
    with pytest.raises(tf.errors.InvalidArgumentError, match="placeholder"):
        model.fit(x, y, batch_size=64, verbose=0)


def test_fit_loop_details_the_callbacks_rely_on():
    """StopAtStep swaps `model.train_function`; fit must look it up per batch.

    StepLoss reads the loss tracker's `total` and `count`: the `Mean`
    metric named "loss" that the built-in train step updates.
    """
    source = inspect.getsource(tf_trainer.TensorFlowTrainer.fit)
    assert "callbacks.on_train_batch_begin(begin_step)" in source
    assert "logs = self.train_function(iterator)" in source
    assert source.index("callbacks.on_train_begin()") > source.index(
        "self._maybe_symbolic_build("
    )
    model = compile_model(mlp(cls=keras.Model))
    x, y = classification_data(32)
    model.fit(x, y, batch_size=32, verbose=0)
    (tracker,) = [m for m in model.metrics if m.name == "loss"]
    assert float(tracker.total.numpy()) > 0
    assert float(tracker.count.numpy()) == 32.0


def test_profiler_converter_binding(tmp_path):
    """Trace converts the profiler's xplane with TF's private binding."""
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    assert callable(_pywrap_profiler_plugin.xspace_to_tools_data)
    assert _keras.Functional is functional.Functional
    data, ok = _keras.xspace_to_chrome_trace(str(tmp_path / "none.xplane"))
    assert not ok


def test_layer_walk_and_weights_file_layout_used_by_warm_start(tmp_path):
    """WarmStart maps a Keras weights file to a model through the layer name
    Keras records on each `vars` group and the order of
    `save_own_variables`; it lists layers with `_flatten_layers`."""
    model = compile_model(mlp(cls=keras.Model))
    layers = list(model._flatten_layers(include_self=True))
    assert [layer.name for layer in layers] == [
        "mlp",
        "input_layer",
        "fc1",
        "logits",
    ]
    store = {}
    model.get_layer("fc1").save_own_variables(store)
    assert {k: v.path for k, v in store.items()} == {
        "0": "fc1/kernel",
        "1": "fc1/bias",
    }
    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    with h5py.File(path, "r") as weights:
        assert weights["layers/dense/vars"].attrs["name"] == "fc1"
        np.testing.assert_array_equal(
            weights["layers/dense/vars/0"][()],
            model.get_layer("fc1").kernel.numpy(),
        )


def test_internals_used_under_multi_worker_mirrored_strategy():
    """SlimModel's MWMS fixes override `_maybe_symbolic_build` (whose Keras
    version reduces the whole batch) and reduce scalars with axis=None;
    StepLoss reads a metric's backing variable, `Variable._value`."""
    source = inspect.getsource(
        tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    )
    assert "self.distribute_strategy.reduce(" in source
    assert 'strategy.reduce("MEAN", v, axis=0)' in inspect.getsource(
        tf_trainer.reduce_per_replica
    )
    # (Not constructed here: a local MWMS would configure this process's
    # collective ops under the shared MirroredStrategy.)
    from tensorflow.python.distribute import collective_all_reduce_strategy

    extended = collective_all_reduce_strategy.CollectiveAllReduceExtended
    assert callable(extended._in_multi_worker_mode)
    mean = keras.metrics.Mean()
    assert isinstance(mean.total._value, tf.Variable)


def test_a_workers_share_is_what_distribute_dataset_feeds_it():
    """`_keras.worker_share` follows TensorFlow's `DistributedDataset` with
    an input context (what MWMS's `experimental_distribute_dataset` makes
    on each worker): a rebatch into one batch per replica of the cluster,
    then the auto-shard; two workers' shares of a dataset sharded by data
    are their parts of each global batch (of 7: 4 and 3)."""
    from tensorflow.python.distribute import collective_all_reduce_strategy
    from tensorflow.python.distribute import input_lib

    distributed = input_lib.DistributedDataset
    source = inspect.getsource(distributed._create_cloned_datasets_from_dataset)
    assert "rebatch_fn(dataset, input_context.input_pipeline_id)" in source
    assert "input_ops.auto_shard_dataset(dataset," in source
    source = inspect.getsource(distributed._make_rebatch_fn)
    assert "distribute.batch_sizes_for_worker(" in source
    assert "dataset.rebatch(batch_sizes).prefetch(" in source
    extended = collective_all_reduce_strategy.CollectiveAllReduceExtended
    assert "input_pipeline_id=self._id_in_cluster" in inspect.getsource(
        extended._make_input_context
    )
    data = tf.data.Dataset.range(14).batch(7)
    shares = [
        [
            batch.numpy().tolist()
            for batch in _keras.worker_share(
                data, tf.distribute.InputContext(2, index, 2)
            )
        ]
        for index in range(2)
    ]
    assert shares == [[[0, 1, 2, 3], [7, 8, 9, 10]], [[4, 5, 6], [11, 12, 13]]]


def test_epoch_loop_details_the_blocks_rely_on(mirrored):
    """keras_slim/_fit/feed.py: `Trainer._distribute_strategy` is None for a
    model made outside any strategy; Keras's TF epoch iterator hands the
    default strategy's `experimental_distribute_dataset` the adapter's
    dataset, which returns it unchanged, and makes its iterators with
    `iter()`; it builds nothing from the data under the default strategy."""
    assert mlp()._distribute_strategy is None
    with mirrored.scope():
        assert mlp()._distribute_strategy is mirrored
    dataset = tf.data.Dataset.range(3)
    default = tf.distribute.get_strategy()
    assert default.experimental_distribute_dataset(dataset) is dataset
    source = inspect.getsource(tf_trainer.TFEpochIterator)
    assert "experimental_distribute_dataset" in source
    assert "return self._distributed_dataset" in source
    # Keras's and SlimModel's own: nothing is built from the data.
    source = inspect.getsource(
        tf_trainer.TensorFlowTrainer._maybe_symbolic_build
    )
    assert "if self._distribute_strategy is None:" in source
    source = inspect.getsource(multi_worker.build_on_one_replica)
    assert "if _keras.distribute_strategy_if_set(model) is None:" in source
    assert "_fit.build_on_one_replica(" in inspect.getsource(
        keras_slim.SlimModel._maybe_symbolic_build
    )


def test_only_keras_internals_module_imports_private_modules():
    """`grep -rln "keras.src" keras_slim/` lists the library's internals
    module and the image app's (tests/image/test_keras_internals.py pins
    that one's). The optimizers' (`_keras_optimizer.py`) and the JAX
    trainer's (`_jax/_keras.py`) reach private attributes only, pinned
    here and in tests_jax/test_keras_internals.py."""
    import pathlib

    package = pathlib.Path(keras_slim.__file__).parent
    importers = sorted(
        str(p.relative_to(package))
        for p in package.rglob("*.py")
        if "keras.src" in p.read_text()
        or "tensorflow.python" in p.read_text()
        or "tensorflow.core" in p.read_text()
    )
    internals = ["_keras.py", "image/_keras.py"]
    assert importers == internals


def test_every_name_of_the_internals_module_works():
    """Each name in `keras_slim._keras` on a real model and optimizer."""
    model = compile_model(mlp(cls=keras.Model))
    x, y = classification_data(8)
    model.fit(x, y, batch_size=8, verbose=0)
    assert isinstance(_keras.loss_tracker(model), keras.metrics.Mean)
    assert _keras.call_has_training_arg(model) in (True, False)
    assert _keras.distribute_strategy_if_set(model) is None
    assert _keras.is_functional_call((1, 2), {}) in (True, False)
    assert _keras.is_functional_call(
        (), {"inputs": model.inputs, "outputs": model.outputs}
    )
    loss = _keras.compute_loss(model, x, y, model(x), sample_weight=None)
    assert loss.shape == ()
    assert float(_keras.unscale_loss(loss)) == pytest.approx(float(loss))
    assert [layer.name for layer in _keras.flatten_layers(model)][0] == "mlp"
    assert isinstance(
        _keras.backing_variable(model.optimizer.iterations), tf.Variable
    )
    assert _keras.strategy_supports_no_merge_call() in (True, False)
    assert not _keras.in_multi_worker_mode(tf.distribute.get_strategy())
    graph = _keras.TrackableObjectGraph()
    assert hasattr(graph, "nodes")
    logs = _keras.reduce_step_outputs_auto(
        {"loss": tf.constant(1.0)}, tf.distribute.get_strategy()
    )
    assert float(logs["loss"]) == 1.0
    wrapped = _keras.autoconvert_optionals(model, lambda data: data)
    assert callable(wrapped)
    built = compile_model(mlp(cls=keras.Model))
    _keras.symbolic_build(built, (x, y))
    assert built.optimizer.built
    _keras.set_initial_epoch(built, 3)
    assert _keras.initial_epoch(built) == 3
    _keras.set_initial_epoch(built, None)


def test_the_sum_replacement_is_per_optimizer_instance():
    """`replace_all_reduce_sum` sets Keras's `_all_reduce_sum_gradients` on
    one instance, keeps Keras's bound method as the fallback, and is
    idempotent."""
    one, other = keras.optimizers.SGD(), keras.optimizers.SGD()
    seen = []

    def make(original):
        seen.append(original)
        return lambda grads_and_vars: original(grads_and_vars)

    first = _keras_optimizer.replace_all_reduce_sum(one, make)
    assert _keras_optimizer.replace_all_reduce_sum(one, make) is first
    assert len(seen) == 1 and seen[0].__self__ is one
    assert "_all_reduce_sum_gradients" not in vars(other)


def test_fit_gives_all_callbacks_one_params_dict():
    """A plain model's run is told apart from the next `fit`'s by the
    `params` dict Keras's `CallbackList` hands every callback of a call."""
    seen = []

    class Params(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            seen.append(self.params)

    model = compile_model(mlp(cls=keras.Model))
    x, y = classification_data(8)
    model.fit(x, y, verbose=0, callbacks=[Params(), Params()])
    model.fit(x, y, verbose=0, callbacks=[Params()])
    assert seen[0] is seen[1]
    assert seen[2] is not seen[0]


def test_keras_loop_calls_train_function_after_batch_begin():
    """`Run.no_step` wraps a plain model's train function from a
    callback's `on_train_batch_begin` (`run_no_step_in_next_call`): Keras
    must look the function up after that hook, on every batch."""
    source = inspect.getsource(tf_trainer.TensorFlowTrainer.fit)
    begin = source.index("callbacks.on_train_batch_begin(begin_step)")
    assert source.index("self.train_function(iterator)", begin) > begin


def test_the_two_patches_of_public_keras_attributes():
    """`run_no_step_in_next_call` skips one call of a plain model's Keras
    train function; `before_averages_replace_weights` sees the training
    weights before Keras's `fit` writes the averages into them."""
    x, y = classification_data(16)
    model = compile_model(mlp(cls=keras.Model))
    model.fit(x, y, batch_size=8, verbose=0)
    function, before = model.train_function, model.get_weights()
    ended = []
    _keras.run_no_step_in_next_call(model, then=lambda: ended.append(1))
    assert model.train_function(iter([])) == {}
    assert model.train_function is function and ended == [1]
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)

    averaged = compile_model(
        mlp(cls=keras.Model), keras.optimizers.SGD(0.5, use_ema=True)
    )
    seen = []

    def capture(variables):
        seen.append([v.numpy().copy() for v in variables])

    undo = _keras_optimizer.before_averages_replace_weights(
        averaged.optimizer, capture
    )
    averaged.fit(x, y, batch_size=8, verbose=0)
    undo()
    assert "finalize_variable_values" not in vars(averaged.optimizer)
    # The captured training weights differ from the averages Keras wrote.
    trained = seen[0]
    written = [v.numpy() for v in averaged.trainable_variables]
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(trained, written))


def test_optimizer_variable_index_of_one_devices_component(mirrored):
    """keras_slim.optimizers find a variable's slots by Keras's index
    (`_get_variable_index`), also for the per-device component that
    `TFOptimizer` hands `update_step` under a strategy."""
    with mirrored.scope():
        first = keras.Variable(np.zeros(2, "float32"))
        second = keras.Variable(np.zeros(3, "float32"))
        optimizer = keras.optimizers.SGD(0.1)
        optimizer.build([first, second])
    assert _keras_optimizer.optimizer_variable_index(optimizer, second) == 1
    components = mirrored.experimental_local_results(second.value)
    assert len(components) == 4
    for component in components:
        assert (
            _keras_optimizer.optimizer_variable_index(optimizer, component) == 1
        )
    # Keras's own optimizers look their slots up the same way.
    source = inspect.getsource(keras.optimizers.SGD.update_step)
    assert "self._get_variable_index(variable)" in source


def test_the_step_and_decay_lr_multipliers_replace():
    """`replace_update_step` and `replace_weight_decay`: Keras's `apply`
    passes the step's rate to `update_step` and its decoupled decay reads
    `weight_decay` and `learning_rate` (what `_step/lr_factors.py` scales);
    both replacements are per instance and idempotent."""
    source = inspect.getsource(TFOptimizer._distributed_tf_update_step)
    assert "self.update_step(grad, var, learning_rate)" in source
    decay = inspect.getsource(TFOptimizer._apply_weight_decay)
    assert "self.weight_decay" in decay and "self.learning_rate" in decay
    base = inspect.getsource(
        keras.optimizers.Optimizer._backend_apply_gradients
    )
    assert "self._apply_weight_decay(trainable_variables)" in base
    assert _keras_optimizer.has_keras_weight_decay(keras.optimizers.AdamW())
    assert not _keras_optimizer.has_keras_weight_decay(keras.optimizers.Muon())
    one, other = keras.optimizers.AdamW(), keras.optimizers.AdamW()
    for replace, name in (
        (_keras_optimizer.replace_update_step, "update_step"),
        (_keras_optimizer.replace_weight_decay, "_apply_weight_decay"),
    ):
        seen = []

        def make(original, seen=seen):
            seen.append(original)
            return lambda *args: original(*args)

        first = replace(one, make)
        assert replace(one, make) is first
        assert len(seen) == 1 and seen[0].__self__ is one
        assert name not in vars(other)


def test_gradient_accumulation_internals():
    """`micro_step_counter`, `accumulators`, `replace_accumulating_apply`
    (`update_without_accumulation`) and `schedule_at_optimizer_steps`; run
    end to end by tests/_step/test_accumulate.py."""
    from keras.src.optimizers import base_optimizer

    base = base_optimizer.BaseOptimizer
    branch = inspect.getsource(base._backend_apply_gradients)
    # The non-accumulating branch `update_without_accumulation` copies.
    for call in (
        "grads = self._clip_gradients(grads)",
        "self._apply_weight_decay(trainable_variables)",
        "self._update_model_variables_moving_average(",
    ):
        assert call in branch, call
    assert "self._learning_rate(self._iterations)" in inspect.getsource(
        base._get_current_learning_rate
    )
    model = mlp()
    schedule = keras.optimizers.schedules.ExponentialDecay(1.0, 1, 0.5)
    optimizer = keras.optimizers.SGD(schedule, gradient_accumulation_steps=3)
    optimizer.build(model.trainable_variables)
    sums = _keras_optimizer.accumulators(optimizer, model.trainable_variables)
    assert [s.shape for s in sums] == [
        v.shape for v in model.trainable_variables
    ]
    counter = _keras_optimizer.micro_step_counter(optimizer)
    counter.assign(7)
    assert global_step(optimizer) == 2
    _keras_optimizer.schedule_at_optimizer_steps(optimizer)
    assert float(optimizer.learning_rate.numpy()) == 0.25
    _keras_optimizer.replace_accumulating_apply(optimizer, lambda: True)
    grads = [tf.ones_like(v) for v in model.trainable_variables]
    before = [v.numpy() for v in model.trainable_variables]
    optimizer.apply(grads, model.trainable_variables)
    after = [v.numpy() for v in model.trainable_variables]
    # Applied at once at the rate of step 2, not accumulated.
    np.testing.assert_allclose(after[0], before[0] - 0.25, rtol=1e-6)
    assert int(counter.numpy()) == 8


def test_keras_takes_an_unread_dataset_as_distributed(mirrored):
    """`UnreadDataset`: Keras's data adapter takes it (a DistributedDataset
    by class name), counts its batches, and its epoch iterator neither
    distributes it again nor reads it: each epoch gets a new token."""
    from keras.src.trainers.data_adapters import is_tf_dataset

    spec = (
        tf.TensorSpec([None, 8], tf.float32),
        tf.TensorSpec([None], tf.int32),
    )
    data = _keras.UnreadDataset(spec, 5)
    assert is_tf_dataset(data)
    epochs = tf_trainer.TFEpochIterator(
        distribute_strategy=mirrored, x=data, steps_per_execution=1
    )
    assert epochs._get_iterator() is data
    assert epochs.num_batches == 5
    tokens = [
        iterator
        for _ in range(2)
        for _, _, iterator in epochs.enumerate_epoch()
    ]
    assert len(tokens) == 10 and len({id(t) for t in tokens}) == 2
    assert tokens[0].element_spec == spec
    with pytest.raises(TypeError, match="never read"):
        next(tokens[0])


def test_the_moving_average_replacement():
    """`replace_moving_averages`: Keras builds `_model_variables_moving_
    average` in `build` and updates them through
    `_update_model_variables_moving_average` after each update, before
    `iterations` advances."""
    from keras.src.optimizers import base_optimizer

    base = base_optimizer.BaseOptimizer
    assert "_model_variables_moving_average" in inspect.getsource(base.build)
    branch = inspect.getsource(base._backend_apply_gradients)
    assert "self._update_model_variables_moving_average(" in branch
    apply = inspect.getsource(base.apply)
    assert apply.index("self._backend_apply_gradients(") < apply.index(
        "self._iterations.assign_add(1)"
    )
    variable = keras.Variable(np.ones(2, "float32"))
    optimizer = keras.optimizers.SGD(0.5, use_ema=True, ema_momentum=0.5)
    seen = []
    _keras_optimizer.replace_moving_averages(
        optimizer,
        start=lambda variables, averages: seen.append("start"),
        update=lambda opt, variables, averages: seen.append(global_step(opt)),
    )
    optimizer.build([variable])
    optimizer.apply([tf.constant([1.0, 1.0])], [variable])
    assert seen == ["start", 0]


def test_tf_data_pipelines_walked_through_their_python_objects():
    """tf.data's `_inputs()`, its maps' and filters' `_map_func` and
    `_predicate`, and its private classes' names, as `_fit/input_options.py`
    walks a pipeline."""
    source = tf.data.Dataset.range(6)
    mapped = source.map(lambda x: x * 2)
    pipeline = mapped.filter(lambda x: x > 2).batch(2)
    kinds = []
    current = pipeline
    while current is not None:
        kinds.append(_keras.dataset_kind(current))
        inputs = _keras.dataset_inputs(current)
        assert len(inputs) <= 1
        current = inputs[0] if inputs else None
    assert kinds == [
        "BatchDataset",
        "FilterDataset",
        "MapDataset",
        "RangeDataset",
    ]
    assert _keras.dataset_inputs(source) == []
    assert _keras.dataset_functions(source) == []
    [function] = _keras.dataset_functions(mapped)
    assert any("Mul" in op.type for op in function.graph.get_operations())
    filtered = _keras.dataset_inputs(pipeline)[0]
    [predicate] = _keras.dataset_functions(filtered)
    assert predicate.graph.get_operations()
    parallel = source.map(lambda x: x + 1, num_parallel_calls=2)
    assert _keras.dataset_kind(parallel) == "ParallelMapDataset"
    assert len(_keras.dataset_functions(parallel)) == 1
    assert _keras.dataset_inputs(object()) is None


def test_the_runtime_started_here():
    """This test process ran ops: TensorFlow's runtime has started (a
    fresh process, before and after, is tests/test_cluster.py's)."""
    assert _keras.tensorflow_runtime_started() is True


def test_the_slurm_helpers():
    """TensorFlow's own reading of SLURM's tasks per node and GPUs."""
    assert _keras.slurm_tasks_per_node("3(x2),2") == [3, 3, 2]
    assert _keras.slurm_gpus() >= 0
