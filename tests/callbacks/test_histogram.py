"""keras_slim.callbacks._histogram: TF1's histogram kernel, written by
tf.summary's writer, read back with TensorBoard's reader."""

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.callbacks._histogram import histogram
from keras_slim.callbacks._histogram import zero_fraction
from tests.callbacks.test_summaries import read_events


def test_non_finite_values_count_at_the_edges(tmp_path):
    writer = tf.summary.create_file_writer(str(tmp_path))
    values = np.array([[1.0, np.nan], [np.inf, -2.0], [5.0, -np.inf]])
    with writer.as_default(step=3):
        assert bool(histogram("h", tf.constant(values, tf.float32)))
        assert bool(histogram("finite", tf.constant([1.0, -2.0, 5.0])))
    writer.flush()
    events = read_events(tmp_path)
    largest = float(np.finfo(np.float32).max)
    written = events["h"][3]
    assert (written.num, written.min, written.max) == (6, -largest, largest)
    finite = events["finite"][3]
    assert (finite.num, finite.min, finite.max, finite.sum) == (
        3,
        -2.0,
        5.0,
        4.0,
    )
    assert finite.sum_squares == pytest.approx(30.0)


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


@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16, tf.float64])
def test_non_finite_values_of_every_float_dtype(tmp_path, dtype):
    """Mixed precision's activations: NaN and infinities at the dtype's
    own largest magnitude (float32's for float64, whose extremes crash
    TensorFlow's kernel)."""
    writer = tf.summary.create_file_writer(str(tmp_path))
    values = tf.constant([np.nan, np.inf, -np.inf, 1.0], tf.float32)
    with writer.as_default(step=1):
        assert bool(histogram("h", tf.cast(values, dtype)))
    writer.flush()
    written = read_events(tmp_path)["h"][1]
    largest = float(min(dtype.max, tf.float32.max))
    assert (written.num, written.min, written.max) == (4, -largest, largest)


@pytest.mark.parametrize(
    "values",
    [[0.0, 1.0, 0.0, 2.0], np.zeros((2, 3)), np.ones((4, 1)), [0, 5, 0]],
)
def test_zero_fraction_equals_tensorflows(values):
    values = tf.constant(values)
    assert float(zero_fraction(values)) == float(tf.math.zero_fraction(values))
