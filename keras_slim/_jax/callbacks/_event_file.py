"""An event file TensorBoard reads, written without TensorFlow."""

import itertools
import os
import socket
import time

import numpy as np
from tensorboard.compat.proto import event_pb2
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.scalar import metadata as scalar_metadata
from tensorboard.summary.writer import record_writer
from tensorboard.util import tensor_util

__all__ = ["EventFile", "scalar_value"]

_NUMBERS = itertools.count()


def scalar_value(tag, value):
    """A `Summary.Value` of a float32 scalar under `tag`, as
    `tf.summary.scalar` writes it (a tensor with the scalars plugin's
    metadata: TensorBoard's `EventAccumulator` lists it under
    `Tags()["tensors"]`).

    Args:
        tag: The summary's tag.
        value: A real number.

    Returns:
        A `tensorboard.compat.proto.summary_pb2.Summary.Value`.

    Example:
    ```python
    value = scalar_value("loss", 0.25)
    ```
    """
    return summary_pb2.Summary.Value(
        tag=tag,
        tensor=tensor_util.make_tensor_proto(np.float32(value)),
        metadata=scalar_metadata.create_summary_metadata(
            display_name=None, description=None
        ),
    )


class EventFile:
    """One TensorBoard event file, written through TensorBoard's own
    `RecordWriter` (TFRecord framing) and `Event` protos.

    TensorBoard's `EventFileWriter` reaches the file system through
    `tensorboard.compat.tf`, which imports TensorFlow wherever it is
    installed; this writes the same file with Python's own: local paths
    only, as keras_slim's other files on JAX. The file is created in
    `logdir` (made if needed) and starts with the `brain.Event:2` version
    event; each `write` is flushed.

    Args:
        logdir: The directory of the file.

    Raises:
        OSError: if the file cannot be created.

    Example:
    ```python
    events = EventFile("/tmp/run")
    events.write(10, [scalar_value("loss", 0.25)])
    events.close()
    ```
    """

    def __init__(self, logdir):
        os.makedirs(logdir, exist_ok=True)
        name = "events.out.tfevents.%010d.%s.%s.%s" % (
            time.time(),
            socket.gethostname(),
            os.getpid(),
            next(_NUMBERS),
        )
        self.path = os.path.join(logdir, name)
        self._records = record_writer.RecordWriter(open(self.path, "wb"))
        self._add(
            event_pb2.Event(
                wall_time=time.time(),
                file_version="brain.Event:2",
                source_metadata=event_pb2.SourceMetadata(writer="keras_slim"),
            )
        )

    def _add(self, event):
        self._records.write(event.SerializeToString())
        self._records.flush()

    def write(self, step, values):
        """Writes one event of `values` at `step`, and flushes.

        Args:
            step: The global step.
            values: `Summary.Value` protos.
        """
        self._add(
            event_pb2.Event(
                wall_time=time.time(),
                step=int(step),
                summary=summary_pb2.Summary(value=list(values)),
            )
        )

    def close(self):
        """Closes the file (again: nothing)."""
        if not self._records.closed:
            self._records.close()
