"""keras_slim.image.preprocessing: TF-Slim's preprocessing functions.

The pixels are compared with TF-Slim's functions stated in TF1's ops and
run in graph mode in one child process (`preprocessing_peer`): evaluation
as it is, training with each random op replaced by what TF1 does after
its draw, given the draws `train_draws` made here.
"""

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image import nets
from keras_slim.image import preprocessing
from keras_slim.image.preprocessing import cifarnet_preprocessing
from keras_slim.image.preprocessing import inception_preprocessing
from keras_slim.image.preprocessing import lenet_preprocessing
from keras_slim.image.preprocessing import preprocessing_factory
from keras_slim.image.preprocessing import vgg_preprocessing
from tests.image import preprocessing_peer

#: research/slim's preprocessing_factory map (its newest version).
TF_SLIM = {
    "cifarnet": "cifarnet",
    "inception": "inception",
    **{
        name: "inception"
        for name in (
            "inception_v1",
            "inception_v2",
            "inception_v3",
            "inception_v4",
            "inception_resnet_v2",
        )
    },
    "lenet": "lenet",
    **{
        name: "inception"
        for name in (
            "mobilenet_v1",
            "mobilenet_v2",
            "mobilenet_v2_035",
            "mobilenet_v3_small",
            "mobilenet_v3_large",
            "mobilenet_v3_small_minimalistic",
            "mobilenet_v3_large_minimalistic",
            "mobilenet_edgetpu",
            "mobilenet_edgetpu_075",
            "mobilenet_v2_140",
            "nasnet_mobile",
            "nasnet_large",
            "pnasnet_mobile",
            "pnasnet_large",
        )
    },
    **{
        f"resnet_v{version}_{depth}": "vgg"
        for version in (1, 2)
        for depth in (50, 101, 152, 200)
    },
    **{name: "vgg" for name in ("vgg", "vgg_a", "vgg_16", "vgg_19")},
}

FAMILIES = {
    "inception": inception_preprocessing,
    "vgg": vgg_preprocessing,
    "cifarnet": cifarnet_preprocessing,
    "lenet": lenet_preprocessing,
}

# (height, width) of the test images: landscape, portrait, odd, smaller
# and larger than the outputs.
SHAPES = {
    "landscape": (37, 53),
    "portrait": (61, 29),
    "odd": (33, 35),
    "small": (11, 17),
    "large": (300, 260),
}

TOLERANCE = 1e-6


def _image(shape, seed=0, channels=3):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (*shape, channels), dtype=np.uint8)


def _numpy(draws):
    """A draws NamedTuple as a flat dict of numpy values, for the peer."""
    flat = {}
    for key, value in draws._asdict().items():
        if hasattr(value, "_asdict"):
            flat.update(_numpy(value))
        elif value is not None:
            flat[key] = np.asarray(value)
    return flat


# --- the cases: (id, ours, the peer's case) --------------------------------


def _eval_cases():
    cases = []
    for shape_name, shape in SHAPES.items():
        image = _image(shape, seed=len(cases))
        for family, size, kwargs in (
            ("inception", (24, 24), {}),
            ("vgg", (16, 16), {"resize_side_min": 20}),
            ("cifarnet", (24, 24), {}),
            ("lenet", (24, 24), {}),
        ):
            cases.append(
                (f"{family}-{shape_name}", family, image, size, kwargs)
            )
    landscape = _image(SHAPES["landscape"], seed=99)
    large = _image(SHAPES["large"], seed=98)
    cases += [
        ("inception-not-square", "inception", landscape, (20, 28), {}),
        (
            "inception-grayscale",
            "inception",
            landscape,
            (24, 24),
            {"use_grayscale": True},
        ),
        (
            "inception-no-crop",
            "inception",
            landscape,
            (24, 24),
            {"crop_image": False},
        ),
        (
            "inception-float32",
            "inception",
            landscape.astype(np.float32) / 255.0,
            (24, 24),
            {},
        ),
        ("vgg-defaults", "vgg", large, (224, 224), {}),
        ("vgg-not-square", "vgg", landscape, (16, 18), {"resize_side_min": 20}),
        ("cifarnet-not-square", "cifarnet", landscape, (20, 28), {}),
        (
            "cifarnet-grayscale",
            "cifarnet",
            landscape,
            (24, 24),
            {"use_grayscale": True},
        ),
        ("lenet-not-square", "lenet", landscape, (20, 28), {}),
        (
            "lenet-grayscale",
            "lenet",
            landscape,
            (24, 24),
            {"use_grayscale": True},
        ),
    ]
    return cases


