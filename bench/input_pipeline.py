"""Input pipeline speed: keras_slim.image.datasets vs Keras's directory reader.

Writes a generated dataset to a temporary directory (in /dev/shm where it
exists, so the disk is not timed): `--images` JPEGs (default 512, 64x64,
4 classes) as a folder of class subfolders and as TF-Slim's TFRecord
shards (4). Three readers then deliver training batches of the same
images:

- "image_data folder": `keras_slim.image.datasets.load` on the folder;
- "image_data tfrecord": `keras_slim.image.datasets.load` on the shards;
- "keras directory": `keras.utils.image_dataset_from_directory` on the
  folder's `train/` alone (decode, resize, shuffle, batch; no random crop);
- "decode limit": the same JPEG bytes already in memory, decoded and
  resized in a parallel map (`AUTOTUNE`, all cores), batched: what
  decoding alone allows (compare with `--preprocessing digits`, which
  gives `image_data` the same work: decode and resize);
- "file limit": the least a folder reader does: the paths, each file
  read, decoded and resized in one parallel map, batched;
- "record limit": the least a TFRecord reader does: the shards read in
  order by one `TFRecordDataset`, each record parsed, decoded and resized
  in one parallel map, batched.

`image_data` runs its training pipeline (shuffle, decode,
`--preprocessing`, default "inception": TF-Slim's random crop, TF1
resize, flip and color distortion, one-hot labels, batches of
`--batch_size`). Each round builds every reader anew
(the "setup" column: `load`'s checks and TFRecord count, or Keras's file
listing) and times `--epochs` epochs of images after the first batch;
the readers' order alternates between rounds. Prints the medians of
images/s and the medians (quartiles) of the per-round ratios to Keras's
reader, to the decode limit, and to the reader's own limit (the file
limit for folders, the record limit for TFRecords).

Run: `python bench/input_pipeline.py [--rounds 5]`.
"""

import argparse
import os
import statistics
import tempfile
import time

import _common
import keras
import numpy as np
import tensorflow as tf

from keras_slim.image import datasets as image_data

CLASS_NAMES = ["a", "b", "c", "d"]
READERS = [
    "image_data folder",
    "image_data tfrecord",
    "keras directory",
    "decode limit",
    "file limit",
    "record limit",
]
BASELINE = "keras directory"
#: The least each reader's format needs (see the docstring).
OWN_LIMIT = {
    "image_data folder": "file limit",
    "image_data tfrecord": "record limit",
    "keras directory": "file limit",
}


def write_dataset(directory, count, side):
    """The same JPEGs in `folder/train/<class>/` and as TFRecords (`tf/`).

    `folder/validation/` holds a few more, so that `folder` has both
    splits and `image_data` reads all of `folder/train` as "train".
    """
    rng = np.random.default_rng(0)
    labels = np.arange(count + len(CLASS_NAMES)) % len(CLASS_NAMES)
    images = rng.integers(0, 256, (len(labels), side, side, 3), np.uint8)
    folder = os.path.join(directory, "folder")
    for split, part in [
        ("train", slice(count)),
        ("validation", slice(count, None)),
    ]:
        image_data.write_image_folder(
            images[part],
            labels[part],
            os.path.join(folder, split),
            class_names=CLASS_NAMES,
            image_format="jpeg",
        )
    shards = os.path.join(directory, "tf")
    image_data.write_tfrecords(
        images[:count],
        labels[:count],
        shards,
        name="bench",
        split="train",
        shards=4,
        image_format="jpeg",
        class_names=CLASS_NAMES,
    )
    return folder, shards


def _decoded_batches(dataset, decode, count, args):
    """A limit reader's `(dataset, batches per epoch)`: `decode` in one
    parallel map over the endless `dataset` of `count` elements, batched
    (the labels stand-in: a pixel of each image)."""
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.batch(args.batch_size).map(lambda x: (x, x[:, 0, 0]))
    return dataset.prefetch(tf.data.AUTOTUNE), count // args.batch_size


def decode_limit(folder, args):
    """The folder's JPEG bytes in memory, decoded and resized in parallel."""
    paths = sorted(
        tf.io.gfile.glob(os.path.join(folder, "train", "*", "*.jpg"))
    )
    encoded = [tf.io.read_file(p).numpy() for p in paths]
    size = (args.image_size, args.image_size)

    def decode(data):
        image = tf.io.decode_jpeg(data, channels=3)
        return tf.image.resize(image, size)

    dataset = tf.data.Dataset.from_tensor_slices(encoded).repeat()
    return _decoded_batches(dataset, decode, len(paths), args)


