"""What every layout's reader shares: the decode, preprocess and batch of
`(encoded image, label)` elements, the checks on classes, and the search
for the images that do not decode.
"""

import re

import numpy as np
import tensorflow as tf

from keras_slim.image.datasets import _augment

#: The channels images are decoded to.
CHANNELS = 3
# The ops of a pipeline whose errors an undecodable image raises.
_READ_OPS = ("DecodeImage", "ParseExample", "ParseSingleExample")
_FOUND_BATCH = 4096
# The first bytes of the formats `tf.io.decode_image` reads: JPEG, PNG,
# GIF, BMP, WebP (RIFF), JPEG XL (codestream, container).
_SIGNATURES = (
    b"\xff\xd8\xff",
    b"\x89PNG",
    b"GIF",
    b"BM",
    b"RIFF",
    b"\xff\x0a",
    b"\x00\x00\x00\x0cJXL",
)
# The lines TensorFlow adds around an op's message in a graph's error.
_TRACE_LINES = (
    "Graph execution error",
    "Detected at node",
    "<stack traces",
    "  File ",
    "    ",
)


def listing(directory, limit=10):
    """Up to `limit` entries of `directory`, for an error message."""
    names = sorted(tf.io.gfile.listdir(directory))
    if not names:
        return "an empty directory"
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} entries)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def at_least_two_classes(class_names, where):
    """Raises unless there are at least 2 classes (`where`: their source)."""
    if len(class_names) < 2:
        raise ValueError(
            f"Found {len(class_names)} class{'es' if not class_names else ''} "
            f"in {where}: {class_names}. "
            "Expected at least 2 classes to classify."
        )


def said(error):
    """TensorFlow's message in `error`, without where TensorFlow detected
    it (graph execution, node and op names, stack): what a user reads."""
    message = getattr(error, "message", None) or str(error)
    message = re.sub(r"\{\{function_node [^}]*\}\}\s*", "", message)
    message = re.sub(r"\s*\[Op:\w+\].*$", "", message, flags=re.S)
    kept = [
        line.strip()
        for line in message.splitlines()
        if line.strip()
        and not line.startswith(_TRACE_LINES)
        and not re.fullmatch(r"\s*\[\[.*\]\]\s*", line)
    ]
    return " ".join(kept)


def reads_an_image(error):
    """Whether `error`, raised by a read of a pipeline, is an image that
    did not decode or a record that did not parse."""
    message = getattr(error, "message", "")
    return isinstance(error, tf.errors.InvalidArgumentError) and any(
        op in message for op in _READ_OPS
    )


def suspects(message):
    """Which images to decode to find the one TensorFlow's decode error
    is about, from its `message`: those of the size it gives (`Invalid
    JPEG data ..., data size 60`; `Input is empty.`), or of no format
    `tf.io.decode_image` reads (`Unknown image file format`).

    Args:
        message: TensorFlow's message (`said(error)`).

    Returns:
        A function `encoded image -> bool tensor`, or `None` (all).
    """
    size = 0 if "Input is empty" in message else None
    found = re.search(r"\bsize (\d+)\b", message)
    if found:
        size = int(found.group(1))
    if size is not None:
        return lambda encoded: tf.equal(tf.strings.length(encoded), size)
    if "Unknown image file format" in message:
        return _of_no_known_format
    return None


def _of_no_known_format(encoded):
    return tf.logical_not(
        tf.reduce_any(
            [
                tf.equal(tf.strings.substr(encoded, 0, len(head)), head)
                for head in _SIGNATURES
            ]
        )
    )


def undecodable(elements, fetch, count, channels, suspect=None):
    """The positions of the elements whose image does not decode.

    One parallel pass over `elements`, decoding each image (or only the
    suspects); an element whose fetch or decode fails is missing from what
    the pass yields.

    Args:
        elements: A `tf.data.Dataset` of `count` elements, as a source's
            `fetch` takes them.
        fetch: `element -> (encoded image, label)` (reads or parses).
        count: The elements in `elements`.
        channels: The channels images are decoded to.
        suspect: `encoded image -> bool tensor`: decode only those for
            which it is true (`suspects`); `None`: all.

    Returns:
        A sorted list of positions in `elements`.
    """

    @tf.autograph.experimental.do_not_convert
    def decodes(index, element):
        encoded, _ = fetch(element)

        def decode():
            image = tf.io.decode_image(
                encoded, channels=channels, expand_animations=False
            )
            return index, tf.shape(image, out_type=tf.int64)

        if suspect is None:
            return decode()
        skip = (index, tf.zeros([3], tf.int64))
        return tf.cond(suspect(encoded), decode, lambda: skip)

    passed = (
        elements.enumerate()
        .map(decodes, num_parallel_calls=tf.data.AUTOTUNE)
        .ignore_errors()
        .map(lambda index, shape: index)
        .batch(_FOUND_BATCH)
    )
    seen = np.zeros(count, bool)
    for indices in passed.as_numpy_iterator():
        seen[indices] = True
    return np.flatnonzero(~seen).tolist()


