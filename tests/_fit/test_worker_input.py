"""worker_input: which inputs a worker of MultiWorkerMirroredStrategy
reads in its own share on the host (the share itself is checked against
TensorFlow's in tests/test_keras_internals.py; the training in
tests/_fit/test_multi_worker_resume.py)."""

import types

import pytest
import tensorflow as tf

from keras_slim._fit import worker_input

POLICY = tf.data.experimental.AutoShardPolicy


def strategy(workers=2, replicas=2):
    """A stand-in with what `why_not` asks a strategy."""
    context = tf.distribute.InputContext(workers, 0, replicas)
    extended = types.SimpleNamespace(_make_input_context=lambda: context)
    return types.SimpleNamespace(extended=extended)


def with_policy(dataset, policy):
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = policy
    return dataset.with_options(options)


def records(tmp_path):
    path = str(tmp_path / "data.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"x")
    return path


def test_tensors_repeated_or_sharded_by_data_are_read_on_the_host():
    data = tf.data.Dataset.range(8).batch(4)
    assert worker_input.why_not(data, strategy()) is None
    assert worker_input.why_not(data.repeat(), strategy()) is None
    assert (
        worker_input.why_not(with_policy(data, POLICY.DATA), strategy()) is None
    )


def test_finite_files_shared_out_to_workers_are_read_by_keras(tmp_path):
    path = records(tmp_path)
    files = tf.data.Dataset.list_files([path], shuffle=False)
    interleaved = files.interleave(tf.data.TFRecordDataset).batch(2)
    for data in (tf.data.TFRecordDataset([path]).batch(2), interleaved):
        assert worker_input.reads_files(data)
        assert "AutoShardPolicy.AUTO" in worker_input.why_not(data, strategy())
        assert worker_input.why_not(data.repeat(), strategy()) is None
    assert not worker_input.reads_files(tf.data.Dataset.range(3).map(tf.square))


@pytest.mark.parametrize("replicas", [4])
def test_several_replicas_per_worker_are_read_by_keras(replicas):
    data = tf.data.Dataset.range(8).batch(4).repeat()
    reason = worker_input.why_not(data, strategy(2, replicas))
    assert "has 2 replicas" in reason