def _peer_kwargs(family, kwargs):
    """The peer functions' names for the arguments of `preprocess_image`."""
    kwargs = dict(kwargs)
    if family == "inception" and "crop_image" in kwargs:
        kwargs["central_crop"] = kwargs.pop("crop_image")
    return kwargs


def _eval_pairs():
    pairs = {}
    for case_id, family, image, (height, width), kwargs in _eval_cases():
        preprocess = preprocessing.get_preprocessing(
            family, use_grayscale=kwargs.get("use_grayscale", False)
        )
        own = {k: v for k, v in kwargs.items() if k != "use_grayscale"}
        ours = preprocess(image, height, width, **own).numpy()
        peer = {
            "family": family,
            "train": False,
            "image": image,
            "height": height,
            "width": width,
            "kwargs": _peer_kwargs(family, kwargs),
        }
        pairs[f"eval-{case_id}"] = (ours, peer)
    return pairs


def _train_case(case_id, family, image, size, seed, kwargs=None, draws=None):
    """Ours from the seed (the factory's function), the peer's from the
    draws `train_draws` makes of that seed."""
    kwargs = kwargs or {}
    height, width = size
    module = FAMILIES[family]
    seed = None if seed is None else tf.constant(seed)
    shape = tf.shape(image)
    grayscale = kwargs.pop("use_grayscale", False)
    if family == "inception":
        fast = kwargs.get("fast_mode", True)
        if draws is None:
            draws = module.train_draws(seed, shape, kwargs.get("bbox"), fast)
            ours = preprocessing.get_preprocessing(
                family, is_training=True, use_grayscale=grayscale
            )(image, height, width, seed=seed, **kwargs)
        else:
            ours = module.apply_train(
                image, draws, height, width, fast, use_grayscale=grayscale
            )
        peer_kwargs = {"fast_mode": fast, "use_grayscale": grayscale}
    else:
        args = [
            k for k in ("resize_side_min", "resize_side_max") if k in kwargs
        ]
        draws = module.train_draws(
            seed, shape, height, width, *[kwargs[k] for k in args]
        )
        ours = preprocessing.get_preprocessing(
            family, is_training=True, use_grayscale=grayscale
        )(image, height, width, seed=seed, **kwargs)
        peer_kwargs = {"use_grayscale": grayscale} if grayscale else {}
    peer = {
        "family": family,
        "train": True,
        "image": image,
        "height": height,
        "width": width,
        "kwargs": peer_kwargs,
        "draws": _numpy(draws),
    }
    return f"train-{case_id}", (np.asarray(ours), peer)


def _forced_inception_draws(image, seed, method, ordering):
    draws = inception_preprocessing.train_draws(
        tf.constant(seed), tf.shape(image), fast_mode=False
    )
    return draws._replace(
        method=tf.constant(method), ordering=tf.constant(ordering)
    )


def _seeded_train_pairs():
    """Each family on each test image, two seeds each."""
    pairs = {}
    for i, (shape_name, shape) in enumerate(SHAPES.items()):
        image = _image(shape, seed=10 + i)
        cifarnet_size = (16, 16) if shape_name == "small" else (24, 24)
        vgg_sides = {"resize_side_min": 20, "resize_side_max": 40}
        for seed in ([i, 0], [i, 1]):
            case = f"{shape_name}-{seed[1]}"
            pairs.update(
                [
                    _train_case(
                        f"inception-{case}", "inception", image, (24, 24), seed
                    ),
                    _train_case(
                        f"vgg-{case}", "vgg", image, (16, 16), seed, vgg_sides
                    ),
                    _train_case(
                        f"cifarnet-{case}",
                        "cifarnet",
                        image,
                        cifarnet_size,
                        seed,
                    ),
                ]
            )
    return pairs


def _forced_train_pairs():
    """Inception without `fast_mode`: each resize method with each color
    ordering, the other draws seeded."""
    image = _image(SHAPES["landscape"], seed=20)
    pairs = {}
    for method in range(4):
        for ordering in range(4):
            draws = _forced_inception_draws(
                image, [method, ordering], method, ordering
            )
            case = f"inception-full-method{method}-ordering{ordering}"
            pairs.update(
                [
                    _train_case(
                        case,
                        "inception",
                        image,
                        (20, 28),
                        None,
                        {"fast_mode": False},
                        draws,
                    )
                ]
            )
    return pairs


