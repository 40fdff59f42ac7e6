"""A user's images as a tf.data pipeline: TF-Slim's TFRecords or folders.

`load(dataset_dir, split, ...)` finds the images of one split in one of
two formats, detected from what `dataset_dir` holds:

- **TFRecord, TF-Slim's format** (`"tfrecord"`): shards named
  `<name>_<split>_*.tfrecord` (TF-Slim's `flowers_train_00000-of-00005`),
  each record a `tf.train.Example` with `image/encoded` (JPEG or PNG
  bytes), `image/format` (`b"jpeg"` or `b"png"`) and `image/class/label`
  (int64); `image/height` and `image/width` may be there and are not
  read. A `labels.txt` beside the shards (TF-Slim's
  `dataset_utils.write_label_file`, lines `0:daisy`) names the classes;
  without it, the classes are numbered 0 to the largest label found.
  Shards are read with `tf.data.Dataset.list_files` and
  `tf.data.TFRecordDataset` (interleaved, up to 4 at a time), records
  parsed with `tf.io.parse_single_example`.
- **A folder of class subfolders** (`"folder"`): `dataset_dir/<class>/`
  holding `.jpg`, `.jpeg`, `.png`, `.bmp` or `.gif` files (subfolders
  below a class count as that class). Keras's
  `keras.utils.image_dataset_from_directory` lists the files and the
  class names (the sorted subfolder names); it decodes nothing here;
  the split is Keras's `validation_split`: the files in its seeded
  shuffled order, the last `validation_fraction` of them for
  `"validation"`, so the same `seed` gives Keras's `subset="validation"`.
  When `dataset_dir/train` and `dataset_dir/validation` both exist, they
  are the splits instead, each a folder of class subfolders.

Both formats then share one path: `tf.io.decode_image` (3 channels),
`keras_slim.preprocessing` (TF-Slim's preprocessing_factory, random crops
in training), one-hot labels, batches, prefetch. Training data is
shuffled (files, then records or paths; reshuffled each epoch, seeded),
repeated and batched with `drop_remainder=True`; eval data is one pass in
a fixed order (a folder's files sorted by path; shards interleaved
deterministically) with the last, smaller batch kept. Each element's
random crop and flip are seeded with `[seed, its index in the stream]`,
so epochs differ.

What `load` checks before it returns, so before a training step: the
directory, the format, at least 2 classes, the first record of each
shard (parsed and its image decoded), the framing and labels of every
record (counting the records reads every shard once, parsing only the
labels: as long as reading the bytes, minutes for ImageNet's 140 GB),
the first image of each class folder. An
image that cannot be decoded deeper in a shard or a folder is not
checked: reading it fails with TensorFlow's `InvalidArgumentError`; it
is never dropped silently.

`write_tfrecords` and `write_image_folder` write a dataset in either
format from numpy images: the way to make one for trying the command.
"""

import dataclasses
import os

import keras
import numpy as np
import tensorflow as tf
from google.protobuf import message

from keras_slim import _validation
from keras_slim import preprocessing
from keras_slim._image_writers import _ENCODED
from keras_slim._image_writers import _FORMAT
from keras_slim._image_writers import _LABEL
from keras_slim._image_writers import IMAGE_FORMATS
from keras_slim._image_writers import LABELS_FILENAME
from keras_slim._image_writers import SPLITS
from keras_slim._image_writers import write_image_folder
from keras_slim._image_writers import write_tfrecords

__all__ = [
    "CHANNELS",
    "FORMATS",
    "IMAGE_EXTENSIONS",
    "IMAGE_FORMATS",
    "ImageData",
    "LABELS_FILENAME",
    "SPLITS",
    "load",
    "write_image_folder",
    "write_tfrecords",
]

FORMATS = ("folder", "tfrecord")
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")
CHANNELS = 3

# TF-Slim's shuffle of records before decoding: this many, or all.
SHUFFLE_BUFFER = 1000
_MAX_PARALLEL_SHARDS = 4
_SCAN_BATCH = 1024

