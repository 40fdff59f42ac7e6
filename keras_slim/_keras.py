"""Every private Keras and TensorFlow internal keras_slim touches, but
the optimizers' (`keras_slim/_keras_optimizer.py`).
"""

import functools

import numpy as np
from keras.src.backend.common.stateless_scope import in_stateless_scope
from keras.src.losses.loss import unscale_loss_for_distribution
from keras.src.models.functional import Functional
from keras.src.models.model import Trainer
from keras.src.models.model import functional_init_arguments

from keras_slim import _backend
from keras_slim._backend import tensorflow as tf

# TensorFlow's internals (and Keras's of its TensorFlow backend) are
# imported by the functions that use them; the two classes made from them
# are made on first access (`__getattr__`, at the end). On another backend
# this module imports no TensorFlow.

__all__ = [
    "Functional",
    "allow_run_on_coordinator",
    "TrackableObjectGraph",  # noqa: F822 (made by __getattr__)
    "UnreadDataset",  # noqa: F822 (made by __getattr__)
    "UnreadIterator",
    "autoconvert_optionals",
    "backing_variable",
    "call_has_training_arg",
    "compute_loss",
    "dataset_external_state",
    "dataset_functions",
    "dataset_inputs",
    "dataset_kind",
    "distribute_strategy_if_set",
    "flatten_layers",
    "in_multi_worker_mode",
    "init_functional",
    "is_functional_call",
    "loss_tracker",
    "make_assign_add_atomic",
    "reduce_step_outputs_auto",
    "run_no_step_in_next_call",
    "set_initial_epoch",
    "slurm_gpus",
    "slurm_tasks_per_node",
    "initial_epoch",
    "strategy_supports_no_merge_call",
    "symbolic_build",
    "tensorflow_runtime_started",
    "unscale_loss",
    "worker_input_context",
    "worker_share",
    "xspace_to_chrome_trace",
]

# -- Models: building, the loss and its report --------------------------


def is_functional_call(args, kwargs):
    """Whether model constructor arguments are the functional `(inputs,
    outputs)` form (`keras.src.models.model.functional_init_arguments`)."""
    return functional_init_arguments(args, kwargs)


def init_functional(model, inputs, outputs, name, **kwargs):
    """`keras.Model.__init__` for a functional model, minus the rewrite of
    the class's bases (`inject_functional_model_class`) it would make for
    every subclass.

    Args:
        model: The model being initialised (a `Functional` subclass).
        inputs: The model's inputs.
        outputs: The model's outputs.
        name: The model's name.
        **kwargs: More `Functional` arguments.
    """
    Trainer.__init__(model)
    Functional.__init__(model, inputs, outputs, name=name, **kwargs)


def compute_loss(model, x, y, y_pred, sample_weight):
    """The compiled loss plus regularization losses, as the built-in train
    step computes it (`Trainer._compute_loss`); under a strategy already
    divided by the number of replicas."""
    return model._compute_loss(
        x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, training=True
    )


def unscale_loss(loss):
    """The per-replica loss scaled back as Keras reports it
    (`keras.src.losses.loss.unscale_loss_for_distribution`)."""
    return unscale_loss_for_distribution(loss)


def loss_tracker(model):
    """The `Mean` metric named "loss" the built-in train step updates with
    each batch's loss (`Trainer._loss_tracker`), or `None`."""
    return getattr(model, "_loss_tracker", None)


def call_has_training_arg(model):
    """Whether the model's `call` takes `training`
    (`Layer._call_has_training_arg`)."""
    return model._call_has_training_arg


def distribute_strategy_if_set(model):
    """The strategy the model was made under, or `None` when it was made
    outside any (`Trainer._distribute_strategy`)."""
    return model._distribute_strategy


def symbolic_build(model, data_batch):
    """Builds the model, its metrics and its optimizer on one batch
    (`Trainer._symbolic_build`)."""
    model._symbolic_build(data_batch=data_batch)


def flatten_layers(model):
    """Every layer of `model`, nested ones included, itself first, in the
    order Keras's saving walks them (`Layer._flatten_layers`)."""
    return list(model._flatten_layers(include_self=True))


