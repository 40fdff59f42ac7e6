"""The recipes' augmentation (RandAugment, MixUp, CutMix): off by default,
stateless per position, exactly resumable, labels as drawn."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_slim import _keras
from keras_slim.image import datasets
from keras_slim.image import train_image_classifier as cli
from keras_slim.image.datasets import _augment
from keras_slim.image.datasets import digits

SIZE = 16
RECIPE = {"randaugment": (2, 9), "mixup_alpha": 0.8, "cutmix_alpha": 1.0}


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (24, 20, 20, 3), dtype=np.uint8)
    directory = tmp_path_factory.mktemp("shards")
    datasets.write_tfrecords(
        images,
        np.arange(24) % 3,
        directory,
        name="toy",
        split="train",
        shards=2,
    )
    return directory


def _load(shards, **recipe):
    return datasets.load(
        str(shards),
        "train",
        image_size=SIZE,
        batch_size=4,
        is_training=True,
        preprocessing_name="lenet",
        seed=3,
        **recipe,
    ).dataset


def _batches(data, count):
    return [(x.numpy(), y.numpy()) for x, y in data.take(count)]


def _assert_same(batches, others):
    assert len(batches) == len(others)
    for (x, y), (x2, y2) in zip(batches, others):
        np.testing.assert_array_equal(x, x2)
        np.testing.assert_array_equal(y, y2)


def test_off_builds_no_layer_and_is_the_pipeline_without_them(
    shards, monkeypatch
):
    before = _batches(_load(shards), 2)

    def refused(*args, **kwargs):
        raise AssertionError("a recipe layer was built with the recipe off")

    for name in ("RandAugment", "MixUp", "CutMix"):
        monkeypatch.setattr(keras.layers, name, refused)
    off = _load(shards, randaugment=None, mixup_alpha=0.0, cutmix_alpha=0)
    _assert_same(_batches(off, 2), before)
    digits.dataset_fn(*digits.load()[0], 8, 10)()


def test_the_same_seed_and_position_draw_the_same_image():
    image = tf.constant(
        np.random.default_rng(1).integers(0, 256, (20, 20, 3), np.uint8)
    )
    recipe = _augment.Augmentation(randaugment=(2, 9))
    one, two = recipe.image_fn((0, 255)), recipe.image_fn((0, 255))
    seeds = [tf.constant([3, k], tf.int64) for k in range(8)]
    first = [one(image, seed).numpy() for seed in seeds]
    again = [two(image, seed).numpy() for seed in seeds]
    np.testing.assert_array_equal(first, again)
    assert all(out.dtype == np.uint8 for out in first)
    # Positions draw their own ops and strengths.
    distinct = {out.tobytes() for out in first}
    assert len(distinct) >= 6 and image.numpy().tobytes() not in distinct


@pytest.mark.parametrize("source", ["shards", "digits"])
def test_a_pipeline_restored_at_a_position_goes_on_as_the_uninterrupted(
    source, shards, tmp_path
):
    """Saving the iterator after 3 batches and restoring it into another
    build of the pipeline (what a resumed run does) gives the batches the
    uninterrupted run read next: every draw is a function of the
    position."""

    def build():
        if source == "shards":
            return _load(shards, **RECIPE)
        recipe = _augment.Augmentation(**RECIPE)
        return digits.dataset_fn(
            *digits.load()[0], 8, 10, augmentation=recipe
        )()

    data = build()
    assert _keras.dataset_external_state(data) is None
    iterator = iter(data)
    for _ in range(3):
        next(iterator)
    path = tf.train.Checkpoint(data=iterator).write(str(tmp_path / "data"))
    uninterrupted = [next(iterator) for _ in range(2)]
    resumed = iter(build())
    tf.train.Checkpoint(data=resumed).read(path).assert_consumed()
    _assert_same(
        [(x.numpy(), y.numpy()) for x, y in (next(resumed) for _ in range(2))],
        [(x.numpy(), y.numpy()) for x, y in uninterrupted],
    )
    # Mixed: the labels are soft, and sum to 1.
    labels = np.concatenate([y.numpy() for _, y in uninterrupted])
    np.testing.assert_allclose(labels.sum(axis=1), 1.0, rtol=1e-6)
    assert ((labels > 0) & (labels < 1)).any()


def test_a_dataset_function_traced_in_a_tf_function_makes_its_layers_once():
    """Parameter-server workers trace the dataset function: the layers'
    (unused) seed-generator variables are made once, outside it."""
    recipe = _augment.Augmentation(randaugment=(1, 5), mixup_alpha=0.8)
    make = digits.dataset_fn(*digits.load()[0], 8, 10, augmentation=recipe)

    @tf.function
    def first_labels():
        return make().take(1).get_single_element()[1]

    np.testing.assert_allclose(first_labels().numpy().sum(1), 1.0, rtol=1e-6)


def _batch(seed):
    """4 distinct images, each its own class (a one-hot of 4)."""
    images = np.random.default_rng(seed).uniform(size=(4, 8, 8, 3))
    return tf.constant(images, tf.float32), tf.eye(4)


def _partner(labels, i):
    """The image mixed into image `i`, from its label: itself if none."""
    others = np.delete(labels[i], i)
    if others.max() == 0:
        return i
    return int(np.argmax(np.where(np.arange(4) == i, -1, labels[i])))


def test_mixup_labels_are_the_drawn_blend_of_the_images():
    mix = _augment.Augmentation(mixup_alpha=0.8).batch_fn()
    partners = 0
    for seed in range(6):
        images, labels = _batch(seed)
        out, soft = (t.numpy() for t in mix(images, labels, [5, seed]))
        np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
        for i in range(4):
            j, lam = _partner(soft, i), soft[i, i]
            want = lam * images[i] + (1 - lam) * images[j]
            if j == i:
                want, lam = images[i], 1.0
            np.testing.assert_allclose(out[i], want, rtol=1e-5, atol=1e-6)
            partners += j != i
    assert partners >= 12


def test_cutmix_label_weight_is_the_pasted_area():
    mix = _augment.Augmentation(cutmix_alpha=1.0).batch_fn()
    pasted_some = 0
    for seed in range(6):
        images, labels = _batch(seed)
        out, soft = (t.numpy() for t in mix(images, labels, [5, seed]))
        np.testing.assert_allclose(soft.sum(axis=1), 1.0, rtol=1e-6)
        for i in range(4):
            j = _partner(soft, i)
            mine = np.all(out[i] == images[i], axis=-1)
            theirs = np.all(out[i] == images[j], axis=-1)
            assert (mine | theirs).all()  # each pixel from one or the other
            if j != i:
                area = theirs.mean()
                assert soft[i, j] == pytest.approx(area, abs=1e-6)
                assert soft[i, i] == pytest.approx(1 - area, abs=1e-6)
                pasted_some += 0 < area < 1
    assert pasted_some >= 6


def test_with_both_each_batch_is_mixed_up_or_cut_mixed():
    mix = _augment.Augmentation(mixup_alpha=0.8, cutmix_alpha=1.0)
    mix = mix.batch_fn()
    kinds = []
    for seed in range(16):
        images, labels = _batch(0)
        out = mix(images, labels, [5, seed])[0].numpy()
        # Cut-mixed pixels are exactly some image's; blended ones not.
        exact = [
            (np.abs(out[i][None] - images.numpy()).max(-1) == 0).any(0).all()
            for i in range(4)
        ]
        kinds.append("cutmix" if all(exact) else "mixup")
    assert 4 <= kinds.count("cutmix") <= 12, kinds


def test_label_smoothing_of_mixed_labels_is_timms_order():
    """Keras's loss smooths the mixed labels; timm mixes smoothed ones:
    the same (both linear), so --label_smoothing goes with the mix."""
    rng = np.random.default_rng(0)
    y1, y2 = np.eye(5)[[1, 3]], np.eye(5)[[4, 3]]
    lam = np.array([[0.3], [0.9]])
    logits = rng.normal(size=(2, 5)).astype("float32")
    smooth = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=0.1
    )
    plain = keras.losses.CategoricalCrossentropy(from_logits=True)
    timm = lam * (y1 * 0.9 + 0.02) + (1 - lam) * (y2 * 0.9 + 0.02)
    assert float(smooth(lam * y1 + (1 - lam) * y2, logits)) == pytest.approx(
        float(plain(timm, logits)), rel=1e-6
    )


def test_accuracy_on_soft_labels_is_the_heavier_labels():
    """The command's "accuracy" (categorical: argmax of both) counts a
    mixed image as its larger share's class."""
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(3)])
    model.compile(
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    x = np.random.default_rng(0).normal(size=(32, 3)).astype("float32")
    soft = np.random.default_rng(1).dirichlet([1, 1, 1], 32).astype("float32")
    got = model.evaluate(x, soft, verbose=0, return_dict=True)["accuracy"]
    want = np.mean(soft.argmax(1) == model.predict(x, verbose=0).argmax(1))
    assert got == pytest.approx(want)


@pytest.mark.parametrize(
    "recipe, message",
    [
        ({"randaugment": (0, 5)}, r"Received: randaugment=\(0, 5\)"),
        ({"randaugment": (12, 5)}, r"num_ops an integer in \[1, 11\]"),
        ({"randaugment": (2, 11)}, r"magnitude a number in \[0, 10\]"),
        ({"randaugment": (2, -1.0)}, r"Received: randaugment=\(2, -1.0\)"),
        ({"mixup_alpha": -0.2}, "Received: mixup_alpha=-0.2"),
        ({"cutmix_alpha": 1.5}, r"Received: cutmix_alpha=1.5. Expected a"),
    ],
)
def test_bad_recipes_are_named(recipe, message, shards):
    with pytest.raises(ValueError, match=message):
        _augment.Augmentation(**recipe)
    with pytest.raises(ValueError, match=message):
        _load(shards, **recipe)


def test_augmentation_is_for_training(shards):
    with pytest.raises(ValueError, match="is_training=False"):
        datasets.load(
            str(shards),
            "train",
            image_size=SIZE,
            batch_size=4,
            is_training=False,
            preprocessing_name="inception",
            mixup_alpha=0.2,
        )


@pytest.mark.parametrize(
    "args, message",
    [
        (["--randaugment", "2"], "flag --randaugment=2: must be N,M"),
        (["--mixup_alpha", "-1"], "flag --mixup_alpha=-1"),
        (["--warmup_epochs", "-1"], "flag --warmup_epochs=-1"),
    ],
)
def test_bad_recipe_flags_exit_2(args, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--train_dir", str(tmp_path), *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["--randaugment", "0,9"], "Received: randaugment=(0, 9.0)"),
        (["--cutmix_alpha", "2"], "Received: cutmix_alpha=2.0"),
        (
            ["--warmup_epochs", "1", "--max_number_of_steps", "40"],
            "not fewer than max_number_of_steps=40",
        ),
    ],
)
def test_bad_recipe_values_exit_2_before_any_step(
    args, message, tmp_path, capsys
):
    assert cli.main(["--train_dir", str(tmp_path), *args]) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("model.ckpt*"))