def file_limit(folder, args):
    """Each file read, decoded and resized in one parallel map."""
    paths = sorted(
        tf.io.gfile.glob(os.path.join(folder, "train", "*", "*.jpg"))
    )
    size = (args.image_size, args.image_size)

    def decode(path):
        image = tf.io.decode_jpeg(tf.io.read_file(path), channels=3)
        return tf.image.resize(image, size)

    dataset = tf.data.Dataset.from_tensor_slices(paths).repeat()
    return _decoded_batches(dataset, decode, len(paths), args)


def record_limit(shards, args):
    """The shards read in order, each record parsed, decoded and resized
    in one parallel map."""
    files = sorted(tf.io.gfile.glob(os.path.join(shards, "*.tfrecord")))
    size = (args.image_size, args.image_size)
    features = {"image/encoded": tf.io.FixedLenFeature([], tf.string)}

    def decode(record):
        encoded = tf.io.parse_single_example(record, features)
        image = tf.io.decode_jpeg(encoded["image/encoded"], channels=3)
        return tf.image.resize(image, size)

    dataset = tf.data.TFRecordDataset(files).repeat()
    return _decoded_batches(dataset, decode, args.images, args)


def build(reader, folder, shards, args):
    """`(dataset, batches per epoch)`; image_data's dataset repeats."""
    if reader == "decode limit":
        return decode_limit(folder, args)
    if reader == "file limit":
        return file_limit(folder, args)
    if reader == "record limit":
        return record_limit(shards, args)
    if reader == BASELINE:
        dataset = keras.utils.image_dataset_from_directory(
            os.path.join(folder, "train"),
            image_size=(args.image_size, args.image_size),
            batch_size=args.batch_size,
            seed=0,
            verbose=False,
        )
        return dataset.repeat(), len(dataset)
    data = image_data.load(
        folder if reader.endswith("folder") else shards,
        "train",
        image_size=args.image_size,
        batch_size=args.batch_size,
        is_training=True,
        preprocessing_name=args.preprocessing,
    )
    return data.dataset, data.num_samples // args.batch_size


def images_per_second(dataset, batches):
    """Images/s of `batches` batches, after the first one."""
    iterator = iter(dataset)
    next(iterator)
    count = 0
    start = time.perf_counter()
    for _ in range(batches):
        images, _ = next(iterator)
        count += int(images.shape[0])
    return count / (time.perf_counter() - start)


def run_round(order, folder, shards, args):
    setup, rate = {}, {}
    for reader in order:
        start = time.perf_counter()
        dataset, per_epoch = build(reader, folder, shards, args)
        setup[reader] = time.perf_counter() - start
        rate[reader] = images_per_second(dataset, per_epoch * args.epochs)
    return setup, rate


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--images", type=int, default=512)
    parser.add_argument("--side", type=int, default=64)
    parser.add_argument("--image_size", type=int, default=56)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--preprocessing", default="inception")
    args = parser.parse_args(argv)
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    with tempfile.TemporaryDirectory(dir=shm) as directory:
        folder, shards = write_dataset(directory, args.images, args.side)
        run_round(READERS, folder, shards, args)  # Warm-up.
        setups = {r: [] for r in READERS}
        rates = {r: [] for r in READERS}
        for i in range(args.rounds):
            order = READERS if i % 2 == 0 else READERS[::-1]
            setup, rate = run_round(order, folder, shards, args)
            for reader in READERS:
                setups[reader].append(setup[reader])
                rates[reader].append(rate[reader])
    print(_common.header(args.rounds))
    print(
        f"{args.images} JPEGs {args.side}x{args.side}, {len(CLASS_NAMES)} "
        f"classes; batches of {args.batch_size} at {args.image_size}x"
        f"{args.image_size}, {args.epochs} epochs timed per round; "
        f"image_data preprocessing: {args.preprocessing!r} (training)"
    )
    print()
    print(
        f"| reader | setup s | images/s | ratio to {BASELINE} | ratio to "
        "decode limit | ratio to its own limit |"
    )
    print("|---|---|---|---|---|---|")
    ratios = _common.ratios_to(rates, BASELINE)
    to_decode = _common.ratios_to(rates, "decode limit")
    for reader in READERS:
        own = OWN_LIMIT.get(reader)
        to_own = _common.ratios_to(rates, own)[reader] if own else None
        print(
            f"| {reader} | {statistics.median(setups[reader]):.3f} | "
            f"{statistics.median(rates[reader]):.0f} | "
            f"{_common.summary(ratios[reader])} | "
            f"{_common.summary(to_decode[reader])} | "
            f"{_common.summary(to_own) if own else ''} |"
        )


if __name__ == "__main__":
    tf.get_logger().setLevel("ERROR")
    main()
