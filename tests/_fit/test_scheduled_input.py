"""What parameter-server calls read: blocks of the coordinator's batches."""

import numpy as np
import tensorflow as tf

from keras_slim._fit import scheduled_input


def test_a_call_gets_one_block_of_its_batches_split_where_shapes_change():
    # 7 examples in batches of 3: the last batch has 1.
    data = tf.data.Dataset.from_tensor_slices(
        (np.arange(14.0).reshape(7, 2), np.arange(7))
    ).batch(3)
    reads = scheduled_input.CoordinatorReads(iter(data))
    calls, read = reads.calls(2)
    assert read == 2 and len(calls) == 1
    (x, y), count = calls[0]
    assert count == 2 and x.shape == (2, 3, 2)
    assert y.numpy().tolist() == [[0, 1, 2], [3, 4, 5]]
    calls, read = reads.calls(2)  # one batch left: a short call
    assert read == 1 and [c for _, c in calls] == [1]
    assert calls[0][0][1].numpy().tolist() == [[6]]
    assert reads.calls(2) == ([], 0)


def test_blocks_follow_the_batches_shapes():
    batches = [tf.zeros([3]), tf.ones([3]), tf.zeros([1]), tf.ones([3])]
    shapes = [
        (tuple(block.shape), count)
        for block, count in scheduled_input.blocks(batches)
    ]
    assert shapes == [((2, 3), 2), ((1, 1), 1), ((1, 3), 1)]


def test_only_dense_components_are_read_by_the_coordinator():
    assert scheduled_input.dense(
        (tf.TensorSpec([None, 2]), tf.TensorSpec([None]))
    )
    assert not scheduled_input.dense(tf.RaggedTensorSpec([None, None]))
    assert not scheduled_input.dense(
        (tf.TensorSpec([None]), tf.SparseTensorSpec([None, 3], tf.float32))
    )
