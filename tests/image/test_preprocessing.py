"""keras_slim.image.preprocessing: TF-Slim's preprocessing functions."""

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image import preprocessing


@pytest.fixture(scope="module")
def noise():
    rng = np.random.default_rng(0)
    return rng.integers(0, 256, (30, 40, 3), dtype=np.uint8)


@pytest.mark.parametrize(
    "name, low, high",
    [
        ("inception", -1.0, 1.0),
        ("vgg", -123.68, 255.0 - 103.94),
        ("digits", 0.0, 1.0),
    ],
)
@pytest.mark.parametrize("is_training", [True, False])
def test_preprocessing_shape_and_range(noise, name, low, high, is_training):
    preprocess = preprocessing.get_preprocessing(
        name, is_training=is_training, image_size=24
    )
    image = preprocess(noise).numpy()
    assert image.shape == (24, 24, 3) and image.dtype == np.float32
    assert image.min() >= low - 1e-4 and image.max() <= high + 1e-4
    assert image.max() - image.min() > (high - low) / 4


@pytest.mark.parametrize("name", ["inception", "vgg"])
def test_preprocessing_training_is_random_and_seeded(noise, name):
    preprocess = preprocessing.get_preprocessing(
        name, is_training=True, image_size=24
    )
    assert not np.array_equal(preprocess(noise), preprocess(noise))
    np.testing.assert_array_equal(
        preprocess(noise, seed=[0, 7]), preprocess(noise, seed=[0, 7])
    )
    assert not np.array_equal(
        preprocess(noise, seed=[0, 7]), preprocess(noise, seed=[0, 8])
    )


@pytest.mark.parametrize("name", preprocessing.PREPROCESSING)
def test_preprocessing_eval_is_deterministic(noise, name):
    preprocess = preprocessing.get_preprocessing(
        name, is_training=False, image_size=24
    )
    np.testing.assert_array_equal(preprocess(noise), preprocess(noise))


def test_digits_preprocessing_is_resize_and_scale(noise):
    preprocess = preprocessing.get_preprocessing(
        "digits", is_training=True, image_size=40
    )
    square = noise[:, :30]
    image = preprocessing.get_preprocessing(
        "digits", is_training=True, image_size=30
    )(square)
    np.testing.assert_allclose(image, square / 255.0, atol=1e-6)
    assert preprocess(noise).shape == (40, 40, 3)


def test_inception_eval_is_central_crop():
    # A 16x16 image with a black 1-pixel border: the central 87.5% (14x14)
    # leaves the white inside only.
    image = np.zeros((16, 16, 3), np.uint8)
    image[1:-1, 1:-1] = 255
    preprocess = preprocessing.get_preprocessing(
        "inception", is_training=False, image_size=14
    )
    np.testing.assert_allclose(preprocess(image), 1.0)


def test_vgg_subtracts_channel_means():
    means = np.array(preprocessing.VGG_MEANS)
    image = np.broadcast_to(np.round(means), (10, 30, 3)).astype(np.uint8)
    preprocess = preprocessing.get_preprocessing(
        "vgg", is_training=False, image_size=7
    )
    np.testing.assert_allclose(
        preprocess(image),
        np.broadcast_to(np.round(means) - means, (7, 7, 3)),
        atol=1e-4,
    )


def test_vgg_eval_keeps_aspect_ratio():
    # Black, white, black thirds: the smaller side resized to 8 (8x24),
    # the central 7x7 lies in the white third; squashed to 8x8, it would
    # not.
    image = np.zeros((10, 30, 3), np.uint8)
    image[:, 10:20] = 255
    preprocess = preprocessing.get_preprocessing(
        "vgg", is_training=False, image_size=7
    )
    np.testing.assert_allclose(
        preprocess(image),
        np.broadcast_to(255.0 - np.array(preprocessing.VGG_MEANS), (7, 7, 3)),
        atol=1e-3,
    )


def test_preprocessing_in_a_dataset_map(noise):
    preprocess = preprocessing.get_preprocessing(
        "inception", is_training=True, image_size=8
    )
    data = tf.data.Dataset.from_tensors(noise).repeat(2).map(preprocess)
    assert data.element_spec.shape == (8, 8, 3)
    first, second = list(data)
    assert not np.array_equal(first, second)


def test_unknown_preprocessing_name():
    with pytest.raises(
        ValueError,
        match="Received: name='resnet'. Expected one of 'inception', 'vgg', "
        "'digits'",
    ):
        preprocessing.get_preprocessing(
            "resnet", is_training=True, image_size=8
        )


def test_preprocessing_bad_image_size():
    with pytest.raises(ValueError, match="Received: image_size=0"):
        preprocessing.get_preprocessing("vgg", is_training=True, image_size=0)


# --- TFRecords -------------------------------------------------------------
