"""TF-Slim's datasets by name: each one's files, splits and classes."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class Layout:
    """Where one dataset keeps its splits, as TF-Slim's converter wrote them.

    Attributes:
        name: The `--dataset_name`.
        patterns: Globs of a split's files, relative to `dataset_dir`,
            with `{split}` for the split's name; the first that matches is
            read.
        file_name: The name the converter gives file `{index}` of
            `{count}` of a split (the writers' format).
        default_shards: How many files the converter writes per split.
        splits: The split names; `None`: any.
        num_classes: The classes, background included; `None`: from
            `labels.txt` or the labels found.
        channels: The channels images are decoded to.
        held_out: The split evaluated by default.
    """

    name: str
    patterns: tuple
    file_name: str
    default_shards: dict
    splits: tuple | None
    num_classes: int | None
    channels: int
    held_out: str

    def check_split(self, split):
        """Raises `ValueError` unless `split` is one of the layout's."""
        if self.splits is not None and split not in self.splits:
            raise ValueError(
                f"split name {split!r} was not recognized for dataset "
                f"{self.name!r}. Expected one of "
                f"{', '.join(map(repr, self.splits))} (--dataset_split_name)."
            )

    def shards(self, split):
        """The number of files the converter writes for `split`."""
        return self.default_shards.get(split, self.default_shards["*"])


LAYOUTS = {
    "flowers": Layout(
        "flowers",
        ("flowers_{split}_*.tfrecord",),
        "flowers_{split}_{index:05d}-of-{count:05d}.tfrecord",
        {"*": 5},
        ("train", "validation"),
        5,
        3,
        "validation",
    ),
    "cifar10": Layout(
        "cifar10",
        ("cifar10_{split}.tfrecord",),
        "cifar10_{split}.tfrecord",
        {"*": 1},
        ("train", "test"),
        10,
        3,
        "test",
    ),
    "mnist": Layout(
        "mnist",
        ("mnist_{split}.tfrecord",),
        "mnist_{split}.tfrecord",
        {"*": 1},
        ("train", "test"),
        10,
        1,
        "test",
    ),
    "imagenet": Layout(
        "imagenet",
        ("{split}-*",),
        "{split}-{index:05d}-of-{count:05d}",
        {"train": 1024, "*": 128},
        ("train", "validation"),
        1001,
        3,
        "validation",
    ),
    "visualwakewords": Layout(
        "visualwakewords",
        ("{split}.record-*",),
        "{split}.record-{index:05d}-of-{count:05d}",
        {"*": 10},
        ("train", "val"),
        2,
        3,
        "val",
    ),
}

#: Any other `--dataset_name`: TF-Slim's two kinds of file names, and
#: folders of class subfolders (`load` looks for those last).
GENERIC = Layout(
    "generic",
    ("*_{split}_*.tfrecord", "*_{split}.tfrecord"),
    "{name}_{split}_{index:05d}-of-{count:05d}.tfrecord",
    {"*": 1},
    None,
    None,
    3,
    "validation",
)


def layout(dataset_name):
    """The `Layout` of `dataset_name`: TF-Slim's for its names, else
    `GENERIC`.

    Args:
        dataset_name: A `--dataset_name`, or `None`.

    Returns:
        A `Layout`.

    Example:
    ```python
    layout("cifar10").splits  # ('train', 'test')
    ```
    """
    return LAYOUTS.get(dataset_name, GENERIC)
