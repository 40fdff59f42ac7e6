"""Summary ops as TF-Slim wrote them, cheap to trace in a train step."""

from keras_slim._backend import tensorflow as tf


def _finite(values):
    """`values` with NaN and +inf at the largest finite value, -inf at the
    lowest: the dtype's, or float32's for float64 (the kernel rejects
    non-finite values, and corrupts memory on float64's extremes), so a
    histogram still shows them at its max or min."""
    if not values.dtype.is_floating:
        return values
    largest = min(values.dtype.max, tf.float32.max)
    largest = tf.constant(largest, values.dtype)
    values = tf.where(tf.math.is_nan(values), largest, values)
    return tf.clip_by_value(values, -largest, largest)


def histogram(tag, values):
    """Writes a histogram of `values` under `tag`, to the default writer.

    A NaN or +inf counts as the dtype's largest finite value, -inf as its
    lowest (float32's for float64): TensorFlow's kernel rejects them, and
    a step the gradient check skips may hold some; the histogram's max or
    min shows them.

    Args:
        tag: The summary's tag.
        values: A tensor or variable of a real dtype (integers too: a
            seed generator's state).

    Returns:
        A boolean tensor: whether a writer wrote it (`tf.summary`'s).

    Example:
    ```python
    with writer.as_default(step=10):
        histogram("fc1/kernel", model.get_layer("fc1").kernel)
    ```
    """
    values = _finite(tf.convert_to_tensor(values))
    serialized = tf.raw_ops.HistogramSummary(tag=tag, values=values)
    return tf.summary.experimental.write_raw_pb(serialized)


def zero_fraction(values):
    """The fraction of zeros in `values`, as `tf.math.zero_fraction`
    (float32, counted in int64), without its `tf.cond`.

    Args:
        values: A tensor.

    Returns:
        A float32 scalar tensor.

    Example:
    ```python
    zero_fraction(tf.constant([0.0, 1.0, 0.0, 2.0]))  # 0.5
    ```
    """
    size = tf.size(values, out_type=tf.int64)
    zeros = size - tf.math.count_nonzero(values, dtype=tf.int64)
    return tf.cast(zeros, tf.float32) / tf.cast(size, tf.float32)
