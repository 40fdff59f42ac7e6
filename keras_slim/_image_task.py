"""What `keras-slim-train` and `keras-slim-eval` share: the model and the
data flags, the network and the dataset they choose.

TF-Slim's train_image_classifier.py and eval_image_classifier.py took the
same `--model_name`, `--dataset_name`, `--dataset_dir` and
`--preprocessing_name`, and built the network and the input the same way
(nets_factory, dataset_factory, preprocessing_factory); the two commands
here do the same through this module:

- the network: `keras_slim.nets` (`digits_cnn`, Keras Applications);
- the data: scikit-learn's bundled digits (`--dataset_name digits`, no
  `--dataset_dir`), or a user's images (`keras_slim.image_data`: a folder
  of class subfolders, or TF-Slim's TFRecord shards), preprocessed by
  `keras_slim.preprocessing`.
"""

import argparse
import dataclasses
import math

import tensorflow as tf

#: The `--dataset_name` of the bundled digits.
DIGITS = "digits"


def add_model_flags(add, *, image_size_flag):
    """Adds `--model_name`, the image size flag and `--preprocessing_name`.

    Args:
        add: The parser's `add_argument`.
        image_size_flag: `--train_image_size` or `--eval_image_size`.
    """
    from keras_slim import nets
    from keras_slim import preprocessing

    add(
        "--model_name",
        choices=nets.NETWORKS,
        default="digits_cnn",
        help="The name of the architecture to train (keras_slim.nets: a "
        "small CNN, or Keras Applications built with weights=None).",
    )
    add(
        image_size_flag,
        type=positive_int,
        default=None,
        help="The image size (height and width) the network takes "
        "(default: the network's, e.g. 224 for mobilenet_v2).",
    )
    add(
        "--preprocessing_name",
        choices=preprocessing.PREPROCESSING,
        default=None,
        help="The name of the preprocessing to use (default: the "
        "network's, as TF-Slim's preprocessing_factory picks it).",
    )


def add_data_flags(add):
    """Adds `--dataset_name`, `--dataset_dir` and `--labels`."""
    add(
        "--dataset_name",
        default=DIGITS,
        help="The name of the dataset: 'digits' (scikit-learn's 8x8 "
        "digits, bundled) without --dataset_dir; with it, the name of its "
        "TFRecord shards (<name>_<split>_*.tfrecord) or any name for a "
        "folder of class subfolders.",
    )
    add(
        "--dataset_dir",
        default=None,
        help="The directory where the dataset files are stored: a folder "
        "of class subfolders of images, or TF-Slim's TFRecord shards.",
    )
    add(
        "--labels",
        type=_labels,
        default=None,
        help="The digits to keep, e.g. 0-4 or 5,7 (digits only; default "
        "all ten).",
    )


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer: {text}")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text}")
    return value


def positive_float(text):
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text}")
    return value


def fraction(text):
    value = finite_float(text)
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be in [0, 1): {text}")
    return value


def non_negative_float(text):
    value = finite_float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text}")
    return value


def _labels(text):
    """`0-4` or `5,6,7` -> a list of digits."""
    labels = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            labels += list(range(int(first), int(last or first) + 1))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected digits like 0-4 or 5,7: {text!r}"
            ) from None
    if not labels or any(not 0 <= d <= 9 for d in labels):
        raise argparse.ArgumentTypeError(f"digits must be 0-9: {text!r}")
    if len(set(labels)) != len(labels) or len(labels) < 2:
        raise argparse.ArgumentTypeError(
            f"need at least 2 distinct digits: {text!r}"
        )
    return labels


def check_flags(p, flags, image_size_flag):
    """Cross-flag checks shared by both commands (argparse errors)."""
    from keras_slim import nets

    size = getattr(flags, image_size_flag.lstrip("-"))
    if size is not None and size < nets.minimum_image_size(flags.model_name):
        p.error(
            f"argument {image_size_flag}: {flags.model_name} takes images "
            f"of at least {nets.minimum_image_size(flags.model_name)} "
            f"pixels, got {size}"
        )
    if flags.dataset_dir is None and flags.dataset_name != DIGITS:
        p.error(
            f"argument --dataset_name: {flags.dataset_name!r} needs "
            "--dataset_dir (only 'digits' is bundled)"
        )
    if flags.dataset_dir is not None and flags.labels is not None:
        p.error("argument --labels: only for the bundled digits")


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
    """

    model_name: str
    image_size: int
    preprocessing_name: str
    num_classes: int
    num_samples: int
    make_dataset: object
    channels: int


def _digits_images(image_size, channels):
    """Digits (8x8x1 in [0, 1]) as a network of another size takes them."""

    def convert(images, labels):
        if image_size != 8:
            images = tf.image.resize(images, (image_size, image_size))
        if channels == 3:
            images = tf.image.grayscale_to_rgb(images)
        return images, labels

    return convert


def task(flags, *, split, batch_size, image_size, is_training):
    """The `Task` of the flags for one split.

    Args:
        flags: The parsed flags (`model_name`, `dataset_name`,
            `dataset_dir`, `labels`, `preprocessing_name`).
        split: `"train"` or `"validation"`.
        batch_size: The (global) batch size.
        image_size: The image size flag's value, or `None`.
        is_training: Whether the data is shuffled, repeated and augmented.

    Returns:
        A `Task`.

    Raises:
        ValueError: for a dataset directory that cannot be read (the
            message names the file).
    """
    from keras_slim import _digits
    from keras_slim import image_data
    from keras_slim import nets

    model_name = flags.model_name
    size = image_size or nets.default_image_size(model_name)
    prep = flags.preprocessing_name or nets.preprocessing_name(model_name)
    if flags.dataset_dir is None:
        labels = flags.labels or list(range(10))
        train, test = _digits.load(flags.labels)
        x, y = train if split == "train" else test
        channels = 1 if model_name == "digits_cnn" else 3
        convert = _digits_images(size, channels)
        if is_training:
            make = _digits.dataset_fn(x, y, batch_size, len(labels))
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

    def load(seed=0):
        return image_data.load(
            flags.dataset_dir,
            split,
            image_size=size,
            batch_size=batch_size,
            is_training=is_training,
            preprocessing_name=prep,
            seed=seed,
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
    )
