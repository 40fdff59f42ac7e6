"""Histograms as TF-Slim wrote them: TensorFlow's `HistogramSummary` op.

TensorBoard's `tf.summary.histogram` builds its buckets from some thirty
ops per histogram: inside a train step, the activations' histograms of a
real net (mobilenet_v1's 28 end points) took seconds to trace and
seconds to run. TF1's `HistogramSummary` (what TF-Slim's
`tf.summary.histogram` wrote) is one C++ kernel; its serialized `Summary`
goes to the default writer through `tf.summary.experimental.write_raw_pb`.
TensorBoard's histogram dashboard shows both; TensorBoard's
`EventAccumulator` lists them under `Tags()["histograms"]`.
"""

import tensorflow as tf


def histogram(tag, values):
    """Writes a histogram of `values` under `tag`, to the default writer.

    Non-finite values are left out (the kernel rejects them; a step the
    gradient check skips may hold some).

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
    values = tf.reshape(tf.convert_to_tensor(values), [-1])
    if values.dtype.is_floating:
        values = tf.boolean_mask(values, tf.math.is_finite(values))
    serialized = tf.raw_ops.HistogramSummary(tag=tag, values=values)
    return tf.summary.experimental.write_raw_pb(serialized)
