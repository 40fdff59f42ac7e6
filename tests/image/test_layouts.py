"""TF-Slim's dataset layouts: written by `write_dataset` in TF-Slim's file
names and keys, read back by `datasets.load`, and read by TF-Slim's own
`tfexample_decoder` with the features TF-Slim's datasets/*.py declare."""

import hashlib
import os

import numpy as np
import pytest

from keras_slim.image import datasets
from keras_slim.image.datasets import layouts
from tests import tf_slim_peer

# name -> (image shape, labels of the images, held-out split)
CASES = {
    "flowers": ((24, 24, 3), range(5), "validation"),
    "cifar10": ((32, 32, 3), range(10), "test"),
    "mnist": ((28, 28, 1), range(10), "test"),
    "imagenet": ((20, 20, 3), range(1, 1001), "validation"),
    "visualwakewords": ((16, 16, 3), range(2), "val"),
}
COUNT = 12


def _written(root, name, split, seed):
    shape, labels, _ = CASES[name]
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, (COUNT, *shape), dtype=np.uint8)
    labels = rng.choice(list(labels), COUNT)
    labels[:2] = [min(CASES[name][1]), max(CASES[name][1])]
    one_file = name in ("cifar10", "mnist")  # TF-Slim's: one file a split
    paths = datasets.write_dataset(
        images, labels, root / name, name, split, shards=None if one_file else 3
    )
    return images, labels, paths


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    result = {}
    for seed, name in enumerate(CASES):
        held_out = CASES[name][2]
        result[name] = {
            split: _written(root, name, split, 2 * seed + i)
            for i, split in enumerate(("train", held_out))
        }
    return root, result


def _key(image, label):
    return int(label), hashlib.sha1(np.ascontiguousarray(image)).hexdigest()


def _read(root, name, split, **kwargs):
    size = CASES[name][0][0]
    data = datasets.load(
        str(root / name),
        split,
        image_size=size,
        batch_size=5,
        is_training=False,
        preprocessing_name="digits",
        dataset_name=name,
        **kwargs,
    )
    pairs = []
    for images, labels in data.dataset:
        for image, label in zip(images.numpy(), labels.numpy()):
            pixels = np.round(image * 255).astype(np.uint8)
            pairs.append(_key(pixels, np.argmax(label)))
    return data, sorted(pairs)


def test_file_names_are_tf_slims(written):
    root, _ = written
    assert sorted(os.listdir(root / "cifar10")) == [
        "cifar10_test.tfrecord",
        "cifar10_train.tfrecord",
    ]
    assert sorted(os.listdir(root / "mnist")) == [
        "mnist_test.tfrecord",
        "mnist_train.tfrecord",
    ]
    assert sorted(os.listdir(root / "imagenet"))[:2] == [
        "train-00000-of-00003",
        "train-00001-of-00003",
    ]
    assert "flowers_validation_00002-of-00003.tfrecord" in os.listdir(
        root / "flowers"
    )
    assert "val.record-00000-of-00003" in os.listdir(root / "visualwakewords")


@pytest.mark.parametrize("name", list(CASES))
def test_each_layout_reads_back_what_was_written(written, name):
    root, splits = written
    for split, (images, labels, _) in splits[name].items():
        data, pairs = _read(root, name, split)
        assert data.num_samples == COUNT
        assert data.num_classes == layouts.LAYOUTS[name].num_classes
        assert data.channels == CASES[name][0][2]
        assert pairs == sorted(map(_key, images, labels))


def test_imagenet_labels_offset_reads_1000_classes(written):
    root, splits = written
    images, labels, _ = splits["imagenet"]["validation"]
    data, pairs = _read(root, "imagenet", "validation", labels_offset=1)
    assert data.num_classes == 1000
    assert pairs == sorted(map(_key, images, labels - 1))
    with pytest.raises(ValueError, match="labels_offset=2, but the images"):
        _read(root, "imagenet", "validation", labels_offset=2)


def test_use_grayscale_gives_one_channel(written):
    root, _ = written
    data, _ = _read(root, "flowers", "train", use_grayscale=True)
    assert data.channels == 1
    images, _ = next(iter(data.dataset))
    assert images.shape[-1] == 1


