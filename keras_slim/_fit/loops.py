"""The multi-step loop: several train steps in one call, one loop body."""

import keras

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf
from keras_slim._fit import blocks as blocks_lib
from keras_slim._fit import replicas
from keras_slim._step import accumulate
from keras_slim._step import gate


def reduce_step_outputs(outputs, strategy, *, mode):
    """Keras's `reduce_per_replica(..., "auto")`, scalars fixed under MWMS.

    Args:
        outputs: A step's per-replica logs.
        strategy: The strategy the step ran under.
        mode: The run's deployment `Mode` (`Run.mode`).

    Returns:
        The reduced logs.
    """
    if not mode.reduces_logs_itself:
        return _keras.reduce_step_outputs_auto(outputs, strategy)

    def mean(value):
        local = strategy.experimental_local_results(value)[0]
        axis = None if local.shape.rank == 0 else 0
        return strategy.reduce("MEAN", value, axis=axis)

    return keras.tree.map_structure(mean, outputs)


def _tracker_state(model):
    """The loss tracker's `[total, count]`, as a float32 vector; under
    gradient accumulation, the last optimizer step's `[total, count,
    ended]` (`accumulate.StepLossMean.state`)."""
    step_loss = accumulate.step_loss(model)
    if step_loss is not None:
        return step_loss.state(model.optimizer)
    tracker = _keras.loss_tracker(model)
    return tf.cast(
        tf.stack(
            [
                tf.convert_to_tensor(tracker.total),
                tf.convert_to_tensor(tracker.count),
            ]
        ),
        tf.float32,
    )


class Records:
    """Each step's loss-tracker state in a call, kept in the graph (under
    gradient accumulation, the last optimizer step's loss state after
    each micro-batch: `_tracker_state`).

    Args:
        model: The model; nothing is recorded when `enabled` is false or
            the model has no loss tracker.
        enabled: Whether to record.
    """

    def __init__(self, model, enabled):
        self._model = model
        self.enabled = enabled and _keras.loss_tracker(model) is not None

    def start(self):
        """A `TensorArray` holding the state before the first step."""
        records = tf.TensorArray(tf.float32, size=0, dynamic_size=True)
        return self.after(records, -1)

    def after(self, records, step):
        """`records` with the state after step `step` (0-based) added."""
        if not self.enabled:
            return records
        return records.write(step + 1, _tracker_state(self._model))

    def result(self, records):
        """The `(steps + 1, 2)` tensor (`(steps + 1, 3)` under gradient
        accumulation), or `None` if nothing was recorded."""
        return records.stack() if self.enabled else None


def _same(batch):
    return batch


class IteratorSource:
    """Batches from an iterator, read one ahead so none is lost.

    Args:
        iterator: A `tf.data` or distributed iterator.
        steps: The most steps one call runs.
        distribute: A function of a global batch returning what
            `strategy.run` takes (`replicas.split` for a host
            iterator under `MirroredStrategy`). Defaults to the identity.
    """

    def __init__(self, iterator, steps, distribute=_same):
        self._iterator = iterator
        self._steps = steps
        self._distribute = distribute

    def first(self):
        """The first step's batch; an exhausted iterator raises
        `OutOfRangeError`, which Keras takes as the end of the epoch."""
        return self._distribute(self._iterator.get_next())

    def start(self):
        """The loop state before step 1: the next batch, if any."""
        return self._iterator.get_next_as_optional()

    def more(self, state):
        """Whether step `i` has a batch."""
        return state.has_value()

    def batch(self, step, state):
        """The batch of step `step`."""
        del step
        return self._distribute(state.get_value())

    def advance(self, step, state):
        """The state after step `step`: fetch ahead only if another step
        will run, so no batch is lost."""
        return tf.cond(
            step + 1 < self._steps,
            self._iterator.get_next_as_optional,
            lambda: state,
        )


