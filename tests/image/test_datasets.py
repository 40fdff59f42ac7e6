"""keras_slim.image.datasets on tiny generated data.

Image `i` is color-coded: every pixel is 40 except its class's channel
(200) and the next channel (10 + 5 * i), so a decoded image tells both its
class and which image it is.
"""

import os
import pathlib

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image import datasets
from keras_slim.image import preprocessing
from keras_slim.image.datasets import _pipeline

NUM_CLASSES = 3
PER_CLASS = 12
NUM_IMAGES = NUM_CLASSES * PER_CLASS
SIZE = 20
CLASS_NAMES = ["red", "green", "blue"]


def _images():
    labels = np.arange(NUM_IMAGES) % NUM_CLASSES
    images = np.full((NUM_IMAGES, SIZE, SIZE, 3), 40, np.uint8)
    for i, label in enumerate(labels):
        images[i, :, :, label] = 200
        images[i, :, :, (label + 1) % NUM_CLASSES] = 10 + 5 * i
    return images, labels


def _identify(image):
    """`(label, image index)` of a decoded image in [0, 1]."""
    color = np.round(np.asarray(image).mean(axis=(0, 1)) * 255)
    label = int(np.argmax(color))
    return label, int(np.round((color[(label + 1) % NUM_CLASSES] - 10) / 5))


def _identify_batches(batches, class_names=CLASS_NAMES):
    """`[(label, index)]` of each image, checking its one-hot label.

    `class_names` are the dataset's: a folder's are sorted, so its labels
    number the colors in another order.
    """
    found = []
    for images, labels in batches:
        assert images.dtype == tf.float32 and labels.dtype == tf.float32
        np.testing.assert_array_equal(labels.numpy().sum(axis=1), 1.0)
        for image, one_hot in zip(images.numpy(), labels.numpy()):
            label, index = _identify(image)
            assert class_names[np.argmax(one_hot)] == CLASS_NAMES[label]
            found.append((label, index))
    return found


def _load(directory, split="train", **kwargs):
    kwargs = {
        "image_size": SIZE,
        "batch_size": 6,
        "is_training": False,
        "preprocessing_name": "digits",
        **kwargs,
    }
    return datasets.load(str(directory), split, **kwargs)


@pytest.fixture(scope="module")
def images():
    return _images()


@pytest.fixture(scope="module")
def shards(tmp_path_factory, images):
    directory = tmp_path_factory.mktemp("tfrecords")
    datasets.write_tfrecords(
        *images,
        directory,
        name="toy",
        split="train",
        shards=3,
        class_names=CLASS_NAMES,
    )
    datasets.write_tfrecords(
        *images, directory, name="toy", split="validation", shards=2
    )
    return directory


@pytest.fixture(scope="module")
def folder(tmp_path_factory, images):
    directory = tmp_path_factory.mktemp("folder")
    datasets.write_image_folder(*images, directory, class_names=CLASS_NAMES)
    return directory


# --- reading ---------------------------------------------------------------


def test_write_tfrecords_names_shards_as_tf_slim(shards):
    assert sorted(os.listdir(shards)) == [
        "labels.txt",
        "toy_train_00000-of-00003.tfrecord",
        "toy_train_00001-of-00003.tfrecord",
        "toy_train_00002-of-00003.tfrecord",
        "toy_validation_00000-of-00002.tfrecord",
        "toy_validation_00001-of-00002.tfrecord",
    ]
    assert (shards / "labels.txt").read_text() == "0:red\n1:green\n2:blue\n"
    record = next(
        iter(tf.data.TFRecordDataset(str(shards / os.listdir(shards)[1])))
    )
    example = tf.train.Example.FromString(record.numpy())
    assert sorted(example.features.feature) == [
        "image/class/label",
        "image/encoded",
        "image/format",
        "image/height",
        "image/width",
    ]