def test_the_command_trains_with_the_recipe_flags(tmp_path, capsys):
    """The bundled digits (one channel) with every recipe flag on."""
    code = cli.main(
        [
            *["--train_dir", str(tmp_path), "--max_number_of_steps", "6"],
            *["--randaugment", "2,9", "--mixup_alpha", "0.8"],
            *["--cutmix_alpha", "1.0", "--label_smoothing", "0.1"],
            *["--learning_rate_decay_type", "cosine"],
            *["--warmup_epochs", "0.05", "--log_every_n_steps", "1"],
            *["--optimizer", "momentum", "--save_summaries_secs", "3600"],
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out[-3000:]
    losses = [
        float(m) for m in re.findall(r"global step \d+: loss = (\S+)", out)
    ]
    assert len(losses) == 6 and np.isfinite(losses).all(), out[-3000:]
    assert "held-out accuracy" in out


def test_two_clones_with_the_recipes_train_as_one_device(
    tmp_path, capsys, monkeypatch
):
    """Mixing is drawn on the global batch before the strategy splits it,
    so two clones of 4 images take the steps one device takes on 8."""
    # The held-out accuracy printed at the end is not compared: no
    # held-out split, as for a --dataset_dir without one (the command's
    # own path), saves each run an evaluation of 355 digits.
    monkeypatch.setattr(cli, "_held_out_task", lambda flags: None)
    common = [
        *["--max_number_of_steps", "3", "--randaugment", "2,9"],
        *["--mixup_alpha", "0.8", "--cutmix_alpha", "1.0"],
        *["--optimizer", "sgd", "--learning_rate_decay_type", "fixed"],
        *["--save_summaries_secs", "3600", "--nosummarize_activations"],
    ]
    runs = {
        "one": ["--batch_size", "8"],
        "two": ["--batch_size", "4", "--num_clones", "2", "--clone_on_cpu"],
    }
    for name, args in runs.items():
        code = cli.main(["--train_dir", str(tmp_path / name), *common, *args])
        assert code == 0, capsys.readouterr().err[-3000:]
    one, two = (
        tf.train.load_checkpoint(str(tmp_path / name / "model.ckpt-3"))
        for name in runs
    )
    names = [
        name
        for name, _ in tf.train.list_variables(str(tmp_path / "one"))
        if "/.ATTRIBUTES/VARIABLE_VALUE" in name and "model/" in name
    ]
    assert len(names) >= 4  # the net's kernels and biases at least
    for name in names:
        np.testing.assert_allclose(
            one.get_tensor(name), two.get_tensor(name), atol=1e-6, err_msg=name
        )
