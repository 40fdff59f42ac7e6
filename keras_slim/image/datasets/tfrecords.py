"""TF-Slim's TFRecord shards: `tf.train.Example`s with `image/encoded`,
`image/format` and `image/class/label`, and a `labels.txt`.
"""

import os

import numpy as np
import tensorflow as tf
from google.protobuf import message

from keras_slim.image.datasets import _pipeline
from keras_slim.image.datasets.writers import ENCODED
from keras_slim.image.datasets.writers import FORMAT
from keras_slim.image.datasets.writers import LABEL
from keras_slim.image.datasets.writers import LABELS_FILENAME

# TF-Slim's shuffle of records before decoding: this many, or all.
SHUFFLE_BUFFER = 1000
#: TF-Slim's `--num_readers` default.
READERS = 4
_SCAN_BATCH = 1024

_FEATURES = {
    ENCODED: tf.io.FixedLenFeature([], tf.string),
    FORMAT: tf.io.FixedLenFeature([], tf.string, default_value=""),
    LABEL: tf.io.FixedLenFeature([], tf.int64),
}
EXPECTED_RECORD = (
    "a tf.train.Example with `image/encoded` (JPEG or PNG bytes), "
    "`image/format` (bytes) and `image/class/label` (int64)"
)


class TFRecordSource:
    """TF-Slim's shards of one split, checked and counted.

    Args:
        dataset_dir: The directory of the shards (and `labels.txt`).
        pattern: The glob of the split's shards.
        shards: The shards, sorted.
        num_classes: The dataset's classes (TF-Slim's `_NUM_CLASSES` of
            a named dataset), or `None`: `labels.txt`'s, else the largest
            label found + 1.
        channels: The channels images are decoded to. Defaults to `3`.

    Raises:
        ValueError: naming the shard, for one that cannot be read (a
            truncated or damaged one: its first record that cannot be),
            whose records are not TF-Slim's, or whose labels are out of
            range.
    """

    format = "tfrecord"
    #: What to do about an image that does not decode.
    remedy = (
        "Re-convert each shard from images that decode (TF-Slim's "
        "download_and_convert_data.py, or keras_slim.image.datasets."
        "write_tfrecords), or remove it"
    )

    def __init__(
        self, dataset_dir, pattern, shards, num_classes=None, channels=3
    ):
        self.pattern = pattern
        self.files = shards
        self.channels = channels
        self.class_names = _read_label_file(dataset_dir)
        if num_classes is not None and self.class_names is not None:
            if len(self.class_names) != num_classes:
                raise ValueError(
                    f"{os.path.join(dataset_dir, LABELS_FILENAME)!r} names "
                    f"{len(self.class_names)} classes; the dataset has "
                    f"{num_classes}. Expected one line per class, `0:<name>` "
                    f"to `{num_classes - 1}:<name>`."
                )
        for shard in shards:
            _check_first_record(shard, channels)
        counts = [_scan(shard) for shard in shards]
        self.counts = [count for count, _, _ in counts]
        self.num_samples = sum(self.counts)
        if not self.num_samples:
            raise ValueError(
                f"The TFRecord shards matching {pattern!r} hold no records: "
                f"{shards}. Expected records of {EXPECTED_RECORD}."
            )
        self.lowest_label = min(low for count, low, _ in counts if count)
        if num_classes is not None:
            self.num_classes = num_classes
        elif self.class_names is None:
            self.num_classes = max(high for _, _, high in counts) + 1
            where = f"{dataset_dir!r} (labels 0 to the largest label found)"
            _pipeline.at_least_two_classes(list(range(self.num_classes)), where)
        else:
            self.num_classes = len(self.class_names)
        for shard, (count, low, high) in zip(shards, counts):
            if count and (low < 0 or high >= self.num_classes):
                raise _label_out_of_range(
                    shard, low, high, dataset_dir, self.num_classes
                )

    def undecodable(self, suspect=None):
        """The records whose image does not decode (or that do not parse),
        each record read once, the shards in order.

        Args:
            suspect: `encoded image -> bool tensor`: decode only those
                (`_pipeline.suspects`); `None`: all.

        Returns:
            A list of `(the record and its shard, TensorFlow's message)`.
        """
        elements = tf.data.TFRecordDataset(self.files)
        found = _pipeline.undecodable(
            elements, _parse, self.num_samples, self.channels, suspect
        )
        starts = np.cumsum([0, *self.counts])
        named = []
        for position in found:
            shard = int(np.searchsorted(starts, position, side="right")) - 1
            index = position - int(starts[shard])
            named.append(
                (
                    f"record {index} of the TFRecord shard "
                    f"{self.files[shard]!r}",
                    _record_error(self.files[shard], index, self.channels),
                )
            )
        return named

    def dataset(self, pipeline, readers=READERS):
        """The split's `(images, labels)` batches, as `pipeline` makes them.

        Args:
            pipeline: The `_pipeline.Pipeline`.
            readers: Files read at a time (`--num_readers`). Defaults to
                `READERS`.

        Returns:
            A `tf.data.Dataset`.
        """
        files = tf.data.Dataset.list_files(
            self.pattern, shuffle=pipeline.is_training, seed=pipeline.seed
        )
        parallel = {}
        if parallel_reads(self.pattern):
            # In order: the same records in the same order on every run,
            # so a resumed run is the run never interrupted.
            parallel = {
                "num_parallel_calls": tf.data.AUTOTUNE,
                "deterministic": True,
            }
        records = files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(self.files), readers),
            **parallel,
        )
        # Shuffle the serialized records (small), not decoded images.
        records = pipeline.shuffle(
            records, min(self.num_samples, SHUFFLE_BUFFER)
        )
        return pipeline.finish(records, _parse)