@pytest.mark.parametrize(
    "name, split, message",
    [
        ("cifar10", "validation", "Expected one of 'train', 'test'"),
        ("visualwakewords", "validation", "Expected one of 'train', 'val'"),
        ("mnist", "train_", "split name 'train_' was not recognized"),
    ],
)
def test_a_split_the_dataset_lacks_is_named(written, name, split, message):
    root, _ = written
    with pytest.raises(ValueError, match=message):
        _read(root, name, split)


def test_missing_files_name_the_pattern(tmp_path):
    (tmp_path / "cifar10").mkdir()
    with pytest.raises(
        datasets.MissingSplitError,
        match=r"dataset 'cifar10': TFRecord files matching .*cifar10_test"
        r"\.tfrecord'",
    ):
        _read(tmp_path, "cifar10", "test")


def test_a_labels_file_of_the_wrong_size_is_named(tmp_path):
    images = np.zeros((4, 32, 32, 3), np.uint8)
    datasets.write_dataset(
        images,
        [0, 1, 2, 3],
        tmp_path / "cifar10",
        "cifar10",
        "train",
        class_names=["a", "b", "c", "d"],
    )
    with pytest.raises(ValueError, match="names 4 classes; the dataset has 10"):
        _read(tmp_path, "cifar10", "train")


# TF-Slim's datasets/*.py: the features and the image handler of each.
_PEER = """
# tf_slim 1.1.0 calls control_flow_ops.case, which TF 2.21 moved.
from tensorflow.python.ops import control_flow_ops
control_flow_ops.case = tf1.case
control_flow_ops.cond = tf1.cond
root = {root!r}
layouts = {layouts!r}
result = {{}}
for name, (files, formats, shape, channels) in layouts.items():
    keys_to_features = {{
        "image/encoded": tf1.FixedLenFeature((), tf.string, default_value=""),
        "image/format": tf1.FixedLenFeature(
            (), tf.string, default_value=formats),
        "image/class/label": tf1.FixedLenFeature(
            [], tf.int64, default_value=tf.zeros([], dtype=tf.int64)),
    }}
    handler = (slim.tfexample_decoder.Image(shape=shape, channels=channels)
               if shape else slim.tfexample_decoder.Image())
    decoder = slim.tfexample_decoder.TFExampleDecoder(
        keys_to_features,
        {{"image": handler,
          "label": slim.tfexample_decoder.Tensor("image/class/label")}})
    serialized = tf1.placeholder(tf.string, [])
    image, label = decoder.decode(serialized, ["image", "label"])
    pairs = []
    with tf1.Session() as session:
        for path in files:
            for record in tf1.io.tf_record_iterator(path):
                i, l = session.run([image, label], {{serialized: record}})
                import hashlib
                pairs.append([int(l), hashlib.sha1(
                    np.ascontiguousarray(i.astype(np.uint8))).hexdigest()])
    result[name] = sorted(pairs)
print(json.dumps(result))
"""

# name -> TF-Slim's default format, Image handler shape and channels.
_TF_SLIM_DECODERS = {
    "flowers": ("png", None, 3),
    "cifar10": ("png", [32, 32, 3], 3),
    "mnist": ("raw", [28, 28, 1], 1),
    "imagenet": ("jpeg", None, 3),
    "visualwakewords": ("jpeg", None, 3),
}


def test_tf_slims_decoder_reads_the_written_files(written):
    """TF-Slim's own tfexample_decoder, with each dataset's features as
    TF-Slim's datasets/*.py declare them, reads the same images and
    labels as `datasets.load`."""
    root, splits = written
    peer_layouts = {
        name: (splits[name]["train"][2], *_TF_SLIM_DECODERS[name])
        for name in CASES
    }
    peer = tf_slim_peer.run(
        _PEER.format(root=str(root), layouts=peer_layouts), timeout=300
    )
    for name in CASES:
        _, ours = _read(root, name, "train")
        assert [tuple(p) for p in peer[name]] == ours, name