_FEATURES = {
    _ENCODED: tf.io.FixedLenFeature([], tf.string),
    _FORMAT: tf.io.FixedLenFeature([], tf.string, default_value=""),
    _LABEL: tf.io.FixedLenFeature([], tf.int64),
}
_EXPECTED_RECORD = (
    "a tf.train.Example with `image/encoded` (JPEG or PNG bytes), "
    "`image/format` (bytes) and `image/class/label` (int64)"
)


@dataclasses.dataclass(frozen=True)
class ImageData:
    """The images of one split, as `load` returns them.

    Attributes:
        dataset: A `tf.data.Dataset` of `(images, labels)`: float32
            `[batch, image_size, image_size, 3]` and one-hot float32
            `[batch, num_classes]`.
        num_samples: Integer: the images in the split (one epoch).
        num_classes: Integer: the width of the one-hot labels.
        class_names: The class of each label, a list of str; `None` for
            TFRecords without `labels.txt`.
        format: `"folder"` or `"tfrecord"`.
        channels: Integer: the channels of the images (3).
        files: Tuple of str: the shards (TFRecord) or image files (folder)
            of the split, in the order eval reads them.

    Example:
    ```python
    data = image_data.load("/tmp/flowers", "train", image_size=224,
                           batch_size=32, is_training=True,
                           preprocessing_name="inception")
    model.fit(data.dataset, steps_per_epoch=data.num_samples // 32)
    ```
    """

    dataset: tf.data.Dataset
    num_samples: int
    num_classes: int
    class_names: list | None
    format: str
    channels: int
    files: tuple


def load(
    dataset_dir,
    split,
    *,
    image_size,
    batch_size,
    is_training,
    preprocessing_name,
    seed=0,
    validation_fraction=0.2,
):
    """Reads the images of `split` from `dataset_dir` into a tf.data pipeline.

    See the module's docstring for the two formats and what is checked.

    Args:
        dataset_dir: Path of TF-Slim TFRecord shards with `labels.txt`, or
            of class subfolders (or of `train/` and `validation/`, each of
            class subfolders).
        split: `"train"` or `"validation"`.
        image_size: Positive integer: the side of the square images.
        batch_size: Positive integer.
        is_training: Boolean. `True`: shuffled, repeated, batches of
            exactly `batch_size`, augmented; `False`: one pass in order,
            the last batch smaller.
        preprocessing_name: One of `keras_slim.preprocessing.PREPROCESSING`.
        seed: Integer: the seed of the shuffles, random crops and flips,
            and of a folder's train/validation split. Defaults to `0`.
        validation_fraction: Float in (0, 1): the part of a folder's files
            that is `"validation"` (not used for TFRecords or `train/` and
            `validation/` subfolders). Defaults to `0.2`.

    Returns:
        An `ImageData`.

    Raises:
        ValueError: for a bad argument; when `dataset_dir` is not a
            directory, holds neither shards of the split nor class
            subfolders with images, or fewer than 2 classes; for a shard
            that is not a TFRecord file, whose first record is not a
            TF-Slim `tf.train.Example` (or its image cannot be decoded), a
            record without a label or with a label outside the classes, a
            malformed `labels.txt`; for a class's first image file that
            cannot be decoded, `train/` and `validation/` subfolders with
            different classes, a `validation_fraction` that leaves no
            validation image; when `batch_size` is larger than the images
            of a training split.

    Example:
    ```python
    data = image_data.load("/tmp/flowers", "validation", image_size=224,
                           batch_size=100, is_training=False,
                           preprocessing_name="inception")
    model.evaluate(data.dataset)
    ```
    """
    dataset_dir = _validation.path("dataset_dir", dataset_dir)
    _check_arguments(split, batch_size, seed, validation_fraction)
    preprocess = preprocessing.get_preprocessing(
        preprocessing_name, is_training=is_training, image_size=image_size
    )
    if not tf.io.gfile.isdir(dataset_dir):
        what = "does not exist"
        if tf.io.gfile.exists(dataset_dir):
            what = "is not a directory"
        raise ValueError(
            "Invalid value for argument `dataset_dir`. Received: "
            f"dataset_dir={dataset_dir!r}, which {what}. Expected a "
            "directory of TFRecord shards or of class subfolders."
        )
    source = _find(dataset_dir, split, int(seed), validation_fraction)
    if is_training and batch_size > source.num_samples:
        raise ValueError(
            f"Invalid value for argument `batch_size`. Received: "
            f"batch_size={batch_size}, larger than the {source.num_samples} "
            f"images of split {split!r} in {dataset_dir!r}. Expected at "
            f"most {source.num_samples} (training drops the last, smaller "
            "batch)."
        )
    pipeline = _Pipeline(
        preprocess=preprocess,
        num_classes=source.num_classes,
        batch_size=int(batch_size),
        is_training=is_training,
        seed=int(seed),
    )
    return ImageData(
        dataset=source.dataset(pipeline),
        num_samples=source.num_samples,
        num_classes=source.num_classes,
        class_names=source.class_names,
        format=source.format,
        channels=CHANNELS,
        files=tuple(source.files),
    )


