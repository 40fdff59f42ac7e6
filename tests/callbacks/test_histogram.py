"""keras_slim.callbacks._histogram: TF1's histogram kernel, written by
tf.summary's writer, read back with TensorBoard's reader."""

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.callbacks._histogram import histogram
from tests.callbacks.test_summaries import read_events


def test_a_histogram_of_the_finite_values(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    values = np.array([[1.0, np.nan], [np.inf, -2.0], [5.0, -np.inf]])
    with writer.as_default(step=3):
        assert bool(histogram("h", tf.constant(values, tf.float32)))
    writer.flush()
    written = read_events(tmp_path)["h"][3]
    assert (written.num, written.min, written.max, written.sum) == (
        3,
        -2.0,
        5.0,
        4.0,
    )
    assert written.sum_squares == pytest.approx(30.0)


def test_inside_a_function_and_without_a_writer(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))

    @tf.function
    def write(x):
        with writer.as_default(step=1):
            return histogram("in_function", x)

    assert bool(write(tf.range(10.0)))
    writer.flush()
    assert read_events(tmp_path)["in_function"][1].num == 10
    assert not bool(histogram("nowhere", tf.range(3.0)))


def test_integer_values(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    with writer.as_default(step=2):
        histogram("seeds", tf.constant([3, -1, 7], tf.int64))
    writer.flush()
    written = read_events(tmp_path)["seeds"][2]
    assert (written.num, written.min, written.max) == (3, -1.0, 7.0)