class BlockSource:
    """Batches sliced out of one block of up to `steps` batches.

    Args:
        block: A block (`keras_slim/_fit/blocks.py`): read from an
            iterator of blocks in the call, or given to a parameter-server
            worker's call by the coordinator.
        distribute: As for `IteratorSource`. Defaults to the identity.
    """

    def __init__(self, block, distribute=_same):
        self._block = block
        self.count = blocks_lib.block_size(self._block)
        self._distribute = distribute

    def first(self):
        return self._distribute(blocks_lib.batch(self._block, 0))

    def start(self):
        return None  # every step up to `count` has a batch

    def batch(self, step, state):
        del state
        return self._distribute(blocks_lib.batch(self._block, step))

    def advance(self, step, state):
        return state


class ScheduledSource:
    """Batches of a step scheduled on a parameter-server worker.

    Args:
        iterator: The worker's iterator.
    """

    def __init__(self, iterator):
        self._iterator = iterator

    def first(self):
        return next(self._iterator)

    def start(self):
        return None  # the worker's dataset is repeated

    def batch(self, step, state):
        del step, state
        return next(self._iterator)

    def advance(self, step, state):
        return state


def run_steps(one_step, source, steps, records):
    """The one loop body: up to `steps` steps on the batches of `source`.

    The first step runs unconditionally (see the module docstring); the
    others in a `tf.while_loop` while `step < steps` and, for a source
    whose `start()` gives a state, while that state has a batch. With
    `steps` a Python 1, there is no loop at all.

    Args:
        one_step: A function of a batch returning the step's logs.
        source: An `IteratorSource`, `BlockSource` or `ScheduledSource`.
        steps: The most steps (a Python int or a scalar int32 tensor).
        records: A `Records`.

    Returns:
        `(outputs, records)`: the last step's logs and the recorded
        tracker states (or `None`).
    """
    recorded = records.start()
    outputs = one_step(source.first())
    recorded = records.after(recorded, 0)
    if isinstance(steps, int) and steps <= 1:
        return outputs, records.result(recorded)
    state = source.start()
    if state is None:
        # No state to carry: fewer ops per step than a looked-ahead batch.
        def more(step, outputs, recorded):
            return step < steps

        def body(step, outputs, recorded):
            outputs = one_step(source.batch(step, None))
            return step + 1, outputs, records.after(recorded, step)

        _, outputs, recorded = tf.while_loop(
            more, body, (tf.constant(1), outputs, recorded)
        )
        return outputs, records.result(recorded)

    def more_with_state(step, outputs, state, recorded):
        return tf.logical_and(step < steps, source.more(state))

    def body_with_state(step, outputs, state, recorded):
        outputs = one_step(source.batch(step, state))
        recorded = records.after(recorded, step)
        return step + 1, outputs, source.advance(step, state), recorded

    _, outputs, _, recorded = tf.while_loop(
        more_with_state,
        body_with_state,
        (tf.constant(1), outputs, state, recorded),
    )
    return outputs, records.result(recorded)


def step_on_data(model, step_function, *, mode):
    """`step_function` on one batch, run on every replica and reduced.

    Args:
        model: The Keras model.
        step_function: The per-replica step, usually `model.train_step`.
        mode: The run's deployment `Mode` (`Run.mode`).

    Returns:
        A `tf.function` of a batch returning the step's reduced logs.
    """
    strategy = model.distribute_strategy
    xla = bool(model.jit_compile)

    @tf.autograph.experimental.do_not_convert
    def one_step_on_data(data):
        outputs = strategy.run(step_function, args=(data,))
        verdict = None
        if isinstance(outputs, dict) and gate.VERDICT in outputs:
            # The same on every replica: computed on summed values.
            outputs = dict(outputs)
            verdict = strategy.experimental_local_results(
                outputs.pop(gate.VERDICT)
            )[0]
        outputs = reduce_step_outputs(outputs, strategy, mode=mode)
        if verdict is not None:
            outputs[gate.VERDICT] = verdict
        return outputs

    compiled = tf.function(
        one_step_on_data, reduce_retracing=True, jit_compile=model.jit_compile
    )
    if not xla:
        return _keras.autoconvert_optionals(model, compiled)

    def checked_step_on_data(data):
        # Outside XLA, where an Assert runs: before the next step.
        return gate.fail_on_verdict(compiled(data))

    return _keras.autoconvert_optionals(model, checked_step_on_data)