def _check_arguments(split, batch_size, seed, validation_fraction):
    if split not in SPLITS:
        raise _validation.invalid("split", split, "'train' or 'validation'")
    _validation.positive_int("batch_size", batch_size)
    if not _validation.is_int(seed) or seed < 0:
        raise _validation.invalid("seed", seed, "a non-negative integer")
    if not isinstance(validation_fraction, float) or not (
        0.0 < validation_fraction < 1.0
    ):
        raise _validation.invalid(
            "validation_fraction", validation_fraction, "a float in (0, 1)"
        )


def _find(dataset_dir, split, seed, validation_fraction):
    """The split's source in `dataset_dir`: shards first, then folders."""
    pattern = os.path.join(dataset_dir, f"*_{split}_*.tfrecord")
    shards = sorted(tf.io.gfile.glob(pattern))
    if shards:
        return _TFRecordSource(dataset_dir, pattern, shards)
    train = os.path.join(dataset_dir, "train")
    validation = os.path.join(dataset_dir, "validation")
    if tf.io.gfile.isdir(train) and tf.io.gfile.isdir(validation):
        return _FolderSource.of_split_folders(train, validation, split, seed)
    if _class_folders(dataset_dir):
        return _FolderSource.of_fraction(
            dataset_dir, split, seed, validation_fraction
        )
    raise ValueError(
        f"No images of split {split!r} found in {dataset_dir!r}. Looked for "
        f"TFRecord shards matching {pattern!r} and for class subfolders "
        f"holding images ({', '.join(IMAGE_EXTENSIONS)}); found "
        f"{_listing(dataset_dir)}. Expected TF-Slim's shards or "
        "`<dataset_dir>/<class>/<image>` files (`keras_slim.image_data."
        "write_tfrecords` and `write_image_folder` write either)."
    )


def _listing(directory, limit=10):
    names = sorted(tf.io.gfile.listdir(directory))
    if not names:
        return "an empty directory"
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} entries)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def _is_image(filename):
    return filename.lower().endswith(IMAGE_EXTENSIONS)


def _subfolders(directory):
    """Non-hidden subfolders, sorted: Keras's classes."""
    return sorted(
        name.rstrip("/")
        for name in tf.io.gfile.listdir(directory)
        if not name.startswith(".")
        and tf.io.gfile.isdir(os.path.join(directory, name))
    )


def _class_folders(directory):
    """The subfolders of `directory` if any of them holds an image."""
    folders = _subfolders(directory)
    for folder in folders:
        for _, _, files in tf.io.gfile.walk(os.path.join(directory, folder)):
            if any(_is_image(f) for f in files):
                return folders
    return []


def _at_least_two_classes(class_names, where):
    if len(class_names) < 2:
        raise ValueError(
            f"Found {len(class_names)} class{'es' if not class_names else ''} "
            f"in {where}: {class_names}. "
            "Expected at least 2 classes to classify."
        )


