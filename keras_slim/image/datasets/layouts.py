"""TF-Slim's datasets by name: where each keeps its files, splits and classes.

TF-Slim's `dataset_factory.get_dataset(name, split_name, dataset_dir)`
knew each dataset by its name: the file pattern its converter wrote, the
split names, the number of classes and the image channels. `LAYOUTS`
holds the same, read from TF-Slim's datasets/*.py; split sizes are not
here (TF-Slim hard-coded them; `load` counts the records).

- flowers: `flowers_<split>_*.tfrecord` (5 shards); train, validation;
  5 classes.
- cifar10: `cifar10_<split>.tfrecord` (one file, PNG 32x32x3); train,
  test; 10 classes.
- mnist: `mnist_<split>.tfrecord` (one file, PNG 28x28x1); train, test;
  10 classes, 1 channel.
- imagenet: `<split>-*` (build_imagenet_data's `train-00000-of-01024`,
  `validation-00000-of-00128`); train, validation; 1001 classes, 0 the
  background (`labels_offset=1` for 1000-class nets).
- visualwakewords: `<split>.record-*`; train, val; 2 classes.

Any other name reads `GENERIC`: shards `*_<split>_*.tfrecord` or one
file `*_<split>.tfrecord`, with as many classes as `labels.txt` names
(or the largest label + 1), or a folder of class subfolders.
"""

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
