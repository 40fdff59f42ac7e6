"""Blocks of batches: one read of the data per call, the same training.

Reference: the same model fitted with one step per call
(`steps_per_execution=1`, Keras's own train function and iterator).
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim._fit import blocks
from keras_slim._fit import feed
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp
from tests.helpers import weights


def fitted(data, steps_per_execution, **kwargs):
    model = compile_model(mlp(), steps_per_execution=steps_per_execution)
    history = model.fit(data(), verbose=0, **kwargs)
    return model, history.history


@pytest.fixture
def reads(monkeypatch):
    """Counts the calls that read a block."""
    calls = []
    source = feed.HostFeed.source

    def counted(self, keras_iterator):
        if self.reads_blocks:
            calls.append(self.blocks)
        return source(self, keras_iterator)

    monkeypatch.setattr(feed.HostFeed, "source", counted)
    return calls


def assert_same_training(data, reads, expected_reads, **kwargs):
    auto, auto_history = fitted(data, "auto", **kwargs)
    one, one_history = fitted(data, 1, **kwargs)
    assert len(reads) == expected_reads
    for a, b in zip(weights(auto), weights(one)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for key in one_history:
        np.testing.assert_allclose(
            auto_history[key], one_history[key], rtol=1e-5
        )
    return auto


def test_a_short_last_batch(reads):
    # 100 examples in batches of 16: 7 batches, the last of 4; one call of
    # 7 per epoch, its block ragged.
    x, y = classification_data(100)

    def data():
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(16)

    assert_same_training(data, reads, expected_reads=3, epochs=3)
    assert reads == [7, 7, 7]


def test_a_seeded_shuffle_sees_the_same_orders(reads):
    # Reshuffled at each pass: the pass count must match Keras's.
    x, y = classification_data(128)

    def data():
        return (
            tf.data.Dataset.from_tensor_slices((x, y))
            .shuffle(128, seed=3)
            .batch(16, drop_remainder=True)
        )

    assert_same_training(data, reads, expected_reads=3, epochs=3)


def test_sample_weights_and_steps_per_epoch_over_endless_data(reads):
    x, y = classification_data(64)
    w = np.linspace(0.5, 1.5, 64).astype("float32")

    def data():
        return tf.data.Dataset.from_tensor_slices((x, y, w)).batch(16).repeat()

    # 12 steps per epoch, 2 epochs: calls of 12, one per epoch, and the
    # second epoch goes on where the first stopped, as Keras's iterator.
    assert_same_training(
        data, reads, expected_reads=2, epochs=2, steps_per_epoch=12
    )


def test_the_data_is_read_once_per_call():
    # Each element passes a counter once: 40 batches, 40 counts, whatever
    # the steps per call.
    x, y = classification_data(64)
    counter = tf.Variable(0, dtype=tf.int64)

    def count(a, b):
        counter.assign_add(1)
        return a, b

    data = tf.data.Dataset.from_tensors((x, y)).repeat(40).map(count)
    model = compile_model(mlp())
    model.fit(data, verbose=0)
    assert int(counter.numpy()) == 40
    assert global_step(model) == 40
    assert "_keras_slim_run" not in vars(model)  # the run and its feed are gone
    model.evaluate(x, y, verbose=0)


def test_eligibility(mirrored):
    x, y = classification_data(64)
    model = compile_model(mlp())
    dense = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    assert blocks.eligible(model, dense, {}, 4)
    assert blocks.eligible(model, dense.repeat(), {}, 4)
    # Keras would transform it, or cannot say where it ends.
    assert not blocks.eligible(model, dense, {"class_weight": {0: 2.0}}, 4)
    assert not blocks.eligible(model, dense.filter(lambda a, b: True), {}, 4)
    assert not blocks.eligible(model, x, {}, 4)
    # Dimensions other than the batch one vary; scalars; sparse tensors.
    ragged = tf.data.Dataset.from_tensors(
        (tf.zeros([4, 3]), tf.zeros([4]))
    ).map(lambda a, b: (a[:, : tf.cast(b[0], tf.int32) + 1], b))
    assert not blocks.eligible(model, ragged, {}, 4)
    scalar = tf.data.Dataset.from_tensors((x, 1.0))
    assert not blocks.eligible(model, scalar, {}, 4)
    sparse = tf.data.Dataset.from_tensors((tf.sparse.from_dense(x), y)).repeat()
    assert not blocks.eligible(model, sparse, {}, 4)
    # Large inputs: a block would hold k batches of them.
    images = tf.data.Dataset.from_tensors(
        (tf.zeros([64, 96, 96, 3]), y)
    ).repeat()
    assert blocks.eligible(model, images, {}, 2)  # 14 MB a block
    assert not blocks.eligible(model, images, {}, 32)  # 226 MB a block
    unbatched = images.unbatch().batch(64)  # batch size unknown
    assert not blocks.eligible(model, unbatched, {}, 2)  # 108 KiB an example
    # Distributed iterators: not under a strategy.
    with mirrored.scope():
        clones = compile_model(mlp())
    assert not blocks.eligible(clones, dense, {}, 4)


def test_fixed_steps_per_execution_reads_each_batch(reads):
    x, y = classification_data(64)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(8)
    model = compile_model(mlp(), steps_per_execution=4)
    model.fit(data, verbose=0)
    assert reads == []
    assert isinstance(model, keras.Model)


def test_steps_per_epoch_beyond_the_data(reads):
    # 7 batches, 12 steps asked per epoch: each epoch's call of 12 reads a
    # block of 7 and runs 7 steps, as the per-batch loop runs 7.
    x, y = classification_data(112)

    def data():
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(16)

    with pytest.warns(UserWarning, match="ran out of data"):
        model = assert_same_training(
            data, reads, expected_reads=2, steps_per_epoch=12, epochs=2
        )
    assert global_step(model) == 14
