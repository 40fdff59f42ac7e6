"""What `keras-slim-train` and `keras-slim-eval` work on: the network and
the dataset their flags choose.
"""

import contextlib
import dataclasses
import logging

import tensorflow as tf

from keras_slim.image import datasets
from keras_slim.image import nets
from keras_slim.image.datasets import _augment
from keras_slim.image.datasets import _pipeline
from keras_slim.image.datasets import digits
from keras_slim.image.datasets import layouts

_LOG = logging.getLogger("keras_slim")

#: The bundled digits' splits.
DIGITS_SPLITS = ("train", "validation")


def held_out_split(flags):
    """The split evaluated by default: the digits' and folders'
    `validation`, TF-Slim's datasets' own (cifar10's `test`, ...)."""
    if flags.dataset_dir is None:
        return "validation"
    return layouts.layout(flags.dataset_name).held_out


@dataclasses.dataclass
class Task:
    """The network and the data one command works on.

    Attributes:
        model_name: The network's name.
        image_size: The side of the square images it takes.
        preprocessing_name: The preprocessing applied to the images.
        num_classes: How many classes.
        num_samples: The examples of the split.
        make_dataset: `(input_context or None) -> tf.data.Dataset` of
            `(images, one-hot labels)` batches.
        channels: The images' channels.
        check_images: `ImageData.check_images` of a user's images;
            `None` for the bundled digits.
    """

    model_name: str
    image_size: int
    preprocessing_name: str
    num_classes: int
    num_samples: int
    make_dataset: object
    channels: int
    check_images: object = None


@contextlib.contextmanager
def images_named(task):
    """Re-raises a read of the task's images that failed on one as
    `datasets.DamagedImageError`, naming it (TensorFlow's error does not).

    Args:
        task: The `Task` whose data is read inside the `with`.

    Raises:
        datasets.DamagedImageError: for images that do not decode.
    """
    try:
        yield
    except tf.errors.InvalidArgumentError as error:
        if task.check_images is None or not _pipeline.reads_an_image(error):
            raise
        _LOG.info(
            "An image did not decode (%s): looking for it among the %d "
            "images of the split.",
            _pipeline.said(error),
            task.num_samples,
        )
        task.check_images(error)
        raise


def _digits_images(image_size, channels):
    """Digits (8x8x1 in [0, 1]) as a network of another size takes them."""

    def convert(images, labels):
        if image_size != 8:
            images = tf.image.resize(images, (image_size, image_size))
        if channels == 3:
            images = tf.image.grayscale_to_rgb(images)
        return images, labels

    return convert


def _recipe(flags):
    """The augmentation flags of keras-slim-train (eval has none)."""
    return {
        "randaugment": getattr(flags, "randaugment", None),
        "mixup_alpha": getattr(flags, "mixup_alpha", 0.0),
        "cutmix_alpha": getattr(flags, "cutmix_alpha", 0.0),
    }


def task(flags, *, split, batch_size, image_size, is_training):
    """The `Task` of the flags for one split.

    Args:
        flags: The parsed flags (`model_name`, `dataset_name`,
            `dataset_dir`, `labels`, `labels_offset`, `preprocessing_name`,
            `num_readers`, `num_preprocessing_threads`, `use_grayscale`).
        split: The split's name (`--dataset_split_name`).
        batch_size: The (global) batch size.
        image_size: The image size flag's value, or `None`.
        is_training: Whether the data is shuffled, repeated and augmented
            (with `--randaugment`, `--mixup_alpha`, `--cutmix_alpha`).

    Returns:
        A `Task`.

    Raises:
        ValueError: for a dataset directory that cannot be read (the
            message names the file), a split the dataset does not have.
    """
    model_name = flags.model_name
    size = image_size or nets.default_image_size(model_name)
    # TF-Slim's `FLAGS.preprocessing_name or FLAGS.model_name`: the net's
    # entry in TF-Slim's map is its family's (tested).
    prep = flags.preprocessing_name or nets.preprocessing_name(model_name)
    if flags.dataset_dir is None:
        return _digits_task(
            flags,
            split,
            batch_size=batch_size,
            size=size,
            prep=prep,
            is_training=is_training,
        )
    return _files_task(
        flags,
        split,
        batch_size=batch_size,
        size=size,
        prep=prep,
        is_training=is_training,
    )


def _digits_task(flags, split, *, batch_size, size, prep, is_training):
    """The `Task` of the bundled digits (no `--dataset_dir`).

    Args:
        flags: The parsed flags, as `task` takes them.
        split: The split's name (one of `DIGITS_SPLITS`).
        batch_size: The (global) batch size.
        size: The image size the net takes.
        prep: The preprocessing's name.
        is_training: Whether the data is shuffled, repeated and augmented.

    Returns:
        A `Task`.

    Raises:
        ValueError: for a split the digits do not have.
    """
    model_name = flags.model_name
    if split not in DIGITS_SPLITS:
        raise ValueError(
            f"split name {split!r} was not recognized for the bundled "
            f"digits. Expected one of {', '.join(map(repr, DIGITS_SPLITS))}"
            " (--dataset_split_name)."
        )
    labels = flags.labels or list(range(10))
    train, test = digits.load(flags.labels)
    x, y = train if split == "train" else test
    gray = model_name == "digits_cnn" or flags.use_grayscale
    channels = 1 if gray else 3
    convert = _digits_images(size, channels)
    if is_training:
        make = digits.dataset_fn(
            x,
            y,
            batch_size,
            len(labels),
            augmentation=_augment.from_arguments(True, **_recipe(flags)),
        )
    else:

        def make(input_context=None):
            data = tf.data.Dataset.from_tensor_slices(
                (x, tf.one_hot(y, len(labels)))
            )
            return data.batch(batch_size)

    def make_converted(input_context=None):
        return make(input_context).map(convert)

    return Task(
        model_name,
        size,
        prep,
        len(labels),
        len(x),
        make_converted,
        channels,
    )


def _files_task(flags, split, *, batch_size, size, prep, is_training):
    """The `Task` of a dataset read from `--dataset_dir`.

    Args:
        flags: The parsed flags, as `task` takes them.
        split: The split's name (`--dataset_split_name`).
        batch_size: The (global) batch size.
        size: The image size the net takes.
        prep: The preprocessing's name.
        is_training: Whether the data is shuffled, repeated and augmented.

    Returns:
        A `Task`, whose files were checked (read) before it returns.

    Raises:
        ValueError: for a dataset directory that cannot be read (the
            message names the file), a split the dataset does not have.
    """
    model_name = flags.model_name

    def load(seed=0):
        return datasets.load(
            flags.dataset_dir,
            split,
            image_size=size,
            batch_size=batch_size,
            is_training=is_training,
            preprocessing_name=prep,
            seed=seed,
            dataset_name=flags.dataset_name,
            labels_offset=flags.labels_offset,
            num_readers=getattr(flags, "num_readers", 4),
            num_preprocessing_threads=flags.num_preprocessing_threads,
            use_grayscale=flags.use_grayscale,
            **(_recipe(flags) if is_training else {}),
        )

    loaded = load()  # checks the files before any step

    def make_images(input_context=None):
        if input_context is None:
            return loaded.dataset
        # Each input pipeline (a worker) shuffles with its own seed.
        return load(input_context.input_pipeline_id).dataset

    return Task(
        model_name,
        size,
        prep,
        loaded.num_classes,
        loaded.num_samples,
        make_images,
        loaded.channels,
        loaded.check_images,
    )
