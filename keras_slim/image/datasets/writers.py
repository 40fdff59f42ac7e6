"""Writing images in the layouts `keras_slim.image.datasets` reads.

TF-Slim's `download_and_convert_data.py` wrote TFRecord shards of
`tf.train.Example`s (`image/encoded`, `image/format`,
`image/class/label`) and a `labels.txt`; a folder of class subfolders is
what `keras.utils.image_dataset_from_directory` lists. `write_tfrecords`
and `write_image_folder` make either from arrays, for trying the commands
and for tests.
"""

import math
import os

import numpy as np
import tensorflow as tf

from keras_slim import _validation

SPLITS = ("train", "validation")
IMAGE_FORMATS = ("png", "jpeg")
LABELS_FILENAME = "labels.txt"

# TF-Slim's record keys.
ENCODED = "image/encoded"
FORMAT = "image/format"
LABEL = "image/class/label"


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
        split: `"train"` or `"validation"`.
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
    output_dir = _validation.path("output_dir", output_dir)
    if not isinstance(name, str) or not name:
        raise _validation.invalid("name", name, "a non-empty str")
    if split not in SPLITS:
        raise _validation.invalid("split", split, "'train' or 'validation'")
    images, labels = _images_and_labels(images, labels)
    shards = _validation.positive_int("shards", shards)
    if shards > len(images):
        raise _validation.invalid(
            "shards", shards, f"at most the {len(images)} images"
        )
    encode = _encoder(image_format)
    tf.io.gfile.makedirs(output_dir)
    per_shard = math.ceil(len(images) / shards)
    paths = []
    for i in range(shards):
        path = os.path.join(
            output_dir, f"{name}_{split}_{i:05d}-of-{shards:05d}.tfrecord"
        )
        with tf.io.TFRecordWriter(path) as writer:
            for j in range(
                i * per_shard, min((i + 1) * per_shard, len(images))
            ):
                writer.write(
                    _example(images[j], labels[j], encode, image_format)
                )
        paths.append(path)
    if class_names is not None:
        _write_label_file(class_names, output_dir)
    return paths


def _images_and_labels(images, labels):
    images = [np.asarray(image) for image in images]
    labels = [int(label) for label in labels]
    if len(images) != len(labels) or not images:
        raise ValueError(
            f"Received {len(images)} images and {len(labels)} labels. "
            "Expected as many labels as images, at least 1."
        )
    for image in images:
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise _validation.invalid(
                "images",
                f"an image of dtype {image.dtype} and shape {image.shape}",
                "uint8 images of shape [height, width, 3]",
            )
    return images, labels


def _encoder(image_format):
    if image_format not in IMAGE_FORMATS:
        raise _validation.invalid(
            "image_format", image_format, "'png' or 'jpeg'"
        )
    encode = tf.io.encode_png if image_format == "png" else tf.io.encode_jpeg
    return lambda image: encode(image).numpy()


def _example(image, label, encode, image_format):
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
    output_dir = _validation.path("output_dir", output_dir)
    images, labels = _images_and_labels(images, labels)
    class_names = list(class_names)
    bad = sorted({c for c in labels if not 0 <= c < len(class_names)})
    if bad:
        raise _validation.invalid(
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