# (id, family, image, output size, seed); their kwargs in TRAIN_KWARGS.
TRAIN_CASES = [
    ("inception-full-seeded", "inception", "landscape", (24, 24), [5, 5]),
    ("inception-bbox", "inception", "large", (24, 24), [6, 6]),
    ("inception-grayscale", "inception", "landscape", (24, 24), [7, 7]),
    ("vgg-defaults", "vgg", "large", (224, 224), [8, 8]),
    ("cifarnet-grayscale", "cifarnet", "landscape", (24, 24), [9, 9]),
    ("cifarnet-not-square", "cifarnet", "landscape", (20, 28), [10, 10]),
]
TRAIN_KWARGS = {
    "inception-full-seeded": {"fast_mode": False},
    "inception-bbox": {
        "bbox": np.array(
            [[[0.1, 0.2, 0.6, 0.9], [0.5, 0.0, 1.0, 0.4]]], np.float32
        )
    },
    "inception-grayscale": {"use_grayscale": True},
    "cifarnet-grayscale": {"use_grayscale": True},
}


def _train_pairs():
    pairs = {**_seeded_train_pairs(), **_forced_train_pairs()}
    for case_id, family, image, size, seed in TRAIN_CASES:
        pairs.update(
            [
                _train_case(
                    case_id,
                    family,
                    _image(SHAPES[image], seed=21),
                    size,
                    seed,
                    dict(TRAIN_KWARGS.get(case_id, {})),
                )
            ]
        )
    return pairs


@pytest.fixture(scope="module")
def compared():
    """`{case id: (ours, TF1's)}` for every case, TF1's from one child."""
    pairs = {**_eval_pairs(), **_train_pairs()}
    box_shape = np.array([40, 60, 3], np.int32)
    outputs = preprocessing_peer.run(
        [peer for _, peer in pairs.values()]
        + [{"family": "boxes", "shape": box_shape, "count": 2000}]
    )
    result = {
        case_id: (ours, theirs)
        for (case_id, (ours, _)), theirs in zip(pairs.items(), outputs)
    }
    result["boxes"] = (box_shape, outputs[-1])
    return result


EVAL_IDS = sorted(f"eval-{c[0]}" for c in _eval_cases())


@pytest.mark.parametrize("case_id", EVAL_IDS)
def test_eval_is_tf_slims(compared, case_id):
    ours, theirs = compared[case_id]
    assert ours.dtype == np.float32 and ours.shape == theirs.shape
    assert np.max(np.abs(ours - theirs)) <= TOLERANCE


def test_every_eval_case_ran(compared):
    assert {k for k in compared if k.startswith("eval-")} == set(EVAL_IDS)


def test_training_is_tf_slims_given_the_same_draws(compared):
    cases = {k: v for k, v in compared.items() if k.startswith("train-")}
    assert len(cases) == 5 * 2 * 3 + 16 + 6
    worst = {}
    for case_id, (ours, theirs) in cases.items():
        assert ours.dtype == np.float32, case_id
        assert ours.shape == theirs.shape, case_id
        worst[case_id] = float(np.max(np.abs(ours - theirs)))
    assert {k: v for k, v in worst.items() if v > TOLERANCE} == {}


def test_the_training_cases_draw_both_flips():
    """The seeds of the training cases above flip and do not: both of the
    reference's branches are compared."""
    shape = tf.constant([300, 260, 3])
    draw = {
        "inception": lambda s: inception_preprocessing.train_draws(s, shape),
        "vgg": lambda s: vgg_preprocessing.train_draws(s, shape, 16, 16),
        "cifarnet": lambda s: cifarnet_preprocessing.train_draws(
            s, shape, 24, 24
        ),
    }
    seeds = [[i, j] for i in range(len(SHAPES)) for j in (0, 1)]
    for family, draws in draw.items():
        flips = {bool(draws(tf.constant(seed)).flip) for seed in seeds}
        assert flips == {True, False}, family


# --- the draws: TF1's distributions, deterministic per seed ------------------

COUNT = 400


def _many(draw, count=COUNT):
    """`draw(seed)` for the seeds [3, 0..count), as batched numpy."""
    data = tf.data.Dataset.range(count).map(
        lambda i: draw(tf.stack([tf.constant(3, tf.int64), i]))
    )
    return tf.nest.map_structure(np.asarray, next(iter(data.batch(count))))