def parallel_reads(pattern):
    """Whether the shards matching `pattern` are read by parallel calls.

    Local files are read by one thread: the interleave of `--num_readers`
    files then gives the same records in the same order as parallel
    reads, without the threads that cost a local reader 15% of its images
    per second on 2 cores (bench/input_pipeline.py). Remote files (a URL
    scheme: `gs://`, `s3://`, `hdfs://`) wait on the network: parallel.

    Args:
        pattern: The shards' glob.

    Returns:
        A bool.
    """
    return "://" in str(pattern)


def _parse(record):
    features = tf.io.parse_single_example(record, _FEATURES)
    return features[ENCODED], features[LABEL]


def _read_label_file(dataset_dir):
    """TF-Slim's `dataset_utils.read_label_file`: names by label, or None."""
    path = os.path.join(dataset_dir, LABELS_FILENAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        lines = [line.rstrip("\n") for line in f if line.strip()]
    names = {}
    for line in lines:
        label, colon, name = line.partition(":")
        if not colon or not label.strip().isdigit():
            raise ValueError(
                f"Invalid line in {path!r}: {line!r}. Expected lines "
                "`<label>:<class name>`, such as `0:daisy`."
            )
        names[int(label)] = name
    if sorted(names) != list(range(len(names))):
        raise ValueError(
            f"The labels in {path!r} are {sorted(names)}. Expected each of "
            f"0 to {len(names) - 1} once."
        )
    class_names = [names[i] for i in range(len(names))]
    _pipeline.at_least_two_classes(class_names, repr(path))
    return class_names


def _check_first_record(shard, channels):
    """Parses the first record of `shard` and decodes its image."""
    try:
        records = list(tf.data.TFRecordDataset(shard).take(1))
    except tf.errors.OpError as error:
        raise _unreadable(shard, error) from None
    if not records:
        return
    problem = _record_problem(records[0].numpy())
    if problem:
        raise ValueError(
            f"The first record of the TFRecord shard {shard!r} is {problem}. "
            f"Expected {EXPECTED_RECORD} (TF-Slim's format)."
        )
    features = tf.train.Example.FromString(records[0].numpy()).features
    try:
        tf.io.decode_image(
            features.feature[ENCODED].bytes_list.value[0],
            channels=channels,
            expand_animations=False,
        )
    except tf.errors.OpError as error:
        raise ValueError(
            f"The image of the first record of the TFRecord shard {shard!r} "
            "could not be decoded. Expected JPEG or PNG bytes in "
            f"`image/encoded`. TensorFlow said: {error.message}"
        ) from None


def _record_problem(record):
    """What keeps `record` from being a TF-Slim Example, or None."""
    try:
        example = tf.train.Example.FromString(record)
    except message.DecodeError:
        return "not a tf.train.Example"
    features = example.features.feature
    kinds = {key: features[key].WhichOneof("kind") for key in features}
    if (
        kinds.get(ENCODED) != "bytes_list"
        or len(features[ENCODED].bytes_list.value) != 1
        or kinds.get(LABEL) != "int64_list"
        or len(features[LABEL].int64_list.value) != 1
    ):
        found = ", ".join(f"{k} ({v})" for k, v in sorted(kinds.items()))
        return f"a tf.train.Example with features [{found}]"
    return None


def _record_error(shard, index, channels):
    """TensorFlow's message parsing record `index` of `shard` and decoding
    its image."""
    record = next(iter(tf.data.TFRecordDataset(shard).skip(index).take(1)))
    try:
        encoded, _ = _parse(record)
    except tf.errors.OpError as error:
        return _pipeline.said(error)
    return _pipeline.decode_error(encoded, channels)


def _unreadable(shard, error):
    """The error for a shard TensorFlow could not read: a truncated or
    damaged file (its record named), or records that are not TF-Slim's."""
    said = _pipeline.said(error)
    if isinstance(error, tf.errors.DataLossError):
        return ValueError(
            f"The TFRecord shard {shard!r} could not be read: record "
            f"{_records_before(shard)} (counting from 0) is truncated or "
            f"damaged (TensorFlow said: {said}). Re-convert the shard "
            "(TF-Slim's download_and_convert_data.py, or keras_slim.image."
            "datasets.write_tfrecords), or remove it from the directory."
        )
    return ValueError(
        f"The TFRecord shard {shard!r} could not be read: each record "
        f"should be {EXPECTED_RECORD}. TensorFlow said: {said}"
    )


def _records_before(shard):
    """The records of `shard` read before the first that cannot be."""
    count = 0
    try:
        for _ in tf.data.TFRecordDataset(shard):
            count += 1
    except tf.errors.OpError:
        pass
    return count


def _scan(shard):
    """`(records, lowest label, highest label)` of `shard`, in one read."""
    labels = (
        tf.data.TFRecordDataset(shard)
        .batch(_SCAN_BATCH)
        .map(lambda r: tf.io.parse_example(r, {LABEL: _FEATURES[LABEL]}))
        .map(lambda features: features[LABEL])
    )
    start = (
        tf.constant(0, tf.int64),
        tf.constant(np.iinfo(np.int64).max, tf.int64),
        tf.constant(np.iinfo(np.int64).min, tf.int64),
    )

    def add(state, batch):
        count, low, high = state
        return (
            count + tf.size(batch, tf.int64),
            tf.minimum(low, tf.reduce_min(batch)),
            tf.maximum(high, tf.reduce_max(batch)),
        )

    try:
        count, low, high = labels.reduce(start, add)
    except tf.errors.OpError as error:
        raise _unreadable(shard, error) from None
    except UnicodeDecodeError:
        # TensorFlow's message quoted the record's bytes.
        raise _unreadable(shard, "a record could not be parsed") from None
    return int(count), int(low), int(high)


def _label_out_of_range(shard, low, high, dataset_dir, num_classes):
    path = os.path.join(dataset_dir, LABELS_FILENAME)
    if tf.io.gfile.exists(path):
        classes = f"{path!r} names {num_classes} classes"
    else:
        classes = f"the shards of {dataset_dir!r} have {num_classes} classes"
    return ValueError(
        f"The TFRecord shard {shard!r} holds labels from {low} to {high}, "
        f"but {classes}. Expected labels from 0 to {num_classes - 1}."
    )