@functools.cache
def _unread_dataset():
    """Defines `UnreadDataset` (a TensorFlow class) on first use."""
    from tensorflow.python.distribute import input_lib

    class UnreadDataset(input_lib.DistributedDataset):
        """What Keras's `fit` iterates when keras_slim reads the data.

        Keras's `fit` makes an iterator of its data every epoch and hands
        it to the train function; a `SlimModel` reading a host feed never
        reads it (`keras_slim/_fit/feed.py`). Keras takes a
        `DistributedDataset` as already distributed
        (`TFEpochIterator.__init__`; its data adapter accepts one by class
        name, `data_adapters.is_tf_dataset`), so this one gives Keras the
        data's length and spec, and a new token per epoch instead of an
        iterator: under `MirroredStrategy` each epoch's iterator of a
        distributed dataset made a `MultiDeviceIterator` per call, 0.4 s
        of CPU on 4 devices. `__init__` of the base class is not called:
        nothing of it is read.

        Args:
            element_spec: The data's element spec.
            cardinality: Its number of batches (or TensorFlow's infinite
                or unknown cardinality).
        """

        def __init__(self, element_spec, cardinality):  # noqa: D107
            self._spec = element_spec
            self._count = int(cardinality)

        @property
        def element_spec(self):
            return self._spec

        @property
        def cardinality(self):
            return np.int64(self._count)

        def __iter__(self):
            return UnreadIterator(self._spec)

        def _type_spec(self):
            raise TypeError("keras_slim's UnreadDataset is not a tensor")

    UnreadDataset.__qualname__ = "UnreadDataset"
    return UnreadDataset


class UnreadIterator:
    """One epoch's token of an `UnreadDataset`: Keras hands it to the
    train function, which reads its host feed; `element_spec` says what a
    batch is (a `_maybe_symbolic_build` builds from it)."""

    def __init__(self, element_spec):
        self.element_spec = element_spec

    def __next__(self):
        raise TypeError(
            "keras_slim's train function reads its own feed: Keras's "
            "iterator of a SlimModel's fit is never read."
        )


# -- Clusters ------------------------------------------------------------


def slurm_gpus():
    """The node's NVIDIA GPUs as TensorFlow's `SlurmClusterResolver`
    counts them (`CUDA_VISIBLE_DEVICES`, else `nvidia-smi`), or 0 on a
    node without (no `nvidia-smi`)."""
    from tensorflow.python.distribute.cluster_resolver import (
        slurm_cluster_resolver,
    )

    try:
        return slurm_cluster_resolver.get_num_gpus()
    except (RuntimeError, OSError):
        return 0


def slurm_tasks_per_node(text):
    """SLURM's `SLURM_STEP_TASKS_PER_NODE` (`'3(x2),2'`) as a list
    (`[3, 3, 2]`), as `SlurmClusterResolver` reads it."""
    from tensorflow.python.distribute.cluster_resolver import (
        slurm_cluster_resolver,
    )

    return slurm_cluster_resolver.expand_tasks_per_node(text)


def tensorflow_runtime_started():
    """Whether this process has started TensorFlow's runtime: an op ran
    (`Context._context_handle` set) or the devices were listed
    (`Context._physical_devices` set). Before either, a fork of the
    process is safe (no runtime thread pool to lose)."""
    from tensorflow.python.eager import context as eager_context

    ctx = eager_context.context_safe()
    return ctx is not None and (
        ctx._context_handle is not None or ctx._physical_devices is not None
    )


# -- The train function --------------------------------------------------


def reduce_step_outputs_auto(outputs, strategy):
    """Keras's reduction of a step's logs across replicas
    (`trainer.reduce_per_replica(..., "auto")`)."""
    from keras.src.backend.tensorflow.trainer import reduce_per_replica

    return reduce_per_replica(outputs, strategy, reduction="auto")


def run_no_step_in_next_call(model, then):
    """Makes the next call of a plain model's Keras train function run no
    step, then puts that function back.

    Keras's `fit` calls `model.train_function` after the batch's
    `on_train_batch_begin`, looked up anew for every batch; a callback
    that stops a run already at its target cannot keep that call from
    running a step otherwise. (A `SlimModel`'s train function reads the
    run and needs none of this.)

    Args:
        model: A Keras model whose `train_function` is Keras's own.
        then: A function of no argument, called when the skipped call ends.
    """
    function = model.train_function
    if function is None:
        return

    def no_step(iterator):
        del iterator
        model.train_function = function
        then()
        return {}

    model.train_function = no_step