def _assert_uniform(values, low, high):
    assert values.min() >= low and values.max() < high
    spread = (values.max() - values.min()) / (high - low)
    assert spread > 0.95
    assert abs(values.mean() - (low + high) / 2) < 0.1 * (high - low)


def _assert_coin(values):
    assert 0.42 < values.mean() < 0.58


def _assert_four_cases(values):
    counts = np.bincount(values, minlength=4)
    assert counts.shape == (4,)
    assert (counts > 0.15 * len(values)).all()


def test_inception_draws_follow_tf1s_distributions():
    draws = _many(
        lambda s: inception_preprocessing.train_draws(
            s, tf.constant([40, 60, 3]), fast_mode=False
        )
    )
    _assert_uniform(draws.color.brightness, -32 / 255, 32 / 255)
    _assert_uniform(draws.color.saturation, 0.5, 1.5)
    _assert_uniform(draws.color.hue, -0.2, 0.2)
    _assert_uniform(draws.color.contrast, 0.5, 1.5)
    _assert_coin(draws.flip)
    _assert_four_cases(draws.method)
    _assert_four_cases(draws.ordering)
    heights, widths = draws.size[:, 0], draws.size[:, 1]
    assert (draws.begin[:, 2] == 0).all() and (draws.size[:, 2] == -1).all()
    assert (draws.begin[:, 0] + heights <= 40).all()
    assert (draws.begin[:, 1] + widths <= 60).all()
    area = heights * widths / (40 * 60)
    assert area.min() >= 0.05 - 0.02 and area.max() <= 1.0
    aspect = widths / heights
    assert aspect.min() > 0.75 - 0.1 and aspect.max() < 1.33 + 0.1


def test_inception_fast_mode_draws_bilinear_and_ordering_0():
    draws = inception_preprocessing.train_draws(
        tf.constant([0, 1]), tf.constant([40, 60, 3])
    )
    assert draws.method == 0 and draws.ordering == 0


@pytest.mark.parametrize("with_bbox", [False, True])
def test_inception_box_is_the_stateless_op_with_tf_slims_arguments(with_bbox):
    shape = tf.constant([40, 60, 3])
    bbox = (
        tf.constant([[[0.1, 0.2, 0.6, 0.9]]])
        if with_bbox
        else tf.constant([[[0.0, 0.0, 1.0, 1.0]]])
    )
    for i in range(8):
        seed = tf.constant([4, i], tf.int64)
        draws = inception_preprocessing.train_draws(
            seed, shape, bbox if with_bbox else None
        )
        box_seed = tf.random.experimental.stateless_split(seed, 5)[0]
        begin, size, distort_bbox = (
            tf.image.stateless_sample_distorted_bounding_box(
                shape,
                bounding_boxes=bbox,
                seed=box_seed,
                min_object_covered=0.1,
                aspect_ratio_range=(0.75, 1.33),
                area_range=(0.05, 1.0),
                max_attempts=100,
                use_image_if_no_bounding_boxes=True,
            )
        )
        np.testing.assert_array_equal(draws.begin, begin)
        np.testing.assert_array_equal(draws.size, size)
        np.testing.assert_array_equal(draws.distort_bbox, distort_bbox)


def test_inception_boxes_are_distributed_as_tf1s_stateful_op(compared):
    shape, (begins, sizes) = compared["boxes"]
    theirs = np.array(sizes)
    ours = _many(
        lambda s: inception_preprocessing.train_draws(s, tf.constant(shape)),
        count=len(theirs),
    ).size
    for values in (
        lambda size: size[:, 0] * size[:, 1] / (shape[0] * shape[1]),
        lambda size: size[:, 1] / size[:, 0],
    ):
        quantiles = [0.1, 0.25, 0.5, 0.75, 0.9]
        np.testing.assert_allclose(
            np.quantile(values(ours), quantiles),
            np.quantile(values(theirs), quantiles),
            rtol=0.1,
        )


def test_vgg_draws_follow_tf1s_distributions():
    draws = _many(
        lambda s: vgg_preprocessing.train_draws(
            s, tf.constant([300, 400, 3]), 224, 224
        )
    )
    sides = draws.resize_side
    assert sides.min() >= 256 and sides.max() <= 512
    assert sides.min() < 270 and sides.max() > 500
    # The smaller side is the drawn one; the crop fits in the resized image.
    new_width = np.rint(400 * (sides.astype(np.float32) / 300)).astype(int)
    assert (draws.offset_height >= 0).all()
    assert (draws.offset_height <= sides - 224).all()
    assert (draws.offset_width <= new_width - 224).all()
    assert draws.offset_width.max() > 0.8 * (new_width.max() - 224)
    _assert_coin(draws.flip)


