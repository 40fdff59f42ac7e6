"""The dataset flags: which dataset, where, which split, how it is read."""

from keras_slim.image._flag_types import labels
from keras_slim.image._flag_types import non_negative_float
from keras_slim.image._flag_types import non_negative_int
from keras_slim.image._flag_types import positive_int
from keras_slim.image._flag_types import randaugment

__all__ = [
    "DIGITS",
    "add_augmentation_flags",
    "add_data_flags",
]


#: The `--dataset_name` of the bundled digits.
DIGITS = "digits"


def add_data_flags(add, *, training):
    """Adds the dataset's flags: name, directory, split, labels, readers.

    Args:
        add: The command's `FlagParser.add`.
        training: `True` for keras-slim-train (adds `--num_readers`;
            split `train`), `False` for keras-slim-eval.
    """
    add(
        "dataset_name",
        DIGITS,
        "The name of the dataset to load: 'digits' (scikit-learn's 8x8 "
        "digits, bundled) without --dataset_dir; with it, one of TF-Slim's "
        "dataset_factory names (flowers, cifar10, mnist, imagenet, "
        "visualwakewords), read in TF-Slim's layout, or any name: TFRecord "
        "shards <name>_<split>_*.tfrecord, one file <name>_<split>.tfrecord, "
        "or a folder of class subfolders.",
    )
    add(
        "dataset_split_name",
        "train" if training else None,
        "The name of the train/test split"
        + (
            "."
            if training
            else " (default: the dataset's held-out split: test for cifar10 "
            "and mnist, val for visualwakewords, validation otherwise)."
        ),
    )
    add(
        "dataset_dir",
        None,
        "The directory where the dataset files are stored: TF-Slim's "
        "TFRecords (as its download_and_convert scripts and "
        "build_imagenet_data write them) or a folder of class subfolders.",
    )
    add(
        "labels_offset",
        0,
        "An offset for the labels in the dataset. This flag is primarily "
        "used to evaluate the VGG and ResNet architectures which do not use "
        "a background class for the ImageNet dataset.",
        parse=non_negative_int,
    )
    if training:
        add(
            "num_readers",
            4,
            "The number of parallel readers that read data from the "
            "dataset (TFRecord files read at a time, in order; by "
            "parallel calls for remote files, gs://..., by one thread for "
            "local ones, the same records in the same order).",
            parse=positive_int,
        )
    add(
        "num_preprocessing_threads",
        4,
        "The number of threads used to create the batches (parallel "
        "decode and preprocessing calls).",
        parse=positive_int,
    )
    add(
        "use_grayscale",
        False,
        "Whether to convert input images to grayscale.",
    )
    add(
        "labels",
        None,
        "The digits to keep, e.g. 0-4 or 5,7 (digits only; default all ten).",
        parse=labels,
    )


def add_augmentation_flags(add):
    """Adds keras-slim-train's recipe flags (not TF-Slim's; all off by
    default): `--randaugment`, `--mixup_alpha`, `--cutmix_alpha`.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "randaugment",
        None,
        "N,M: Keras's RandAugment on each training image (timm's "
        "rand-mM-nN): N of its 11 operations (1-11), each at most M/10 "
        "(M in 0-10) of its strength, on the decoded image before the "
        "preprocessing. Unset: off.",
        parse=randaugment,
    )
    add(
        "mixup_alpha",
        0.0,
        "MixUp's Beta(alpha, alpha) on each training batch (Keras's "
        "MixUp; soft labels); 0: off.",
        parse=non_negative_float,
    )
    add(
        "cutmix_alpha",
        0.0,
        "CutMix's Beta(alpha, alpha), at most 1 (Keras's CutMix; the "
        "label weight is the pasted area); 0: off. With --mixup_alpha "
        "each batch gets one or the other, 0.5 each.",
        parse=non_negative_float,
    )
