"""A folder of class subfolders: `dataset_dir/<class>/<image>`."""

import os

import keras
import numpy as np
import tensorflow as tf

from keras_slim.image.datasets import _pipeline

IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")


class FolderSource:
    """Image files in class subfolders, listed by Keras.

    Args:
        files: The image files.
        labels: Their labels, indices into `class_names`.
        class_names: The classes.
    """

    format = "folder"
    channels = _pipeline.CHANNELS
    lowest_label = 0
    #: What to do about an image that does not decode.
    remedy = (
        "Remove or replace each file (with a JPEG, PNG, BMP or GIF that "
        "decodes)"
    )

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

    def undecodable(self, suspect=None):
        """The images that do not decode, each file decoded once.

        Args:
            suspect: `encoded image -> bool tensor`: decode only those
                (`_pipeline.suspects`); `None`: all.

        Returns:
            A list of `(the file, TensorFlow's message)`, in path order.
        """
        elements = tf.data.Dataset.from_tensor_slices(
            (self.files, np.asarray(self.labels, np.int64))
        )
        found = _pipeline.undecodable(
            elements, _read, self.num_samples, self.channels, suspect
        )
        return [
            (repr(self.files[i]), _file_error(self.files[i])) for i in found
        ]

    def dataset(self, pipeline, readers=None):
        """The split's `(images, labels)` batches (`readers`: unused, as
        files are read in the parallel map)."""
        del readers
        paths = tf.data.Dataset.from_tensor_slices(
            (self.files, np.asarray(self.labels, np.int64))
        )
        # Paths are small: shuffle all of them.
        paths = pipeline.shuffle(paths, self.num_samples)
        return pipeline.finish(paths, _read)


def _read(path_and_label):
    path, label = path_and_label
    return tf.io.read_file(path), label


def _file_error(path):
    """TensorFlow's message reading and decoding `path`."""
    try:
        encoded = tf.io.read_file(path)
    except tf.errors.OpError as error:
        return _pipeline.said(error)
    return _pipeline.decode_error(encoded, _pipeline.CHANNELS)


def _list_images(directory, seed):
    """`(files, labels, class_names)` of `directory`, Keras's seeded order.

    Checks that there are at least 2 classes and that the first image
    (sorted by path) of each class decodes.
    """
    if not class_folders(directory):
        raise ValueError(
            f"No class subfolders holding images ("
            f"{', '.join(IMAGE_EXTENSIONS)}) found in {directory!r}; found "
            f"{_pipeline.listing(directory)}. Expected "
            f"`{directory}/<class>/<image>`."
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
    _pipeline.at_least_two_classes(
        class_names, f"{directory!r} (its subfolders)"
    )
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
            tf.io.read_file(path),
            channels=_pipeline.CHANNELS,
            expand_animations=False,
        )
    except tf.errors.OpError as error:
        raise ValueError(
            f"The image file {path!r} could not be decoded. Expected a "
            f"JPEG, PNG, BMP or GIF image. TensorFlow said: {error.message}"
        ) from None


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


def class_folders(directory):
    """The subfolders of `directory` if any of them holds an image."""
    folders = _subfolders(directory)
    for folder in folders:
        for _, _, files in tf.io.gfile.walk(os.path.join(directory, folder)):
            if any(_is_image(f) for f in files):
                return folders
    return []