def test_cifarnet_draws_follow_tf1s_distributions():
    draws = _many(
        lambda s: cifarnet_preprocessing.train_draws(
            s, tf.constant([32, 32, 3]), 32, 32
        )
    )
    for offsets in (draws.offset_height, draws.offset_width):
        assert set(offsets.tolist()) == set(range(9))  # 2 * 4 padding + 1
    _assert_uniform(draws.brightness, -63.0, 63.0)
    _assert_uniform(draws.contrast, 0.2, 1.8)
    _assert_coin(draws.flip)


def test_apply_with_random_selector_runs_one_drawn_case():
    def case(x, c):
        return x + c

    cases = [
        int(
            inception_preprocessing.apply_with_random_selector(
                tf.constant(10), case, 4, seed=[0, i]
            )
        )
        for i in range(40)
    ]
    assert set(cases) == {10, 11, 12, 13}
    again = inception_preprocessing.apply_with_random_selector(
        tf.constant(10), case, 4, seed=[0, 0]
    )
    assert int(again) == cases[0]


@pytest.mark.parametrize(
    "name, kwargs",
    [
        ("inception", {}),
        ("inception", {"fast_mode": False}),
        ("vgg", {"resize_side_min": 20, "resize_side_max": 40}),
        ("cifarnet", {}),
    ],
)
def test_training_is_deterministic_per_seed(name, kwargs):
    image = _image(SHAPES["landscape"])
    preprocess = preprocessing.get_preprocessing(name, is_training=True)

    def run(seed):
        return preprocess(image, 16, 16, seed=seed, **kwargs).numpy()

    np.testing.assert_array_equal(run([0, 7]), run([0, 7]))
    np.testing.assert_array_equal(
        run([0, 7]), run(tf.constant([0, 7], tf.int64))
    )
    assert not np.array_equal(run([0, 7]), run([0, 8]))
    assert not np.array_equal(run(None), run(None))


# --- the factory ---------------------------------------------------------


def test_the_names_are_tf_slims_and_digits():
    assert preprocessing.PREPROCESSING == (*TF_SLIM, "digits")
    for name, family in TF_SLIM.items():
        assert (
            preprocessing_factory._PREPROCESSING_FN_MAP[name]
            is FAMILIES[family]
        ), name


def test_each_nets_default_preprocessing_is_tf_slims_family():
    """TF-Slim's train_image_classifier preprocesses with
    `--preprocessing_name or --model_name`: the net's own entry."""
    mapped = [name for name in nets.NETWORKS if name in TF_SLIM]
    assert len(mapped) >= 20
    for name in mapped:
        assert TF_SLIM[nets.preprocessing_name(name)] == TF_SLIM[name], name
    assert nets.preprocessing_name("digits_cnn") == "digits"
    for name in nets.NETWORKS:
        assert nets.preprocessing_name(name) in preprocessing.PREPROCESSING


def test_keyword_arguments_go_to_the_family():
    image = _image(SHAPES["large"])
    vgg = preprocessing.get_preprocessing("vgg")
    np.testing.assert_array_equal(
        vgg(image, 16, 16, resize_side_min=20),
        vgg_preprocessing.preprocess_for_eval(image, 16, 16, 20),
    )
    inception = preprocessing.get_preprocessing("inception", is_training=True)
    assert not np.array_equal(
        inception(image, 16, 16, seed=[0, 5]),
        inception(image, 16, 16, seed=[0, 5], fast_mode=False),
    )


