"""Writing images in the layouts `keras_slim.image.datasets` reads."""

import math
import os

import numpy as np
import tensorflow as tf

from keras_slim import checks
from keras_slim.image.datasets import layouts

#: The splits of a folder of class subfolders (`datasets.load`).
SPLITS = ("train", "validation")
IMAGE_FORMATS = ("png", "jpeg")
LABELS_FILENAME = "labels.txt"

# TF-Slim's record keys.
ENCODED = "image/encoded"
FORMAT = "image/format"
LABEL = "image/class/label"
CLASS_TEXT = "image/class/text"


def write_tfrecords(
    images,
    labels,
    output_dir,
    *,
    name,
    split,
    shards,
    image_format="png",
    class_names=None,
):
    """Writes images as TF-Slim's TFRecord shards, and its `labels.txt`.

    The shards are `<name>_<split>_<i:05d>-of-<shards:05d>.tfrecord`, as
    TF-Slim's download_and_convert scripts write them (consecutive images
    per shard), each record a `tf.train.Example` with `image/encoded`,
    `image/format`, `image/class/label`, `image/height` and `image/width`.

    Args:
        images: uint8 images `[height, width, 3]` (a list, or an array with
            a leading batch axis).
        labels: Integer label of each image.
        output_dir: Path of the directory to write into (created).
        name: Non-empty str: the dataset's name, first in the shard names.
        split: The split's name, second in the shard names (`"train"`,
            `"validation"`, `"test"`, ...).
        shards: Positive integer, at most the number of images.
        image_format: `"png"` (lossless) or `"jpeg"`. Defaults to `"png"`.
        class_names: List of str, the name of each label, written to
            `labels.txt` (`0:daisy`); `None` writes no `labels.txt`.

    Returns:
        The paths of the shards written, a list of str.

    Raises:
        ValueError: for a bad argument, or images and labels of different
            lengths.

    Example:
    ```python
    images = np.random.randint(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    labels = np.arange(40) % 2
    write_tfrecords(images, labels, "/tmp/mine", name="mine",
                    split="train", shards=2, class_names=["cat", "dog"])
    ```
    """
    output_dir = checks.path("output_dir", output_dir)
    if not isinstance(name, str) or not name:
        raise checks.invalid("name", name, "a non-empty str")
    if not isinstance(split, str) or not split:
        raise checks.invalid("split", split, "a split name: 'train'")
    images, labels = _images_and_labels(images, labels)
    shards = checks.positive_int("shards", shards)
    if shards > len(images):
        raise checks.invalid(
            "shards", shards, f"at most the {len(images)} images"
        )
    file_name = "{name}_{split}_{index:05d}-of-{count:05d}.tfrecord"
    paths = [
        os.path.join(
            output_dir,
            file_name.format(name=name, split=split, index=i, count=shards),
        )
        for i in range(shards)
    ]
    _write_records(images, labels, paths, image_format, class_names)
    if class_names is not None:
        _write_label_file(class_names, output_dir)
    return paths


def write_dataset(
    images,
    labels,
    output_dir,
    dataset_name,
    split,
    *,
    shards=None,
    image_format="png",
    class_names=None,
):
    """Writes a split in the layout of one of TF-Slim's datasets.

    The files are named as TF-Slim's converter for `dataset_name` names
    them (`layouts.LAYOUTS`): `flowers_train_00000-of-00005.tfrecord`,
    `cifar10_train.tfrecord`, `mnist_test.tfrecord`,
    `train-00000-of-01024` (build_imagenet_data), `val.record-00000-of-
    00010` (visualwakewords); the records are `tf.train.Example`s with
    TF-Slim's keys (`image/encoded`, `image/format`, `image/class/label`,
    `image/height`, `image/width`, and `image/class/text` where
    `class_names` are given).

    Args:
        images: uint8 images `[height, width, channels]`, 3 channels (1
            for mnist).
        labels: Integer label of each image, as the dataset numbers them
            (ImageNet: 1 to 1000, 0 the background).
        output_dir: Path of the directory to write into (created).
        dataset_name: One of `layouts.LAYOUTS`.
        split: One of the dataset's splits.
        shards: Positive integer: the files of the split; `None`: as
            many as TF-Slim's converter writes (1 for cifar10 and mnist,
            whose layout is one file). Defaults to `None`.
        image_format: `"png"` or `"jpeg"`. Defaults to `"png"`.
        class_names: The name of each label (`labels.txt`, `0:daisy`, and
            each record's `image/class/text`); `None` writes neither.

    Returns:
        The paths of the files written, a list of str.

    Raises:
        ValueError: for a bad argument, an unknown `dataset_name`, a
            split the dataset does not have, images of the wrong channels.

    Example:
    ```python
    images = np.random.randint(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    write_dataset(images, np.arange(40) % 10, "/tmp/cifar10", "cifar10",
                  "train", class_names=[str(i) for i in range(10)])
    ```
    """
    output_dir = checks.path("output_dir", output_dir)
    if dataset_name not in layouts.LAYOUTS:
        raise checks.invalid(
            "dataset_name",
            dataset_name,
            f"one of {', '.join(map(repr, layouts.LAYOUTS))}",
        )
    layout = layouts.LAYOUTS[dataset_name]
    layout.check_split(split)
    images, labels = _images_and_labels(images, labels, layout.channels)
    one_file = "{index" not in layout.file_name
    count = 1 if one_file else shards or layout.shards(split)
    count = checks.positive_int("shards", count)
    if one_file and shards not in (None, 1):
        raise checks.invalid(
            "shards", shards, f"None or 1: {dataset_name} is one file a split"
        )
    count = min(count, len(images))
    paths = [
        os.path.join(
            output_dir,
            layout.file_name.format(split=split, index=i, count=count),
        )
        for i in range(count)
    ]
    _write_records(images, labels, paths, image_format, class_names)
    if class_names is not None:
        _write_label_file(class_names, output_dir)
    return paths