class _Pipeline:
    """The steps both formats share, from encoded images and int labels."""

    def __init__(self, preprocess, num_classes, batch_size, is_training, seed):
        self.preprocess = preprocess
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.is_training = is_training
        self.seed = seed

    def shuffle(self, data, buffer_size):
        """Shuffles and repeats in training; one pass otherwise."""
        if not self.is_training:
            return data
        data = data.shuffle(
            buffer_size, seed=self.seed, reshuffle_each_iteration=True
        )
        return data.repeat()

    def finish(self, data, fetch):
        """Elements -> batches of `(images, one_hot)`.

        `fetch(element)` returns `(encoded image, label)`: it runs in the
        parallel map, as reading a file or parsing a record should.
        """

        def element(index, source):
            encoded, label = fetch(source)
            image = tf.io.decode_image(
                encoded, channels=CHANNELS, expand_animations=False
            )
            seed = tf.stack([tf.constant(self.seed, tf.int64), index])
            return self.preprocess(image, seed=seed), label

        def one_hot(images, labels):
            return images, tf.one_hot(labels, self.num_classes, dtype="float32")

        # Index the elements after the repeat: each epoch's crops differ.
        data = data.enumerate().map(
            element, num_parallel_calls=tf.data.AUTOTUNE
        )
        data = data.batch(self.batch_size, drop_remainder=self.is_training)
        # One op per batch, not per image.
        data = data.map(one_hot, num_parallel_calls=tf.data.AUTOTUNE)
        return data.prefetch(tf.data.AUTOTUNE)


class _TFRecordSource:
    """TF-Slim's shards of one split, checked and counted."""

    format = "tfrecord"

    def __init__(self, dataset_dir, pattern, shards):
        self.pattern = pattern
        self.files = shards
        self.class_names = _read_label_file(dataset_dir)
        for shard in shards:
            _check_first_record(shard)
        counts = [_scan(shard) for shard in shards]
        self.num_samples = sum(count for count, _, _ in counts)
        if not self.num_samples:
            raise ValueError(
                f"The TFRecord shards matching {pattern!r} hold no records: "
                f"{shards}. Expected records of {_EXPECTED_RECORD}."
            )
        if self.class_names is None:
            self.num_classes = max(high for _, _, high in counts) + 1
            where = f"{dataset_dir!r} (labels 0 to the largest label found)"
            _at_least_two_classes(list(range(self.num_classes)), where)
        else:
            self.num_classes = len(self.class_names)
        for shard, (count, low, high) in zip(shards, counts):
            if count and (low < 0 or high >= self.num_classes):
                raise _label_out_of_range(
                    shard, low, high, dataset_dir, self.num_classes
                )

    def dataset(self, pipeline):
        files = tf.data.Dataset.list_files(
            self.pattern, shuffle=pipeline.is_training, seed=pipeline.seed
        )
        records = files.interleave(
            tf.data.TFRecordDataset,
            cycle_length=min(len(self.files), _MAX_PARALLEL_SHARDS),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=not pipeline.is_training,
        )
        # Shuffle the serialized records (small), not decoded images.
        records = pipeline.shuffle(
            records, min(self.num_samples, SHUFFLE_BUFFER)
        )
        return pipeline.finish(records, _parse)


def _parse(record):
    features = tf.io.parse_single_example(record, _FEATURES)
    return features[_ENCODED], features[_LABEL]


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
    _at_least_two_classes(class_names, repr(path))
    return class_names


def _check_first_record(shard):
    """Parses the first record of `shard` and decodes its image."""
    try:
        records = list(tf.data.TFRecordDataset(shard).take(1))
    except tf.errors.OpError as error:
        raise _unreadable(shard, error.message) from None
    if not records:
        return
    problem = _record_problem(records[0].numpy())
    if problem:
        raise ValueError(
            f"The first record of the TFRecord shard {shard!r} is {problem}. "
            f"Expected {_EXPECTED_RECORD} (TF-Slim's format)."
        )
    features = tf.train.Example.FromString(records[0].numpy()).features
    try:
        tf.io.decode_image(
            features.feature[_ENCODED].bytes_list.value[0],
            channels=CHANNELS,
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
        kinds.get(_ENCODED) != "bytes_list"
        or len(features[_ENCODED].bytes_list.value) != 1
        or kinds.get(_LABEL) != "int64_list"
        or len(features[_LABEL].int64_list.value) != 1
    ):
        found = ", ".join(f"{k} ({v})" for k, v in sorted(kinds.items()))
        return f"a tf.train.Example with features [{found}]"
    return None


def _unreadable(shard, said):
    return ValueError(
        f"The TFRecord shard {shard!r} could not be read: each record "
        f"should be {_EXPECTED_RECORD}. TensorFlow said: {said}"
    )