def autoconvert_optionals(model, function):
    """`function` with Keras's conversion of optional inputs
    (`TensorFlowTrainer._autoconvert_optionals`)."""
    return model._autoconvert_optionals(function)


# -- Distribution --------------------------------------------------------


def in_multi_worker_mode(strategy):
    """Whether a `MultiWorkerMirroredStrategy` spans several workers
    (`StrategyExtended._in_multi_worker_mode`)."""
    return bool(strategy.extended._in_multi_worker_mode())


def worker_input_context(strategy):
    """This worker's `tf.distribute.InputContext` under a multi-worker
    `MultiWorkerMirroredStrategy`: the workers (`num_input_pipelines`),
    this one's index among them, the replicas in sync
    (`CollectiveAllReduceExtended._make_input_context`, what
    `experimental_distribute_dataset` shards by)."""
    return strategy.extended._make_input_context()


def worker_share(dataset, context):
    """The elements of `dataset` one worker reads under a multi-worker
    strategy, as `experimental_distribute_dataset` makes them
    (`input_lib.DistributedDataset._create_cloned_datasets_from_dataset`
    with an input context): each global batch rebatched into one batch
    per replica of the cluster (`_make_rebatch_fn`), then auto-sharded by
    the dataset's `AutoShardPolicy` (`input_ops.auto_shard_dataset`).

    Args:
        dataset: The batched `tf.data.Dataset` given to `fit`.
        context: The worker's `tf.distribute.InputContext`.

    Returns:
        The worker's `tf.data.Dataset`: per-replica batches, its
        replicas' in turn.
    """
    from tensorflow.python.data.experimental.ops import distribute
    from tensorflow.python.distribute import input_ops

    workers = context.num_input_pipelines
    index = context.input_pipeline_id
    replicas = context.num_replicas_in_sync
    if replicas > 1:
        per_worker = replicas // workers
        batch_size = distribute.compute_batch_size(dataset)

        def rebatch():
            sizes = distribute.batch_sizes_for_worker(
                batch_size, workers, per_worker, index
            )
            return dataset.rebatch(sizes).prefetch(per_worker)

        def legacy_rebatch():
            return distribute._LegacyRebatchDataset(dataset, replicas).prefetch(
                per_worker
            )

        dataset = tf.cond(tf.not_equal(batch_size, -1), rebatch, legacy_rebatch)
    return input_ops.auto_shard_dataset(dataset, workers, index, replicas)


def backing_variable(variable):
    """The `tf.Variable` behind a Keras variable (`Variable._value`), whose
    per-replica parts can be read without a collective."""
    return variable._value


def strategy_supports_no_merge_call():
    """Whether the current strategy's replica context can update variables
    without a `merge_call` (one device, or a strategy that allows it)."""
    return tf.__internal__.distribute.strategy_supports_no_merge_call()


def parameter_server_cluster(strategy):
    """The cluster of a `ParameterServerStrategy`, as a dict of job names to
    `host:port` lists (`strategy._cluster_resolver`: its public
    `cluster_resolver` property is `None`)."""
    return strategy._cluster_resolver.cluster_spec().as_dict()


def allow_run_on_coordinator(strategy):
    """Lets the coordinator itself call `strategy.run` without TensorFlow's
    warning that it should be scheduled on a worker
    (`ParameterServerStrategyV2.extended._allow_run_without_coordinator`):
    a synchronous step applies its averaged gradients from there."""
    strategy.extended._allow_run_without_coordinator = True


def make_assign_add_atomic(variable):
    """Makes `variable.assign_add` / `assign_sub` single TensorFlow ops.

    Keras 3's are `assign(self + value)`, a read-modify-write that
    asynchronous workers on parameter servers interleave, losing updates
    (docs/design.md, "Private Keras internals"). Set on the instance only,
    so no other variable, model or thread changes.

    Args:
        variable: A Keras variable (TensorFlow backend).
    """

    def assign_add(value):
        if in_stateless_scope():
            return variable.assign(variable + value)
        backing = variable._value
        return backing.assign_add(tf.cast(value, backing.dtype))

    def assign_sub(value):
        if in_stateless_scope():
            return variable.assign(variable - value)
        backing = variable._value
        return backing.assign_sub(tf.cast(value, backing.dtype))

    # Bypass any tracking __setattr__: these are methods, not state.
    vars(variable)["assign_add"] = assign_add
    vars(variable)["assign_sub"] = assign_sub


