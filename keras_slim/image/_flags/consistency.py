"""The checks across flags both commands make after parsing."""

from keras_slim.image import nets
from keras_slim.image._flags.data import DIGITS
from keras_slim.image._flags.model import QUANTIZATION

__all__ = [
    "check_digits_flags",
    "check_flags",
    "check_image_size",
]


def check_image_size(p, flags, image_size_flag):
    """Refuses an image size below the net's minimum.

    Args:
        p: The command's `FlagParser` (its `error` exits with code 2).
        flags: The parsed flags.
        image_size_flag: `--train_image_size` or `--eval_image_size`.
    """
    size = getattr(flags, image_size_flag.lstrip("-"))
    if size is not None and size < nets.minimum_image_size(flags.model_name):
        p.error(
            f"flag {image_size_flag}: {flags.model_name} takes images "
            f"of at least {nets.minimum_image_size(flags.model_name)} "
            f"pixels, got {size}"
        )


def check_digits_flags(p, flags):
    """Refuses `--labels` off the bundled digits and `--labels_offset` on
    them.

    Args:
        p: The command's `FlagParser` (its `error` exits with code 2).
        flags: The parsed flags.
    """
    digits = flags.dataset_dir is None and flags.dataset_name == DIGITS
    if not digits and flags.labels is not None:
        p.error("flag --labels: only for the bundled digits")
    if digits and flags.labels_offset:
        p.error(
            "flag --labels_offset: the bundled digits have no "
            f"background class to offset; got {flags.labels_offset}"
        )


def check_flags(p, flags, image_size_flag):
    """Cross-flag checks shared by both commands.

    Args:
        p: The command's `FlagParser` (its `error` exits with code 2).
        flags: The parsed flags.
        image_size_flag: `--train_image_size` or `--eval_image_size`.
    """
    check_image_size(p, flags, image_size_flag)
    if flags.dataset_dir is None and flags.dataset_name != DIGITS:
        p.error(
            f"flag --dataset_name: {flags.dataset_name!r} needs "
            "--dataset_dir (only 'digits' is bundled)"
        )
    check_digits_flags(p, flags)
    if flags.master:
        p.error(
            f"flag --master: {flags.master!r} is a TF1 session target; "
            "keras_slim takes the cluster from TF_CONFIG with "
            "--worker_replicas, --task and --num_ps_tasks (keras-slim-cluster "
            "starts one): leave --master=''"
        )
    if getattr(flags, "quantize_delay", -1) >= 0:
        p.error(f"flag --quantize_delay: {QUANTIZATION}")
    if getattr(flags, "quantize", False):
        p.error(f"flag --quantize: {QUANTIZATION}")