def _scan(shard):
    """`(records, lowest label, highest label)` of `shard`, in one read."""
    labels = (
        tf.data.TFRecordDataset(shard)
        .batch(_SCAN_BATCH)
        .map(lambda r: tf.io.parse_example(r, {_LABEL: _FEATURES[_LABEL]}))
        .map(lambda features: features[_LABEL])
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
        raise _unreadable(shard, error.message) from None
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


class _FolderSource:
    """Image files in class subfolders, listed by Keras."""

    format = "folder"

    def __init__(self, files, labels, class_names):
        # Sorted by path: eval's order; training shuffles all of them.
        order = sorted(range(len(files)), key=files.__getitem__)
        self.files = [files[i] for i in order]
        self.labels = [labels[i] for i in order]
        self.class_names = class_names
        self.num_classes = len(class_names)
        self.num_samples = len(files)

    @classmethod
    def of_fraction(cls, directory, split, seed, validation_fraction):
        """Keras's `validation_split` of one folder of class subfolders."""
        files, labels, class_names = _list_images(directory, seed)
        num_validation = int(validation_fraction * len(files))
        if split == "validation" and not num_validation:
            raise ValueError(
                f"Invalid value for argument `validation_fraction`. "
                f"Received: validation_fraction={validation_fraction}, "
                f"which leaves no validation image of the {len(files)} in "
                f"{directory!r}. Expected at least 1 / {len(files)}, or "
                "`train/` and `validation/` subfolders."
            )
        cut = len(files) - num_validation
        if split == "train":
            return cls(files[:cut], labels[:cut], class_names)
        return cls(files[cut:], labels[cut:], class_names)

    @classmethod
    def of_split_folders(cls, train, validation, split, seed):
        """`dataset_dir/train` and `dataset_dir/validation`, as splits."""
        folders = {"train": train, "validation": validation}
        names = {s: _subfolders(d) for s, d in folders.items()}
        if names["train"] != names["validation"]:
            raise ValueError(
                f"The class subfolders of {train!r} ({names['train']}) and "
                f"of {validation!r} ({names['validation']}) differ. Expected "
                "the same classes in both."
            )
        return cls(*_list_images(folders[split], seed))

    def dataset(self, pipeline):
        paths = tf.data.Dataset.from_tensor_slices(
            (self.files, np.asarray(self.labels, np.int64))
        )
        # Paths are small: shuffle all of them.
        paths = pipeline.shuffle(paths, self.num_samples)
        return pipeline.finish(paths, _read)


def _read(path_and_label):
    path, label = path_and_label
    return tf.io.read_file(path), label


def _list_images(directory, seed):
    """`(files, labels, class_names)` of `directory`, Keras's seeded order.

    Checks that there are at least 2 classes and that the first image
    (sorted by path) of each class decodes.
    """
    if not _class_folders(directory):
        raise ValueError(
            f"No class subfolders holding images ("
            f"{', '.join(IMAGE_EXTENSIONS)}) found in {directory!r}; found "
            f"{_listing(directory)}. Expected `{directory}/<class>/<image>`."
        )
    listed = keras.utils.image_dataset_from_directory(
        directory,
        labels="inferred",
        label_mode="int",
        batch_size=None,
        shuffle=True,
        seed=seed,
        verbose=False,
    )
    class_names = list(listed.class_names)
    _at_least_two_classes(class_names, f"{directory!r} (its subfolders)")
    files = list(listed.file_paths)
    labels = [_class_of(f, directory, class_names) for f in files]
    for label in range(len(class_names)):
        of_class = sorted(f for f, c in zip(files, labels) if c == label)
        if of_class:
            _check_image_file(of_class[0])
    return files, labels, class_names


def _class_of(path, directory, class_names):
    """The label of `path`: its subfolder of `directory`, as Keras's."""
    relative = os.path.relpath(path, directory)
    return class_names.index(relative.split(os.sep)[0])


def _check_image_file(path):
    try:
        tf.io.decode_image(
            tf.io.read_file(path), channels=CHANNELS, expand_animations=False
        )
    except tf.errors.OpError as error:
        raise ValueError(
            f"The image file {path!r} could not be decoded. Expected a "
            f"JPEG, PNG, BMP or GIF image. TensorFlow said: {error.message}"
        ) from None