def decode_error(encoded, channels):
    """TensorFlow's message for an image that does not decode, or None."""
    try:
        tf.io.decode_image(encoded, channels=channels, expand_animations=False)
    except tf.errors.OpError as error:
        return said(error)
    return None


class Pipeline:
    """The steps both formats share, from encoded images and int labels.

    Args:
        preprocess: TF-Slim's `preprocessing_fn(image, output_height,
            output_width, seed=...)`, from `preprocessing.get_preprocessing`
            (with `use_grayscale` in it, as TF-Slim's).
        image_size: The side of the square images it returns.
        num_classes: The width of the one-hot labels (after the offset).
        batch_size: Positive integer.
        is_training: Shuffled, repeated, full batches when `True`.
        seed: Integer: shuffles and per-element augmentation.
        channels: The channels images are decoded to (1 or 3).
        labels_offset: Subtracted from each label (TF-Slim's
            `--labels_offset`). Defaults to `0`.
        parallel_calls: Parallel decode and preprocessing calls
            (`--num_preprocessing_threads`); `None`: tf.data's autotune.
        augmentation: An `_augment.Augmentation` (training only):
            RandAugment on each decoded image before the preprocessing,
            MixUp / CutMix on each batch; `None`: none (nothing built).
    """

    def __init__(
        self,
        preprocess,
        image_size,
        num_classes,
        batch_size,
        is_training,
        seed,
        channels=CHANNELS,
        labels_offset=0,
        parallel_calls=None,
        augmentation=None,
    ):
        self.preprocess = preprocess
        self.image_size = image_size
        self.num_classes = num_classes
        self.batch_size = batch_size
        self.is_training = is_training
        self.seed = seed
        self.channels = channels
        self.labels_offset = labels_offset
        self.parallel_calls = parallel_calls or tf.data.AUTOTUNE
        self.augmentation = augmentation

    def shuffle(self, data, buffer_size):
        """Shuffles and repeats in training; one pass otherwise."""
        if not self.is_training:
            return data
        data = data.shuffle(
            buffer_size, seed=self.seed, reshuffle_each_iteration=True
        )
        return data.repeat()

    def finish(self, data, fetch):
        """Elements -> batches of `(images, one_hot)`.

        `fetch(element)` returns `(encoded image, label)`: it runs in the
        parallel map, as reading a file or parsing a record should.
        """

        # Decoded uint8 images: RandAugment's range is (0, 255).
        augment = self.augmentation and self.augmentation.image_fn((0, 255))

        # The preprocessing is TensorFlow ops with no Python control flow
        # on tensors: AutoGraph's conversion of it (seconds per pipeline,
        # at every start of the commands) has nothing to convert.
        @tf.autograph.experimental.do_not_convert
        def element(index, source):
            encoded, label = fetch(source)
            image = tf.io.decode_image(
                encoded, channels=self.channels, expand_animations=False
            )
            seed = tf.stack([tf.constant(self.seed, tf.int64), index])
            if augment is not None:
                image = augment(image, seed)
            size = self.image_size
            image = self.preprocess(image, size, size, seed=seed)
            return image, label - self.labels_offset

        @tf.autograph.experimental.do_not_convert
        def one_hot(images, labels):
            return images, tf.one_hot(labels, self.num_classes, dtype="float32")

        # Index the elements after the repeat: each epoch's crops differ.
        data = data.enumerate().map(
            element, num_parallel_calls=self.parallel_calls
        )
        data = data.batch(self.batch_size, drop_remainder=self.is_training)
        # One op per batch, not per image.
        data = data.map(one_hot, num_parallel_calls=tf.data.AUTOTUNE)
        data = _augment.mix_batches(data, self.augmentation, self.seed)
        return data.prefetch(tf.data.AUTOTUNE)