def test_tf_slims_positional_signatures():
    image = _image(SHAPES["large"])
    seed = [0, 9]
    np.testing.assert_array_equal(
        # image, height, width, is_training, bbox, fast_mode,
        # add_image_summaries, crop_image, use_grayscale
        inception_preprocessing.preprocess_image(
            image, 8, 8, True, None, False, True, True, False, seed=seed
        ),
        # image, height, width, bbox, fast_mode, scope,
        # add_image_summaries, random_crop, use_grayscale
        inception_preprocessing.preprocess_for_train(
            image, 8, 8, None, False, None, True, True, False, seed=seed
        ),
    )
    np.testing.assert_array_equal(
        inception_preprocessing.preprocess_image(image, 8, 8, False),
        # image, height, width, central_fraction, scope, central_crop,
        # use_grayscale
        inception_preprocessing.preprocess_for_eval(
            image, 8, 8, 0.875, None, True, False
        ),
    )
    np.testing.assert_array_equal(
        # image, output_height, output_width, is_training,
        # resize_side_min, resize_side_max, use_grayscale
        vgg_preprocessing.preprocess_image(
            image, 16, 16, True, 20, 40, False, seed=seed
        ),
        vgg_preprocessing.preprocess_for_train(
            image, 16, 16, 20, 40, False, seed=seed
        ),
    )
    np.testing.assert_array_equal(
        # image, output_height, output_width, is_training,
        # add_image_summaries, use_grayscale
        cifarnet_preprocessing.preprocess_image(
            image, 24, 24, True, True, False, seed=seed
        ),
        # image, output_height, output_width, padding,
        # add_image_summaries, use_grayscale
        cifarnet_preprocessing.preprocess_for_train(
            image, 24, 24, 4, True, False, seed=seed
        ),
    )


def test_in_a_dataset_map():
    preprocess = preprocessing.get_preprocessing("inception", is_training=True)
    data = (
        tf.data.Dataset.from_tensors(_image(SHAPES["odd"]))
        .repeat(2)
        .enumerate()
        .map(
            lambda i, x: preprocess(
                x, 8, 8, seed=tf.stack([tf.constant(0, tf.int64), i])
            )
        )
    )
    assert data.element_spec.shape == (8, 8, 3)
    first, second = list(data)
    assert not np.array_equal(first, second)


def test_lenet_is_the_same_in_training():
    image = _image(SHAPES["odd"])
    np.testing.assert_array_equal(
        preprocessing.get_preprocessing("lenet", is_training=True)(
            image, 28, 28
        ),
        preprocessing.get_preprocessing("lenet")(image, 28, 28),
    )


def test_digits_is_resize_and_scale():
    image = _image((30, 30))
    preprocess = preprocessing.get_preprocessing("digits", is_training=True)
    np.testing.assert_allclose(preprocess(image, 30, 30), image / 255.0)
    assert preprocess(image, 40, 20).shape == (40, 20, 3)
    gray = preprocessing.get_preprocessing("digits", use_grayscale=True)
    assert gray(image, 30, 30).shape == (30, 30, 1)


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: preprocessing.get_preprocessing("resnet"),
            "Received: name='resnet'. Expected one of 'cifarnet', "
            "'inception', 'inception_v1'",
        ),
        (
            lambda: preprocessing.get_preprocessing("vgg", is_training=1),
            "Received: is_training=1. Expected True or False",
        ),
        (
            lambda: preprocessing.get_preprocessing("vgg", use_grayscale="y"),
            "Received: use_grayscale='y'. Expected True or False",
        ),
        (
            lambda: preprocessing.get_preprocessing("vgg")(
                _image((8, 8)), 0, 8
            ),
            "Received: output_height=0. Expected a positive integer",
        ),
        (
            lambda: preprocessing.get_preprocessing(
                "inception", is_training=True
            )(_image((8, 8)), 8, 8, seed=[1, 2, 3]),
            r"Received: seed=\[1, 2, 3\]. Expected two integers",
        ),
        (
            lambda: preprocessing.get_preprocessing(
                "inception", is_training=True
            )(_image((8, 8), channels=1), 8, 8),
            "Invalid image for inception's distort_color. Received: an image "
            r"of shape \(8, 8, 1\), 1 channels. Expected 3 \(RGB\) channels",
        ),
        (
            lambda: preprocessing.get_preprocessing("vgg", use_grayscale=True)(
                _image((8, 8)), 8, 8
            ),
            "Received: use_grayscale=True. Expected False for "
            "vgg_preprocessing",
        ),
        (
            lambda: inception_preprocessing.distort_color(
                tf.zeros([4, 4, 3]), 4, fast_mode=False
            ),
            "Received: color_ordering=4. Expected 0, 1, 2 or 3",
        ),
    ],
    ids=[
        "name",
        "is_training",
        "use_grayscale",
        "size",
        "seed",
        "inception-gray-image",
        "vgg-grayscale",
        "color_ordering",
    ],
)
def test_bad_arguments(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_vgg_crop_larger_than_the_resized_image():
    preprocess = preprocessing.get_preprocessing("vgg")
    with pytest.raises(
        tf.errors.InvalidArgumentError, match="Crop size greater than"
    ):
        preprocess(_image((10, 10)), 24, 24, resize_side_min=20)
