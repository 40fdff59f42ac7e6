"""TF1's histogram summary in NumPy: what TensorFlow's `HistogramSummary`
kernel writes (tensorflow/core/lib/histogram/histogram.cc), without
TensorFlow."""

import functools
import sys

import jax.numpy as jnp
import numpy as np
from tensorboard.compat.proto import summary_pb2

__all__ = ["bucket_limits", "histogram_proto", "histogram_value"]

_DBL_MAX = sys.float_info.max


@functools.cache
def bucket_limits():
    """TF1's default bucket edges, as `Histogram()` makes them.

    `1e-12` grown by 10% at a time while below `1e20`, then `DBL_MAX`;
    the same negated, in increasing order, below them; and `0.0` between.
    A bucket holds the values from the edge before it (included) to its
    own (excluded): `std::upper_bound`'s bucket.

    Returns:
        A read-only float64 array of the 1551 edges, increasing.

    Example:
    ```python
    limits = bucket_limits()
    limits[limits.size // 2]  # 0.0
    ```
    """
    positive = []
    edge = 1.0e-12
    while edge < 1.0e20:  # Multiplied as the C++ loop does, not 1.1**k.
        positive.append(edge)
        edge *= 1.1
    positive.append(_DBL_MAX)
    limits = np.array([-e for e in reversed(positive)] + [0.0] + positive)
    limits.setflags(write=False)
    return limits


def _finite(values):
    """`values` as float64, NaN and +inf at the largest finite value and
    -inf at the lowest: the dtype's, or float32's for float64 (as
    keras_slim's TensorFlow histograms: the kernel rejects non-finite
    values)."""
    values = np.asarray(values)
    if not jnp.issubdtype(values.dtype, jnp.floating):
        return values.astype(np.float64).ravel()
    largest = min(
        float(jnp.finfo(values.dtype).max), float(np.finfo(np.float32).max)
    )
    values = values.astype(np.float64).ravel()
    values = np.where(np.isnan(values), largest, values)
    return np.clip(values, -largest, largest)


def _kept(counts):
    """Which buckets the proto lists: each non-empty one, and of each run
    of empty ones its last (TF's `EncodeToProto` collapses the run into
    one empty bucket ending at the run's last edge)."""
    filled = counts > 0
    next_filled = np.append(filled[1:], True)
    return filled | next_filled


def histogram_proto(values):
    """The `HistogramProto` TF1's `HistogramSummary` kernel makes of
    `values`.

    min, max, num, sum and sum_squares of the values (as float64), and the
    counts in TF1's default buckets (`bucket_limits`), runs of empty
    buckets collapsed as TensorFlow does. A NaN or +inf counts as the
    dtype's largest finite value, -inf as its lowest (float32's for
    float64), as keras_slim's histograms on TensorFlow. An empty array
    gives TensorFlow's empty histogram (`min=DBL_MAX`, `max=-DBL_MAX`, one
    empty bucket).

    Args:
        values: An array of a real dtype (NumPy, JAX; integers and
            bfloat16 too).

    Returns:
        A `tensorboard.compat.proto.summary_pb2.HistogramProto`.

    Example:
    ```python
    proto = histogram_proto(np.array([1.0, -2.0, 5.0]))
    (proto.num, proto.min, proto.max, proto.sum)  # (3.0, -2.0, 5.0, 4.0)
    ```
    """
    values = _finite(values)
    limits = bucket_limits()
    buckets = np.searchsorted(limits, values, side="right")
    counts = np.bincount(
        np.minimum(buckets, limits.size - 1), minlength=limits.size
    )
    kept = _kept(counts)
    empty = values.size == 0
    return summary_pb2.HistogramProto(
        min=_DBL_MAX if empty else float(values.min()),
        max=-_DBL_MAX if empty else float(values.max()),
        num=float(values.size),
        sum=float(values.sum()),
        sum_squares=float(np.dot(values, values)),
        bucket_limit=limits[kept].tolist(),
        bucket=counts[kept].astype(np.float64).tolist(),
    )


def histogram_value(tag, values):
    """A `Summary.Value` holding `histogram_proto(values)` under `tag`,
    as TF1's kernel writes it (a `histo` field, no plugin metadata).

    Args:
        tag: The summary's tag.
        values: An array of a real dtype.

    Returns:
        A `tensorboard.compat.proto.summary_pb2.Summary.Value`.

    Example:
    ```python
    value = histogram_value("fc1/kernel", kernel)
    ```
    """
    return summary_pb2.Summary.Value(tag=tag, histo=histogram_proto(values))