def multi_step_functions(model, step_function, *, mode):
    """The functions of one call: on Keras's iterators, on host iterators,
    on blocks.

    The steps per call are `model.steps_per_execution` when traced. Each
    step's loss-tracker state is recorded (see the module docstring),
    except under `MultiWorkerMirroredStrategy`, where reading the tracker
    is a collective.

    Args:
        model: The Keras model (TensorFlow trainer).
        step_function: The per-replica step, usually `model.train_step`.
        mode: The run's deployment `Mode` (`Run.mode`).

    Returns:
        `(on_iterator, on_host, on_blocks, on_python)`: `tf.function`s of
        an iterator (Keras's, already distributed; a run's host iterator,
        split across replicas here; an iterator of blocks, split too)
        returning `(logs, records)`, and a Python function running the
        steps of a call on a Python iterator's batches, returning the
        logs.
    """
    strategy = model.distribute_strategy
    record = mode.loop_records_step_losses
    one_step = step_on_data(model, step_function, mode=mode)

    def split(batch):
        return replicas.split(batch, strategy, mode=mode)

    @tf.autograph.experimental.do_not_convert
    def on_iterator(iterator):
        steps = model.steps_per_execution
        source = IteratorSource(iterator, steps)
        return run_steps(one_step, source, steps, Records(model, record))

    @tf.autograph.experimental.do_not_convert
    def on_host(iterator):
        steps = model.steps_per_execution
        source = IteratorSource(iterator, steps, split)
        return run_steps(one_step, source, steps, Records(model, record))

    @tf.autograph.experimental.do_not_convert
    def on_blocks(blocks):
        # One read of the data per call; an exhausted iterator raises
        # OutOfRangeError here.
        source = BlockSource(blocks.get_next(), split)
        return run_steps(one_step, source, source.count, Records(model, record))

    def on_python(iterator):
        # What Keras's own train function does with a Python iterator.
        outputs = None
        for _, batch in zip(range(model.steps_per_execution), iterator):
            outputs = one_step(batch)
        if outputs is None:
            raise StopIteration
        return outputs

    compiled = tuple(
        tf.function(f, reduce_retracing=True)
        for f in (on_iterator, on_host, on_blocks)
    )
    return (*compiled, on_python)


def scheduled_steps_function(model):
    """The function a parameter-server worker runs: `steps` train steps.

    Args:
        model: The `SlimModel`, under `ParameterServerStrategy`.

    Returns:
        A `tf.function` of `(iterator, steps)`, `steps` a Python int: one
        trace per value (`steps_per_execution` and a shorter last batch),
        and no loop for one step.
    """
    return _worker_steps_function(model, ScheduledSource)


def fed_steps_function(model):
    """The function a parameter-server worker runs on batches the
    coordinator read and sent (`keras_slim/_fit/scheduled_input.py`).

    Args:
        model: The `SlimModel`, under `ParameterServerStrategy`.

    Returns:
        A `tf.function` of `(block, steps)`: a block of `steps` batches
        (each tensor with a leading axis of `steps`), `steps` a Python int
        (one trace per value, no loop for one step), running one train
        step per batch.
    """
    return _worker_steps_function(model, BlockSource)


def _worker_steps_function(model, source):
    """A `tf.function` of `(data, steps)` running `steps` train steps on a
    parameter-server worker, on the batches `source(data)` gives."""
    strategy = model.distribute_strategy

    def one_step(data):
        return strategy.run(model.train_step, args=(data,))

    def train_steps(data, steps):
        outputs, _ = run_steps(
            one_step, source(data), steps, Records(model, False)
        )
        return outputs

    return tf.function(train_steps)
