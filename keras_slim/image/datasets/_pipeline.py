"""What every layout's reader shares: the decode, preprocess and batch of
`(encoded image, label)` elements, and the checks on classes.
"""

import tensorflow as tf

#: The channels images are decoded to.
CHANNELS = 3


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
        return data.prefetch(tf.data.AUTOTUNE)