def _write_records(images, labels, paths, image_format, class_names):
    """Writes consecutive images to each path, as TF-Slim's converters."""
    encode = _encoder(image_format)
    for path in paths:
        tf.io.gfile.makedirs(os.path.dirname(path))
    per_file = math.ceil(len(images) / len(paths))
    for i, path in enumerate(paths):
        with tf.io.TFRecordWriter(path) as writer:
            for j in range(i * per_file, min((i + 1) * per_file, len(images))):
                text = None if class_names is None else class_names[labels[j]]
                writer.write(
                    _example(images[j], labels[j], encode, image_format, text)
                )


def _images_and_labels(images, labels, channels=3):
    images = [np.asarray(image) for image in images]
    labels = [int(label) for label in labels]
    if len(images) != len(labels) or not images:
        raise ValueError(
            f"Received {len(images)} images and {len(labels)} labels. "
            "Expected as many labels as images, at least 1."
        )
    for image in images:
        if (
            image.dtype != np.uint8
            or image.ndim != 3
            or image.shape[2] != channels
        ):
            raise checks.invalid(
                "images",
                f"an image of dtype {image.dtype} and shape {image.shape}",
                f"uint8 images of shape [height, width, {channels}]",
            )
    return images, labels


def _encoder(image_format):
    if image_format not in IMAGE_FORMATS:
        raise checks.invalid("image_format", image_format, "'png' or 'jpeg'")
    encode = tf.io.encode_png if image_format == "png" else tf.io.encode_jpeg
    return lambda image: encode(image).numpy()


def _example(image, label, encode, image_format, text=None):
    def feature(**kind):
        return tf.train.Feature(**kind)

    features = {
        ENCODED: feature(bytes_list=tf.train.BytesList(value=[encode(image)])),
        FORMAT: feature(
            bytes_list=tf.train.BytesList(value=[image_format.encode()])
        ),
        LABEL: feature(int64_list=tf.train.Int64List(value=[label])),
        "image/height": feature(
            int64_list=tf.train.Int64List(value=[image.shape[0]])
        ),
        "image/width": feature(
            int64_list=tf.train.Int64List(value=[image.shape[1]])
        ),
    }
    if text is not None:
        features[CLASS_TEXT] = feature(
            bytes_list=tf.train.BytesList(value=[text.encode()])
        )
    example = tf.train.Example(features=tf.train.Features(feature=features))
    return example.SerializeToString()


def _write_label_file(class_names, output_dir):
    """TF-Slim's `dataset_utils.write_label_file`: lines `0:daisy`."""
    path = os.path.join(output_dir, LABELS_FILENAME)
    with tf.io.gfile.GFile(path, "w") as f:
        for label, class_name in enumerate(class_names):
            f.write(f"{label}:{class_name}\n")


def write_image_folder(
    images, labels, output_dir, *, class_names, image_format="png"
):
    """Writes images as a folder of class subfolders, as `load` reads them.

    Image `i` of label `c` goes to `output_dir/<class_names[c]>/
    <i:05d>.png` (or `.jpg`).

    Args:
        images: uint8 images `[height, width, 3]` (a list, or an array with
            a leading batch axis).
        labels: Integer label of each image, an index into `class_names`.
        output_dir: Path of the directory to write into (created).
        class_names: List of str: the subfolder of each label.
        image_format: `"png"` (lossless) or `"jpeg"`. Defaults to `"png"`.

    Returns:
        The paths of the images written, a list of str.

    Raises:
        ValueError: for a bad argument, images and labels of different
            lengths, or a label that is not an index into `class_names`.

    Example:
    ```python
    images = np.random.randint(0, 256, (40, 32, 32, 3), dtype=np.uint8)
    write_image_folder(images, np.arange(40) % 2, "/tmp/mine",
                       class_names=["cat", "dog"])
    ```
    """
    output_dir = checks.path("output_dir", output_dir)
    images, labels = _images_and_labels(images, labels)
    class_names = list(class_names)
    bad = sorted({c for c in labels if not 0 <= c < len(class_names)})
    if bad:
        raise checks.invalid(
            "labels",
            bad,
            f"indices into the {len(class_names)} class_names",
        )
    encode = _encoder(image_format)
    extension = ".png" if image_format == "png" else ".jpg"
    for class_name in class_names:
        tf.io.gfile.makedirs(os.path.join(output_dir, class_name))
    paths = []
    for i, (image, label) in enumerate(zip(images, labels)):
        path = os.path.join(
            output_dir, class_names[label], f"{i:05d}{extension}"
        )
        with tf.io.gfile.GFile(path, "wb") as f:
            f.write(encode(image))
        paths.append(path)
    return paths