# -- tf.data pipelines -------------------------------------------------


#: The attributes of a tf.data dataset holding the function it runs: a
#: map's (`_MapDataset`, `_ParallelMapDataset`) and a filter's.
_DATASET_FUNCTIONS = ("_map_func", "_predicate")


def dataset_inputs(dataset):
    """The datasets `dataset` reads (tf.data's `DatasetV2._inputs()`).

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        A list of `tf.data.Dataset`s (empty for a source), or `None` when
        tf.data cannot list them (a dataset class without `_inputs`, or
        one raising `NotImplementedError`).
    """
    try:
        return list(dataset._inputs())
    except (AttributeError, NotImplementedError):
        return None


def dataset_functions(dataset):
    """The concrete functions `dataset` runs on each element: its map's or
    its filter's (tf.data's `_map_func` / `_predicate`, each a
    `StructuredFunctionWrapper` whose `function` is concrete).

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        A list of `ConcreteFunction`s, empty for a dataset that runs none.
    """
    return [
        getattr(dataset, name).function
        for name in _DATASET_FUNCTIONS
        if getattr(dataset, name, None) is not None
    ]


def dataset_kind(dataset):
    """What kind of dataset `dataset` is: its tf.data class's name without
    the leading `_` of tf.data's private classes (`_MapDataset`,
    `_ParallelMapDataset`, `TensorSliceDataset`).

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        The name, such as `"MapDataset"` or `"BatchDataset"`.
    """
    return type(dataset).__name__.lstrip("_")


# -- Checkpoints and traces ---------------------------------------------


def dataset_external_state(dataset):
    """Why a dataset's state cannot be serialized (a stateful op in it), or
    `None` (`Dataset._variant_tensor` through `DatasetToGraphV2` with
    `ExternalStatePolicy.FAIL`, what iterator checkpointing runs).

    Args:
        dataset: A `tf.data.Dataset`.

    Returns:
        TensorFlow's message ("RandomUniform is stateful."), or `None`.
    """
    try:
        tf.raw_ops.DatasetToGraphV2(
            input_dataset=dataset._variant_tensor,
            external_state_policy=(
                tf.data.experimental.ExternalStatePolicy.FAIL.value
            ),
        )
    except tf.errors.FailedPreconditionError as error:
        return error.message
    return None


def initial_epoch(model):
    """The epoch `set_initial_epoch` set (a restore's), or `None`: the
    parameter-server loop starts there as Keras's `fit` does."""
    return getattr(model, "_initial_epoch", None)


def set_initial_epoch(model, epoch):
    """The epoch Keras's `fit` starts at, read after `on_train_begin`
    (`Trainer._initial_epoch`, what Keras's `BackupAndRestore` sets);
    `None` for `fit`'s own `initial_epoch`."""
    model._initial_epoch = epoch


def _trackable_object_graph():
    """The proto of a TF2 checkpoint's object graph (`tensorflow.core.
    protobuf.trackable_object_graph_pb2`), read to name an object-based
    checkpoint's variables: `TrackableObjectGraph`."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    return trackable_object_graph_pb2.TrackableObjectGraph


def xspace_to_chrome_trace(xplane_path):
    """Converts a profiler `.xplane.pb` to Chrome-trace JSON bytes with
    TensorFlow's own converter (`_pywrap_profiler_plugin.
    xspace_to_tools_data`, tool `trace_viewer@`).

    Args:
        xplane_path: Path of a `.xplane.pb` file the profiler wrote.

    Returns:
        `(data, ok)`: the JSON bytes and whether the conversion worked.
    """
    from tensorflow.python.profiler.internal import _pywrap_profiler_plugin

    return _pywrap_profiler_plugin.xspace_to_tools_data(
        [xplane_path], "trace_viewer@", {}
    )


# `UnreadDataset` and `TrackableObjectGraph`, made on first access.
__getattr__ = _backend.lazy_attributes(
    __name__,
    {
        "UnreadDataset": _unread_dataset,
        "TrackableObjectGraph": _trackable_object_graph,
    },
)
