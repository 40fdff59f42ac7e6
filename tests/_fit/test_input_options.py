"""keras_slim/_fit/input_options.py: one tf.data thread for inputs that
cost nothing, tf.data's defaults for inputs that work."""

import numpy as np
import pytest
import tensorflow as tf

from keras_slim._fit import input_options
from tests.helpers import classification_data
from tests.helpers import compile_model
from tests.helpers import mlp


def _tensors():
    return np.zeros((8, 4), "float32"), np.zeros(8, "int32")


def _records(tmp_path):
    path = str(tmp_path / "r.tfrecord")
    with tf.io.TFRecordWriter(path) as writer:
        writer.write(b"x")
    return tf.data.TFRecordDataset(path)


CHEAP = {
    "from_tensors.repeat": lambda _: tf.data.Dataset.from_tensors(
        _tensors()
    ).repeat(),
    "slices.shuffle.batch.prefetch": lambda _: (
        tf.data.Dataset.from_tensor_slices(_tensors())
        .shuffle(8, seed=0)
        .batch(2)
        .prefetch(tf.data.AUTOTUNE)
    ),
    "range.map(gather)": lambda _: tf.data.Dataset.range(8).map(
        lambda i: tf.gather(tf.range(8), i)
    ),
}
HEAVY = {
    "TFRecordDataset": _records,
    "parallel map": lambda _: tf.data.Dataset.range(8).map(
        lambda i: i + 1, num_parallel_calls=2
    ),
    "map(decode_png)": lambda _: tf.data.Dataset.from_tensors(
        tf.io.encode_png(tf.zeros((2, 2, 3), tf.uint8))
    ).map(tf.io.decode_png),
    "map(random crop)": lambda _: tf.data.Dataset.from_tensors(
        tf.zeros((4, 4, 3))
    ).map(lambda x: tf.image.random_crop(x, (2, 2, 3))),
    "map calling a tf.function": lambda _: tf.data.Dataset.range(8).map(
        tf.function(lambda i: i + 1)
    ),
    "generator": lambda _: tf.data.Dataset.from_generator(
        lambda: iter([1, 2]), output_signature=tf.TensorSpec([], tf.int32)
    ),
}


@pytest.mark.parametrize("name", list(CHEAP))
def test_in_memory_inputs_get_one_thread_and_no_autotune(name, tmp_path):
    dataset = CHEAP[name](tmp_path)
    assert input_options.is_cheap(dataset)
    options = input_options.for_fit(dataset).options()
    assert options.threading.private_threadpool_size == 1
    assert options.threading.max_intra_op_parallelism == 1
    assert options.autotune.enabled is False


@pytest.mark.parametrize("name", list(HEAVY))
def test_inputs_that_work_keep_tf_datas_defaults(name, tmp_path):
    dataset = HEAVY[name](tmp_path)
    assert not input_options.is_cheap(dataset)
    assert input_options.for_fit(dataset) is dataset


def test_a_pipeline_whose_inputs_cannot_be_listed_keeps_the_defaults(
    monkeypatch,
):
    dataset = CHEAP["from_tensors.repeat"](None)

    def unlisted(self):
        raise NotImplementedError

    monkeypatch.setattr(type(dataset), "_inputs", unlisted)
    assert not input_options.is_cheap(dataset)


def test_the_users_options_are_kept():
    options = tf.data.Options()
    options.threading.private_threadpool_size = 3
    dataset = CHEAP["from_tensors.repeat"](None).with_options(options)
    chosen = input_options.for_fit(dataset).options()
    assert chosen.threading.private_threadpool_size == 3
    assert chosen.threading.max_intra_op_parallelism == 1


def test_fit_reads_a_cheap_input_with_one_thread(monkeypatch):
    """`SlimModel.fit` reads its host input through `for_fit`, and the
    threading leaves the result unchanged."""
    seen = []
    original = input_options.for_fit

    def recording(dataset):
        chosen = original(dataset)
        seen.append(chosen.options().threading.private_threadpool_size)
        return chosen

    x, y = classification_data(n=64)
    # Unshuffled: a shuffle's seeds differ from one iterator to the next.
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).repeat()
    monkeypatch.setattr(input_options, "for_fit", recording)
    one_thread = compile_model(mlp())
    one_thread.fit(data, steps_per_epoch=6, verbose=0)
    assert seen and set(seen) == {1}
    monkeypatch.setattr(input_options, "for_fit", lambda dataset: dataset)
    defaults = compile_model(mlp())
    defaults.fit(data, steps_per_epoch=6, verbose=0)
    for a, b in zip(one_thread.get_weights(), defaults.get_weights()):
        np.testing.assert_array_equal(a, b)
