"""Train functions that work where Keras 3.15's do not.

Multi-step (`steps_per_execution > 1`) under `MirroredStrategy`:

Keras 3.15's `steps_per_execution > 1` loop wraps each step's
`strategy.run` in a `tf.cond` (`has_next`). Under `MirroredStrategy` a step
that makes a `merge_call` (every optimizer update does) then fails with
"You must feed a value for placeholder tensor 'while/cond/Placeholder'"
(keras-team/keras#19246; plain `keras.Model.fit` fails the same way). This
loop runs the first step unconditionally and the others in a `while_loop`
whose condition, not a `cond`, checks for more data, as tf_keras did.

Any step under `MultiWorkerMirroredStrategy`: Keras reduces the step's
scalar metric results with `strategy.reduce("MEAN", v, axis=0)`, which
fails on a scalar ('Invalid reduction dimension 0 for input with 0
dimensions', tensorflow#72388). Here scalars are reduced with `axis=None`.

Each step's loss, from a multi-step call: TF-Slim logged and returned the
loss of single steps, but a call of several steps gives Keras only the
last step's logs, which hold the epoch's running mean. So the loop reads
the loss tracker's `total` and `count` (the `Mean` named "loss") before
the first step and after each one, in the graph, and the call leaves them
in `model._keras_slim_step_records`, a `(steps + 1, 2)` tensor: the
difference of two rows is one step's loss sum and batch size. They reach
the host only when a callback reads them (`callbacks._steps.StepLoss`),
so logging every step no longer needs one step per call.

Private Keras internals used here (pinned by `keras==3.15.*`, checked by
tests/test_keras_internals.py): `keras.src.backend.tensorflow.trainer.
reduce_per_replica`, `TensorFlowTrainer._autoconvert_optionals`.
"""

import tensorflow as tf
from keras.src import tree
from keras.src.backend.tensorflow.trainer import reduce_per_replica

from keras_slim import _blocks


def is_multi_worker(strategy):
    """Whether `strategy` is a MultiWorkerMirroredStrategy over workers."""
    return isinstance(
        strategy, tf.distribute.MultiWorkerMirroredStrategy
    ) and bool(strategy.extended._in_multi_worker_mode())


def reduce_step_outputs(outputs, strategy):
    """Keras's `reduce_per_replica(..., "auto")`, scalars fixed under MWMS."""
    if not is_multi_worker(strategy):
        return reduce_per_replica(outputs, strategy, reduction="auto")

    def mean(value):
        local = strategy.experimental_local_results(value)[0]
        axis = None if local.shape.rank == 0 else 0
        return strategy.reduce("MEAN", value, axis=axis)

    return tree.map_structure(mean, outputs)


def _tracker_state(model):
    """The loss tracker's `[total, count]`, as a float32 vector."""
    tracker = model._loss_tracker
    return tf.cast(
        tf.stack(
            [
                tf.convert_to_tensor(tracker.total),
                tf.convert_to_tensor(tracker.count),
            ]
        ),
        tf.float32,
    )


class _Records:
    """Each step's loss-tracker state in a call, kept in the graph.

    Args:
        model: The model; nothing is recorded when `enabled` is false or
            the model has no loss tracker.
        enabled: Whether to record.
    """

    def __init__(self, model, enabled):
        self._model = model
        self.enabled = (
            enabled and getattr(model, "_loss_tracker", None) is not None
        )

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
        """The `(steps + 1, 2)` tensor, or `None` if nothing was recorded."""
        return records.stack() if self.enabled else None


def make_multi_step_function(model, step_function, keras_function):
    """Returns a train function running `model.steps_per_execution` steps.

    A call also leaves each step's loss-tracker state in
    `model._keras_slim_step_records` (see the module docstring), or `None`
    where it is not recorded: under `MultiWorkerMirroredStrategy` (reading
    the tracker there is a collective), for iterators that are not
    `tf.data` ones, and for models without a loss tracker.

    Args:
        model: The Keras model (TensorFlow trainer).
        step_function: The per-replica step, usually `model.train_step`.
        keras_function: Keras's own train function, used for iterators that
            are not `tf.data` ones (Python generators).

    Returns:
        A function of an iterator returning the last step's logs. An
        iterator exhausted before the first step raises
        `tf.errors.OutOfRangeError`, which Keras's epoch iterator takes as
        the end of the epoch.
    """
    strategy = model.distribute_strategy
    record = not is_multi_worker(strategy)

    @tf.autograph.experimental.do_not_convert
    def one_step_on_data(data):
        outputs = strategy.run(step_function, args=(data,))
        return reduce_step_outputs(outputs, strategy)

    one_step_on_data = tf.function(
        one_step_on_data, reduce_retracing=True, jit_compile=model.jit_compile
    )
    one_step_on_data = model._autoconvert_optionals(one_step_on_data)

    @tf.autograph.experimental.do_not_convert
    def multi_step_on_iterator(iterator):
        steps = model.steps_per_execution
        recorder = _Records(model, record)
        records = recorder.start()
        outputs = one_step_on_data(iterator.get_next())
        records = recorder.after(records, 0)
        if steps > 1:

            def more(step, outputs, next_data, records):
                return tf.logical_and(step < steps, next_data.has_value())

            def body(step, outputs, next_data, records):
                outputs = one_step_on_data(next_data.get_value())
                records = recorder.after(records, step)
                # Fetch ahead only if another step will run, so no batch
                # is lost.
                next_data = tf.cond(
                    step + 1 < steps,
                    iterator.get_next_as_optional,
                    lambda: next_data,
                )
                return step + 1, outputs, next_data, records

            _, outputs, _, records = tf.while_loop(
                more,
                body,
                (
                    tf.constant(1),
                    outputs,
                    iterator.get_next_as_optional(),
                    records,
                ),
            )
        return outputs, recorder.result(records)

    multi_step_on_iterator = tf.function(
        multi_step_on_iterator, reduce_retracing=True
    )

    @tf.autograph.experimental.do_not_convert
    def multi_step_on_blocks(blocks):
        # One read of the data: a block of up to `steps` batches
        # (`_blocks`); an exhausted iterator raises OutOfRangeError here.
        block = blocks.get_next()
        count = _blocks.block_size(block)
        recorder = _Records(model, record)
        records = recorder.start()
        outputs = one_step_on_data(_blocks.batch(block, 0))
        records = recorder.after(records, 0)

        def body(step, outputs, records):
            outputs = one_step_on_data(_blocks.batch(block, step))
            return step + 1, outputs, recorder.after(records, step)

        _, outputs, records = tf.while_loop(
            lambda step, outputs, records: step < count,
            body,
            (tf.constant(1), outputs, records),
        )
        return outputs, recorder.result(records)

    multi_step_on_blocks = tf.function(
        multi_step_on_blocks, reduce_retracing=True
    )

    def function(iterator):
        feeder = getattr(model, "_keras_slim_feeder", None)
        if feeder is not None and isinstance(iterator, tf.data.Iterator):
            blocks = feeder.blocks_for(iterator)
            outputs, records = multi_step_on_blocks(blocks)
            model._keras_slim_step_records = records
            return outputs
        if isinstance(
            iterator, (tf.data.Iterator, tf.distribute.DistributedIterator)
        ):
            outputs, records = multi_step_on_iterator(iterator)
            model._keras_slim_step_records = records
            return outputs
        model._keras_slim_step_records = None
        return keras_function(iterator)

    return function
