"""TF-Slim's `dataset_factory`: a split of images as a tf.data pipeline."""

import dataclasses
import os

import tensorflow as tf

from keras_slim import checks
from keras_slim.image import preprocessing
from keras_slim.image.datasets import _augment
from keras_slim.image.datasets import _pipeline
from keras_slim.image.datasets import folders
from keras_slim.image.datasets import layouts
from keras_slim.image.datasets import tfrecords
from keras_slim.image.datasets.folders import IMAGE_EXTENSIONS
from keras_slim.image.datasets.writers import IMAGE_FORMATS
from keras_slim.image.datasets.writers import LABELS_FILENAME
from keras_slim.image.datasets.writers import SPLITS

__all__ = [
    "CHANNELS",
    "FORMATS",
    "IMAGE_EXTENSIONS",
    "IMAGE_FORMATS",
    "DamagedImageError",
    "ImageData",
    "LABELS_FILENAME",
    "MissingSplitError",
    "SPLITS",
    "load",
]

FORMATS = ("folder", "tfrecord")
CHANNELS = _pipeline.CHANNELS


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
    data = datasets.load("/tmp/flowers", "train", image_size=224,
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
    _source: object = dataclasses.field(default=None, repr=False)

    def check_images(self, error=None):
        """Decodes the split's images, each once, and raises naming those
        that do not decode.

        `load` decodes the first image of each shard or class folder; an
        image deeper in fails when `dataset` reads it, with TensorFlow's
        `InvalidArgumentError`, which does not say which image. Catch it
        and call this with it: the error names the files (or the records
        and their shards). Without `error`, every image is decoded (one
        pass over the split, in parallel): a check before training.

        Args:
            error: The `tf.errors.InvalidArgumentError` a read of
                `dataset` raised, or `None`. When its message gives the
                size of the image (`Invalid JPEG data ..., data size
                1234`), only images of that size are decoded; when it
                says `Unknown image file format`, only those that start
                as no format TensorFlow reads; else (or if none of those
                fails) every image.
                Defaults to `None`.

        Raises:
            DamagedImageError: naming each image that does not decode,
                with TensorFlow's message and what to do.

        Example:
        ```python
        try:
            model.fit(data.dataset, steps_per_epoch=100)
        except tf.errors.InvalidArgumentError as error:
            data.check_images(error)  # raises DamagedImageError
            raise  # not an image
        ```
        """
        suspect = None
        if error is not None:
            suspect = _pipeline.suspects(_pipeline.said(error))
        found = self._source.undecodable(suspect)
        if not found and suspect is not None:
            found = self._source.undecodable()
        if found:
            raise DamagedImageError(found, self._source.remedy)


class MissingSplitError(ValueError):
    """`dataset_dir` holds no images of the split asked for (neither
    TF-Slim's shards of it nor class subfolders)."""


class DamagedImageError(ValueError):
    """Images of a dataset that do not decode, named.

    Raised by `ImageData.check_images` (and by `keras-slim-train` and
    `keras-slim-eval` when a read of their data failed on an image):
    images are never skipped, which would change what is trained on and
    what a resumed run reads.

    Args:
        found: A list of `(where, TensorFlow's message)`: a file, or a
            record and its shard.
        remedy: What to do, a sentence without its full stop.

    Attributes:
        found: As given.

    Example:
    ```python
    try:
        data.check_images()
    except datasets.DamagedImageError as error:
        print([where for where, _ in error.found])
    ```
    """

    def __init__(self, found, remedy):
        self.found = list(found)
        self.remedy = remedy
        lines = [f"  {where}: {said}" for where, said in self.found[:10]]
        if len(self.found) > 10:
            lines.append(f"  ... ({len(self.found) - 10} more)")
        count = len(self.found)
        what = "image does" if count == 1 else "images do"
        super().__init__(
            f"{count} {what} not decode:\n" + "\n".join(lines) + f"\n{remedy}"
            ", then rerun. Images are not skipped: a skipped image would "
            "change what is trained on."
        )

    def __reduce__(self):
        return (type(self), (self.found, self.remedy))


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
    dataset_name=None,
    labels_offset=0,
    num_readers=tfrecords.READERS,
    num_preprocessing_threads=None,
    use_grayscale=False,
    randaugment=None,
    mixup_alpha=0.0,
    cutmix_alpha=0.0,
):
    """Reads the images of `split` from `dataset_dir` into a tf.data pipeline.

    See the module's docstring for the two formats and what is checked.

    Args:
        dataset_dir: Path of TF-Slim TFRecord shards with `labels.txt`, or
            of class subfolders (or of `train/` and `validation/`, each of
            class subfolders).
        split: The split's name: one of the dataset's splits (its
            `layouts.Layout`), or for other names the `<split>` of its file
            names; folders have `"train"` and `"validation"`.
        image_size: Positive integer: the side of the square images.
        batch_size: Positive integer.
        is_training: Boolean. `True`: shuffled, repeated, batches of
            exactly `batch_size`, augmented; `False`: one pass in order,
            the last batch smaller.
        preprocessing_name: One of `preprocessing.PREPROCESSING`
            (TF-Slim's preprocessing_factory names, and `"digits"`).
        seed: Integer: the seed of the shuffles, random crops and flips,
            and of a folder's train/validation split. Defaults to `0`.
        validation_fraction: Float in (0, 1): the part of a folder's files
            that is `"validation"` (not used for TFRecords or `train/` and
            `validation/` subfolders). Defaults to `0.2`.
        dataset_name: One of TF-Slim's dataset names (`layouts.LAYOUTS`:
            its file names, splits, classes and channels), or `None` (or
            any other name) for `layouts.GENERIC`. Defaults to `None`.
        labels_offset: Non-negative integer subtracted from every label,
            and from the classes (TF-Slim's `--labels_offset`: 1 reads
            ImageNet's 1001 labels for a 1000-class net). Defaults to `0`.
        num_readers: Positive integer: TFRecord files read at a time, in
            order. Defaults to `4` (TF-Slim's).
        num_preprocessing_threads: Positive integer: parallel decode and
            preprocessing calls; `None`: tf.data's autotune. Defaults to
            `None`.
        use_grayscale: Converts the images to one channel inside the
            preprocessing, where TF-Slim's family converts them
            (`--use_grayscale`; `get_preprocessing(...,
            use_grayscale=True)`); images of one channel stay as they are.
            Defaults to `False`.
        randaugment: `(num_ops, magnitude)` (training only): Keras's
            `RandAugment(value_range=(0, 255), num_ops=num_ops,
            factor=magnitude / 10)` on each decoded image, before the
            preprocessing (timm's `rand-mM-nN`: `num_ops` in [1, 11],
            `magnitude` in [0, 10]), seeded with `[seed, its index in the
            stream]` as the preprocessing. Defaults to `None` (off).
        mixup_alpha: Non-negative float (training only): Keras's
            `MixUp(alpha=mixup_alpha)` on each batch, seeded with `[seed,
            the batch's index in the stream]`; labels become soft.
            Defaults to `0.0` (off).
        cutmix_alpha: Float in [0, 1] (training only): Keras's
            `CutMix` with Beta(`cutmix_alpha`, `cutmix_alpha`), the label
            weight the pasted pixels' fraction; with `mixup_alpha`, each
            batch is one or the other (0.5 each). Defaults to `0.0` (off).

    Returns:
        An `ImageData`.

    Raises:
        MissingSplitError: (a `ValueError`) when `dataset_dir` holds
            neither files of the split nor class subfolders with images.
        ValueError: for a bad argument; when `dataset_dir` is not a
            directory, or fewer than 2 classes; for a shard
            that is not a TFRecord file, whose first record is not a
            TF-Slim `tf.train.Example` (or its image cannot be decoded), a
            record without a label or with a label outside the classes, a
            malformed `labels.txt`; for a class's first image file that
            cannot be decoded, `train/` and `validation/` subfolders with
            different classes, a `validation_fraction` that leaves no
            validation image; when `batch_size` is larger than the images
            of a training split; for a split the named dataset does not
            have; for labels below `labels_offset`; for a truncated or
            damaged shard (naming its first unreadable record); for
            `randaugment`, `mixup_alpha` or `cutmix_alpha` out of range
            or set for an eval split (`is_training=False`).

    Example:
    ```python
    data = datasets.load("/tmp/flowers", "validation", image_size=224,
                           batch_size=100, is_training=False,
                           preprocessing_name="inception")
    model.evaluate(data.dataset)
    ```
    """
    dataset_dir = checks.path("dataset_dir", dataset_dir)
    _check_arguments(split, batch_size, seed, validation_fraction)
    layout = layouts.layout(dataset_name)
    layout.check_split(split)
    labels_offset = checks.non_negative_int("labels_offset", labels_offset)
    num_readers = checks.positive_int("num_readers", num_readers)
    if num_preprocessing_threads is not None:
        checks.positive_int(
            "num_preprocessing_threads", num_preprocessing_threads
        )
    image_size = checks.positive_int("image_size", image_size)
    augmentation = _augment.from_arguments(
        is_training,
        randaugment=randaugment,
        mixup_alpha=mixup_alpha,
        cutmix_alpha=cutmix_alpha,
    )
    preprocessing.get_preprocessing(
        preprocessing_name,
        is_training=is_training,
        use_grayscale=checks.boolean("use_grayscale", use_grayscale),
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
    source = _find(dataset_dir, split, int(seed), validation_fraction, layout)
    num_classes = _offset_classes(source, labels_offset, dataset_dir)
    if is_training and batch_size > source.num_samples:
        raise ValueError(
            f"Invalid value for argument `batch_size`. Received: "
            f"batch_size={batch_size}, larger than the {source.num_samples} "
            f"images of split {split!r} in {dataset_dir!r}. Expected at "
            f"most {source.num_samples} (training drops the last, smaller "
            "batch)."
        )
    grayscale = use_grayscale and source.channels == 3
    pipeline = _pipeline.Pipeline(
        preprocess=preprocessing.get_preprocessing(
            preprocessing_name,
            is_training=is_training,
            use_grayscale=grayscale,
        ),
        image_size=image_size,
        num_classes=num_classes,
        batch_size=int(batch_size),
        is_training=is_training,
        seed=int(seed),
        channels=source.channels,
        labels_offset=labels_offset,
        parallel_calls=num_preprocessing_threads,
        augmentation=augmentation,
    )
    class_names = source.class_names
    if class_names is not None:
        class_names = class_names[labels_offset:]
    return ImageData(
        dataset=source.dataset(pipeline, readers=num_readers),
        num_samples=source.num_samples,
        num_classes=num_classes,
        class_names=class_names,
        format=source.format,
        channels=1 if use_grayscale else source.channels,
        files=tuple(source.files),
        _source=source,
    )


def _offset_classes(source, labels_offset, dataset_dir):
    """The classes after `labels_offset`; raises for labels below it."""
    if source.lowest_label < labels_offset:
        raise ValueError(
            f"Invalid value for argument `labels_offset`. Received: "
            f"labels_offset={labels_offset}, but the images in "
            f"{dataset_dir!r} have labels from {source.lowest_label}. "
            f"Expected at most {source.lowest_label} (1 for ImageNet's "
            "labels 1 to 1000, 0 being the background class)."
        )
    if source.num_classes - labels_offset < 2:
        raise ValueError(
            f"Invalid value for argument `labels_offset`. Received: "
            f"labels_offset={labels_offset}, which leaves "
            f"{source.num_classes - labels_offset} of the "
            f"{source.num_classes} classes. Expected at least 2 to classify."
        )
    return source.num_classes - labels_offset


def _check_arguments(split, batch_size, seed, validation_fraction):
    if not isinstance(split, str) or not split or "/" in split:
        raise checks.invalid("split", split, "a split name, such as 'train'")
    checks.positive_int("batch_size", batch_size)
    if not checks.is_int(seed) or seed < 0:
        raise checks.invalid("seed", seed, "a non-negative integer")
    if not isinstance(validation_fraction, float) or not (
        0.0 < validation_fraction < 1.0
    ):
        raise checks.invalid(
            "validation_fraction", validation_fraction, "a float in (0, 1)"
        )


def _find(dataset_dir, split, seed, validation_fraction, layout):
    """The split's source in `dataset_dir`: the layout's files first, then
    folders (for the splits `"train"` and `"validation"`)."""
    globs = [
        os.path.join(dataset_dir, p.format(split=split))
        for p in layout.patterns
    ]
    for pattern in globs:
        files = sorted(
            f for f in tf.io.gfile.glob(pattern) if not tf.io.gfile.isdir(f)
        )
        if files:
            return tfrecords.TFRecordSource(
                dataset_dir,
                pattern,
                files,
                num_classes=layout.num_classes,
                channels=layout.channels,
            )
    if split in SPLITS:
        train = os.path.join(dataset_dir, "train")
        validation = os.path.join(dataset_dir, "validation")
        if tf.io.gfile.isdir(train) and tf.io.gfile.isdir(validation):
            return folders.FolderSource.of_split_folders(
                train, validation, split, seed
            )
        if folders.class_folders(dataset_dir):
            return folders.FolderSource.of_fraction(
                dataset_dir, split, seed, validation_fraction
            )
    named = "" if layout is layouts.GENERIC else f"dataset {layout.name!r}: "
    raise MissingSplitError(
        f"No images of split {split!r} found in {dataset_dir!r}. Looked for "
        f"{named}TFRecord files matching {' or '.join(map(repr, globs))} and "
        f"for class subfolders holding images ({', '.join(IMAGE_EXTENSIONS)}); "
        f"found {_pipeline.listing(dataset_dir)}. Expected TF-Slim's files "
        "or `<dataset_dir>/<class>/<image>` files (`keras_slim.image.datasets."
        "write_dataset` and `write_image_folder` write either)."
    )