def test_tfrecord_train(shards):
    data = _load(shards, is_training=True, batch_size=5)
    assert data.format == "tfrecord"
    assert data.num_samples == NUM_IMAGES
    assert data.num_classes == NUM_CLASSES
    assert data.class_names == CLASS_NAMES
    assert data.channels == 3
    assert [os.path.basename(f) for f in data.files] == [
        f"toy_train_0000{i}-of-00003.tfrecord" for i in range(3)
    ]
    assert data.dataset.element_spec[0].shape == (5, SIZE, SIZE, 3)
    assert data.dataset.element_spec[1].shape == (5, NUM_CLASSES)
    found = _identify_batches(data.dataset.take(2 * NUM_IMAGES // 5 + 1))
    first, second = found[:NUM_IMAGES], found[NUM_IMAGES : 2 * NUM_IMAGES]
    every = sorted((i % NUM_CLASSES, i) for i in range(NUM_IMAGES))
    assert sorted(first) == every and sorted(second) == every
    assert first != every and first != second


def test_tfrecord_eval_is_one_deterministic_pass(shards):
    data = _load(shards, batch_size=5)
    batches = list(data.dataset)
    assert [len(labels) for _, labels in batches] == [5] * 7 + [1]
    found = _identify_batches(batches)
    assert sorted(found) == sorted(
        (i % NUM_CLASSES, i) for i in range(NUM_IMAGES)
    )
    assert _identify_batches(_load(shards, batch_size=5).dataset) == found


@pytest.mark.parametrize("is_training", [True, False])
def test_local_and_remote_shards_read_the_same_order(
    shards, is_training, monkeypatch
):
    """Local shards are read by one thread, remote ones (`gs://`) by
    parallel calls: the same records in the same order either way."""
    from keras_slim.image.datasets import tfrecords

    assert tfrecords.parallel_reads("gs://bucket/toy_train_*.tfrecord")
    assert not tfrecords.parallel_reads(str(shards / "toy_train_*"))

    def read():
        data = _load(shards, is_training=is_training, batch_size=5)
        return _identify_batches(data.dataset.take(2 * NUM_IMAGES // 5))

    one_thread = read()
    monkeypatch.setattr(tfrecords, "parallel_reads", lambda pattern: True)
    assert read() == one_thread


def test_tfrecord_without_labels_txt_counts_classes(shards):
    data = _load(shards, "validation")
    assert data.num_samples == NUM_IMAGES
    assert data.num_classes == NUM_CLASSES
    assert data.class_names == CLASS_NAMES  # labels.txt is beside them.
    (directory := shards.parent / "no_labels").mkdir()
    for f in os.listdir(shards):
        if "_validation_" in f:
            (directory / f).write_bytes((shards / f).read_bytes())
    data = _load(directory, "validation")
    assert data.class_names is None
    assert data.num_classes == NUM_CLASSES


def test_tfrecord_jpeg_and_inception_training(tmp_path, images):
    datasets.write_tfrecords(
        *images,
        tmp_path,
        name="j",
        split="train",
        shards=1,
        image_format="jpeg",
    )
    data = _load(
        tmp_path,
        is_training=True,
        preprocessing_name="inception",
        image_size=16,
        batch_size=4,
    )
    images_, labels = next(iter(data.dataset))
    assert images_.shape == (4, 16, 16, 3) and labels.shape == (4, 3)
    assert -1.0 <= images_.numpy().min() and images_.numpy().max() <= 1.0
    eval_data = _load(tmp_path, batch_size=NUM_IMAGES)
    for image, one_hot in zip(*next(iter(eval_data.dataset))):
        assert _identify(image)[0] == int(np.argmax(one_hot))


def test_each_training_image_is_preprocessed_with_seed_and_its_index(
    shards, images
):
    """Element `k` of the stream is `preprocessing_fn(image, size, size,
    seed=[seed, k])`: per-image stateless draws, so a resumed run draws
    what the uninterrupted one drew."""
    data = _load(
        shards,
        is_training=True,
        preprocessing_name="inception",
        seed=3,
        batch_size=6,
    )
    batch, _ = next(iter(data.dataset))
    preprocess = preprocessing.get_preprocessing("inception", is_training=True)
    for k, image in enumerate(batch.numpy()):
        candidates = tf.data.Dataset.from_tensor_slices(images[0]).map(
            lambda x, k=k: preprocess(
                x, SIZE, SIZE, seed=tf.constant([3, k], tf.int64)
            )
        )
        matches = [
            i
            for i, candidate in enumerate(candidates)
            if np.array_equal(candidate, image)
        ]
        assert len(matches) == 1, k


def test_use_grayscale_is_inside_the_preprocessing(tmp_path, images):
    """TF-Slim's inception eval converts to gray before its resize."""
    datasets.write_image_folder(*images, tmp_path, class_names=CLASS_NAMES)
    data = _load(
        tmp_path,
        "validation",
        preprocessing_name="inception",
        image_size=7,
        use_grayscale=True,
        batch_size=NUM_IMAGES,
    )
    assert data.channels == 1
    batch, _ = next(iter(data.dataset))
    preprocess = preprocessing.get_preprocessing(
        "inception", use_grayscale=True
    )
    for path, image in zip(data.files, batch.numpy()):
        decoded = tf.io.decode_image(tf.io.read_file(path), channels=3)
        np.testing.assert_array_equal(preprocess(decoded, 7, 7), image)


# --- folders ---------------------------------------------------------------


def test_folder_validation_fraction_split(folder):
    train = _load(folder, "train")
    validation = _load(folder, "validation")
    assert train.format == validation.format == "folder"
    assert train.class_names == sorted(CLASS_NAMES)
    assert (train.num_samples, validation.num_samples) == (29, 7)
    assert not set(train.files) & set(validation.files)
    every = {str(p) for p in folder.rglob("*.png")}
    assert set(train.files) | set(validation.files) == every
    # The same split as Keras's validation_split with the same seed.
    for subset, data in [("training", train), ("validation", validation)]:
        keras_files = keras.utils.image_dataset_from_directory(
            folder,
            validation_split=0.2,
            subset=subset,
            seed=0,
            verbose=False,
        ).file_paths
        assert set(keras_files) == set(data.files)
    other = _load(folder, "validation", seed=1)
    assert set(other.files) != set(validation.files)


def test_folder_eval_labels_match_images_in_path_order(folder):
    data = _load(folder, "validation", batch_size=4)
    assert data.files == tuple(sorted(data.files))
    found = _identify_batches(data.dataset, data.class_names)
    indices = [int(os.path.basename(path)[:-4]) for path in data.files]
    assert found == [(i % NUM_CLASSES, i) for i in indices]


def test_folder_train_is_shuffled_repeated_batched(folder):
    data = _load(folder, "train", is_training=True, batch_size=4)
    assert data.num_samples == 29
    images_, _ = next(iter(data.dataset))
    assert images_.shape == (4, SIZE, SIZE, 3)
    batches = data.dataset.take(15)
    found = [i for _, i in _identify_batches(batches, data.class_names)]
    first, second = found[:29], found[29:58]
    every = sorted(int(os.path.basename(f)[:-4]) for f in data.files)
    assert sorted(first) == every and sorted(second) == every
    assert first != every and first != second


def test_folder_with_train_and_validation_subfolders(tmp_path, images):
    datasets.write_image_folder(
        *images, tmp_path / "train", class_names=CLASS_NAMES
    )
    datasets.write_image_folder(
        images[0][:6],
        images[1][:6],
        tmp_path / "validation",
        class_names=CLASS_NAMES,
    )
    assert _load(tmp_path, "train").num_samples == NUM_IMAGES
    data = _load(tmp_path, "validation")
    assert data.num_samples == 6 and data.num_classes == 3
    assert all("/validation/" in f for f in data.files)


def test_folder_jpeg(tmp_path, images):
    datasets.write_image_folder(
        *images, tmp_path, class_names=CLASS_NAMES, image_format="jpeg"
    )
    data = _load(tmp_path, "validation", batch_size=7)
    assert all(f.endswith(".jpg") for f in data.files)
    indices = [int(os.path.basename(path)[:-4]) for path in data.files]
    found = _identify_batches(data.dataset, data.class_names)
    assert found == [(i % NUM_CLASSES, i) for i in indices]


# --- errors ----------------------------------------------------------------


def test_missing_dataset_dir(tmp_path):
    with pytest.raises(
        ValueError, match="dataset_dir='.*nothing', which does not exist"
    ):
        _load(tmp_path / "nothing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="file', which is not a directory"):
        _load(tmp_path / "file")


def test_no_images_lists_what_was_looked_for(tmp_path):
    (tmp_path / "empty_class").mkdir()
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError) as error:
        _load(tmp_path, "validation")
    message = str(error.value)
    assert "No images of split 'validation'" in message
    assert str(tmp_path / "*_validation_*.tfrecord") in message
    assert "class subfolders" in message
    assert "['empty_class', 'notes.txt']" in message


def _garbage_shard(directory, images):
    datasets.write_tfrecords(
        *images, directory, name="toy", split="train", shards=2
    )
    bad = directory / "toy_train_00002-of-00003.tfrecord"
    bad.write_bytes(b"not a tfrecord file at all" * 10)
    return f"shard '{bad}' could not be read"


def _not_an_example(directory, images):
    path = directory / "toy_train_00000-of-00001.tfrecord"
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(b"\xff\x00garbage")
    return (
        f"first record of the TFRecord shard '{path}' is not a "
        "tf.train.Example. Expected a tf.train.Example with `image/encoded`"
    )


def _no_label(directory, images):
    path = directory / "toy_train_00000-of-00001.tfrecord"
    encoded = tf.io.encode_png(images[0][0]).numpy()
    feature = {
        "image/encoded": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[encoded])
        )
    }
    example = tf.train.Example(features=tf.train.Features(feature=feature))
    with tf.io.TFRecordWriter(str(path)) as writer:
        writer.write(example.SerializeToString())
    return (
        f"shard '{path}' is a tf.train.Example with features "
        r"\[image/encoded \(bytes_list\)\]. Expected"
    )


def _label_outside_labels_txt(directory, images):
    datasets.write_tfrecords(
        *images, directory, name="toy", split="train", shards=1
    )
    (directory / "labels.txt").write_text("0:a\n1:b\n")
    return "holds labels from 0 to 2, but .*names 2 classes"


def _undecodable_first_image(directory, images):
    path = _one_shard(directory, images)
    _rewrite_record(path, 0, encoded=b"bad")
    return (
        f"image of the first record of the TFRecord shard '{path}' could "
        "not be decoded"
    )


def _negative_label(directory, images):
    path = _one_shard(directory, images)
    _rewrite_record(path, 1, label=-1)
    return (
        f"shard '{path}' holds labels from -1 to 2, but the shards of .* "
        "have 3 classes"
    )


def _labels_txt_without_colon(directory, images):
    _one_shard(directory, images)
    (directory / "labels.txt").write_text("0:a\nb\n")
    return f"Invalid line in '{directory / 'labels.txt'}': 'b'"


def _labels_txt_with_a_gap(directory, images):
    _one_shard(directory, images)
    (directory / "labels.txt").write_text("0:a\n2:b\n")
    return r"labels in .* are \[0, 2\]"


def _empty_shards(directory, images):
    with tf.io.TFRecordWriter(str(directory / "t_train_0-of-1.tfrecord")):
        pass
    return "hold no records"


def _undecodable_image_file(directory, images):
    datasets.write_image_folder(*images, directory, class_names=CLASS_NAMES)
    bad = directory / "green" / "00000_bad.png"
    bad.write_bytes(b"garbage, not a png")
    return f"image file '{bad}' could not be decoded"


def _truncated_shard(directory, images):
    path = _one_shard(directory, images)
    path.write_bytes(path.read_bytes()[:-50])
    return (
        f"shard '{path}' could not be read: record 3 \\(counting from 0\\) "
        r"is truncated or damaged \(TensorFlow said: truncated record at "
        r"\d+.*\). Re-convert the shard"
    )


def _one_class_folder(directory, images):
    datasets.write_image_folder(
        images[0][:4], [0] * 4, directory, class_names=["only"]
    )
    return r"Found 1 class in .*\['only'\]"


def _one_class_tfrecord(directory, images):
    datasets.write_tfrecords(
        images[0][:4], [0] * 4, directory, name="one", split="train", shards=1
    )
    return "Found 1 class in"


@pytest.mark.parametrize(
    "damage",
    [
        _garbage_shard,
        _not_an_example,
        _no_label,
        _label_outside_labels_txt,
        _undecodable_first_image,
        _negative_label,
        _labels_txt_without_colon,
        _labels_txt_with_a_gap,
        _empty_shards,
        _undecodable_image_file,
        _truncated_shard,
        _one_class_folder,
        _one_class_tfrecord,
    ],
    ids=lambda damage: damage.__name__.lstrip("_"),
)
def test_a_damaged_dataset_is_named_before_any_step(tmp_path, images, damage):
    expected = damage(tmp_path, images)
    with pytest.raises(ValueError, match=expected):
        _load(tmp_path)


def _rewrite_record(path, index, *, encoded=None, label=None):
    """Replaces the image or the label of record `index` of a shard."""
    records = [r.numpy() for r in tf.data.TFRecordDataset(str(path))]
    example = tf.train.Example.FromString(records[index])
    feature = example.features.feature
    if encoded is not None:
        feature["image/encoded"].bytes_list.value[0] = encoded
    if label is not None:
        feature["image/class/label"].int64_list.value[0] = label
    records[index] = example.SerializeToString()
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)


def _one_shard(directory, images):
    datasets.write_tfrecords(
        images[0][:4],
        [0, 1, 2, 0],
        directory,
        name="t",
        split="train",
        shards=1,
    )
    return directory / "t_train_00000-of-00001.tfrecord"


def test_an_image_deeper_in_a_shard_is_named_after_the_read_fails(
    tmp_path, images
):
    """Found at the read (TensorFlow's error does not name it), then named
    by `check_images`: the record and its shard."""
    shard = _one_shard(tmp_path, images)
    _rewrite_record(shard, 2, encoded=b"bad")
    data = _load(tmp_path, batch_size=2)
    assert data.num_samples == 4
    with pytest.raises(tf.errors.InvalidArgumentError) as read:
        list(data.dataset)
    assert str(shard) not in str(read.value)
    with pytest.raises(datasets.DamagedImageError) as named:
        data.check_images(read.value)
    assert named.value.found == [
        (
            f"record 2 of the TFRecord shard {str(shard)!r}",
            "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, "
            "BMP, WebP required.",
        )
    ]
    assert str(named.value).startswith(
        f"1 image does not decode:\n  record 2 of the TFRecord shard "
        f"{str(shard)!r}: Unknown image file format."
    )
    assert "Re-convert each shard from images that decode" in str(named.value)


def _random_bytes(path):
    path.write_bytes(bytes(range(7, 256)))


def _cut_short(path):
    path.write_bytes(path.read_bytes()[:60])


def _emptied(path):
    path.write_bytes(b"")


@pytest.mark.parametrize(
    "damage, said",
    [
        (_random_bytes, "Unknown image file format."),
        (_cut_short, "Invalid PNG data, size 60"),
        (_emptied, "Input is empty."),
    ],
    ids=["random_bytes", "truncated", "empty"],
)
def test_an_image_deeper_in_a_folder_is_named_after_the_read_fails(
    tmp_path, images, damage, said, monkeypatch
):
    """`load` decodes the first image of each class; another fails at
    the read, and `check_images` names the file, decoding only the
    suspects TensorFlow's message points to (of its size, or of no known
    format): the damaged file, not the others."""
    datasets.write_image_folder(*images, tmp_path, class_names=CLASS_NAMES)
    data = _load(tmp_path, batch_size=4)
    bad = sorted(f for f in data.files if "/green/" in f)[1]
    damage(pathlib.Path(bad))
    with pytest.raises(tf.errors.InvalidArgumentError) as read:
        list(data.dataset)
    suspects = []
    search = _pipeline.undecodable

    def spy(*args):
        suspects.append(args[-1])
        return search(*args)

    monkeypatch.setattr(_pipeline, "undecodable", spy)
    with pytest.raises(datasets.DamagedImageError) as named:
        data.check_images(read.value)
    (suspect,) = suspects
    chosen = [f for f in data.files if suspect(tf.io.read_file(f))]
    assert chosen == [bad]
    ((where, tf_said),) = named.value.found
    assert where == repr(bad)
    assert tf_said.startswith(said)
    assert f"1 image does not decode:\n  {bad!r}: {said}" in str(named.value)
    assert "Remove or replace each file" in str(named.value)


def test_check_images_decodes_every_image(tmp_path, images):
    datasets.write_image_folder(*images, tmp_path, class_names=CLASS_NAMES)
    data = _load(tmp_path, batch_size=4)
    assert data.check_images() is None
    bad = sorted(data.files)[-2:]
    for path in bad:
        _emptied(pathlib.Path(path))
    with pytest.raises(
        datasets.DamagedImageError, match="^2 images do not decode:"
    ) as named:
        data.check_images()
    assert [where for where, _ in named.value.found] == [repr(p) for p in bad]


def test_different_classes_in_train_and_validation(tmp_path, images):
    datasets.write_image_folder(
        *images, tmp_path / "train", class_names=CLASS_NAMES
    )
    datasets.write_image_folder(
        images[0][:4],
        [0, 1, 0, 1],
        tmp_path / "validation",
        class_names=["red", "green"],
    )
    with pytest.raises(ValueError, match="class subfolders of .*differ"):
        _load(tmp_path, "validation")


def test_bad_split(shards):
    with pytest.raises(
        ValueError, match="Received: split=''. Expected a split"
    ):
        _load(shards, "")
    # A split that is not there is named, with the files looked for.
    with pytest.raises(
        datasets.MissingSplitError,
        match=r"No images of split 'test' found in .*/\*_test_\*\.tfrecord'",
    ):
        _load(shards, "test")
    # A named dataset's splits are TF-Slim's.
    with pytest.raises(
        ValueError,
        match="split name 'test' was not recognized for dataset 'flowers'. "
        "Expected one of 'train', 'validation'",
    ):
        _load(shards, "test", dataset_name="flowers")


def test_batch_size_larger_than_training_split(shards):
    with pytest.raises(
        ValueError,
        match="Received: batch_size=37, larger than the 36 images of split "
        "'train'",
    ):
        _load(shards, is_training=True, batch_size=37)
    assert _load(shards, batch_size=37).num_samples == 36


def test_validation_fraction_leaving_no_image(tmp_path, images):
    datasets.write_image_folder(
        images[0][:4], [0, 1, 2, 0], tmp_path, class_names=CLASS_NAMES
    )
    with pytest.raises(
        ValueError, match="validation_fraction=0.2, which leaves no"
    ):
        _load(tmp_path, "validation")
    assert _load(tmp_path, "train").num_samples == 4


@pytest.mark.parametrize(
    "argument, value, expected",
    [
        ("batch_size", 0, "a positive integer"),
        ("seed", -1, "a non-negative integer"),
        ("seed", 1.5, "a non-negative integer"),
        ("validation_fraction", 1.0, r"a float in \(0, 1\)"),
        ("validation_fraction", 0, r"a float in \(0, 1\)"),
        ("image_size", None, "a positive integer"),
        ("is_training", 1, "True or False"),
    ],
)
def test_bad_arguments(shards, argument, value, expected):
    with pytest.raises(
        ValueError, match=f"Received: {argument}={value!r}. Expected {expected}"
    ):
        _load(shards, **{argument: value})


def test_bad_preprocessing_name(shards):
    with pytest.raises(ValueError, match="Received: name='resnet'"):
        _load(shards, preprocessing_name="resnet")


def test_write_image_folder_checks_labels(tmp_path, images):
    with pytest.raises(ValueError, match=r"Received: labels=\[3\]"):
        datasets.write_image_folder(
            images[0][:2], [0, 3], tmp_path, class_names=CLASS_NAMES
        )
