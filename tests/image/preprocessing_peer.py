"""TF-Slim's preprocessing in TF1's own ops, in graph mode, in a child
process: the reference `test_preprocessing` compares against.

The functions below state research/slim's preprocessing functions in TF1
API calls (`tf.compat.v1.image.convert_image_dtype`, `central_crop`,
`resize_bilinear(align_corners=False)`, `resize_images`,
`resize_image_with_crop_or_pad`, `adjust_*`, `per_image_standardization`,
...) in TF-Slim's order. In training, each random op is replaced by what
TF1 does after its draw, given the draw: `tf.slice` at the drawn box or
offsets (`sample_distorted_bounding_box`, `random_crop`, vgg's
`random_uniform` offsets), the drawn `resize_images` method and color
ordering (`apply_with_random_selector`), `reverse` when flipped
(`random_flip_left_right`), `adjust_brightness` / `_saturation` / `_hue`
/ `_contrast` by the drawn value (`random_*`).

`run(cases)` pickles the cases to the TF1 child tests/tf_slim_peer.py
keeps, which runs each in graph mode (`tf.compat.v1.
disable_v2_behavior()`) and pickles the outputs back.

A case is a dict: `"family"` (`inception`, `vgg`, `cifarnet`, `lenet`),
`"train"` (bool), `"image"` (a numpy image), `"height"`, `"width"`,
`"kwargs"` (the family function's arguments) and, in training,
`"draws"` (a dict of numpy values). The case `{"family": "boxes",
"shape": ..., "count": n}` returns `n` `(begin, size)` pairs of TF1's
stateful `sample_distorted_bounding_box` with TF-Slim's arguments.
"""

import os
import pickle
import tempfile

from tests import tf_slim_peer

_ROOT = os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)


def run(cases, timeout=300):
    """The outputs of `cases` (a list of dicts), from a TF1 child.

    Args:
        cases: The cases (see the module).
        timeout: Seconds before the child is killed.

    Returns:
        A list: one numpy array (or tuple of arrays) per case.
    """
    with tempfile.TemporaryDirectory() as directory:
        inputs = os.path.join(directory, "in.pkl")
        outputs = os.path.join(directory, "out.pkl")
        with open(inputs, "wb") as f:
            pickle.dump(cases, f)
        tf_slim_peer.run(
            f"""
            if {_ROOT!r} not in sys.path:
                sys.path.insert(0, {_ROOT!r})
            from tests.image import preprocessing_peer
            preprocessing_peer._child({inputs!r}, {outputs!r})
            print("null")
            """,
            timeout=timeout,
        )
        with open(outputs, "rb") as f:
            return pickle.load(f)


# --- the child: TF1, graph mode ------------------------------------------


def _child(inputs, outputs):
    import tensorflow as tf

    tf1 = tf.compat.v1
    tf1.disable_v2_behavior()
    with open(inputs, "rb") as f:
        cases = pickle.load(f)
    results = []
    for case in cases:
        with tf1.Graph().as_default():
            if case["family"] == "boxes":
                results.append(_boxes(tf1, case))
                continue
            image = tf1.constant(case["image"])
            family = _FAMILIES[case["family"]]
            mode = "train" if case["train"] else "eval"
            args = (tf1, image, case["height"], case["width"])
            if case["train"]:
                args += (case["draws"],)
            output = family[mode](*args, **case["kwargs"])
            with tf1.Session() as session:
                results.append(session.run(output))
    with open(outputs, "wb") as f:
        pickle.dump(results, f)


def _boxes(tf1, case):
    """TF1's stateful `sample_distorted_bounding_box`, TF-Slim's args,
    seeded (the same samples in every run)."""
    begin, size, _ = tf1.image.sample_distorted_bounding_box(
        tf1.constant(case["shape"]),
        seed=1,
        seed2=2,
        bounding_boxes=tf1.constant(
            [0.0, 0.0, 1.0, 1.0], dtype=tf1.float32, shape=[1, 1, 4]
        ),
        min_object_covered=0.1,
        aspect_ratio_range=(0.75, 1.33),
        area_range=(0.05, 1.0),
        max_attempts=100,
        use_image_if_no_bounding_boxes=True,
    )
    with tf1.Session() as session:
        pairs = [session.run([begin, size]) for _ in range(case["count"])]
    return [p[0] for p in pairs], [p[1] for p in pairs]


# inception_preprocessing


def _distort_color(tf1, image, ordering, fast_mode, draws):
    """TF-Slim's `distort_color`, each `random_*` as its `adjust_*`."""

    def brightness(x):
        return tf1.image.adjust_brightness(x, draws["brightness"])

    def saturation(x):
        return tf1.image.adjust_saturation(x, draws["saturation"])

    def hue(x):
        return tf1.image.adjust_hue(x, draws["hue"])

    def contrast(x):
        return tf1.image.adjust_contrast(x, draws["contrast"])

    if fast_mode:
        if ordering == 0:
            steps = [brightness, saturation]
        else:
            steps = [saturation, brightness]
    elif ordering == 0:
        steps = [brightness, saturation, hue, contrast]
    elif ordering == 1:
        steps = [saturation, brightness, contrast, hue]
    elif ordering == 2:
        steps = [contrast, hue, brightness, saturation]
    else:
        steps = [hue, saturation, contrast, brightness]
    for step in steps:
        image = step(image)
    return tf1.clip_by_value(image, 0.0, 1.0)


def _inception_train(
    tf1,
    image,
    height,
    width,
    draws,
    fast_mode=True,
    random_crop=True,
    use_grayscale=False,
):
    if image.dtype != tf1.float32:
        image = tf1.image.convert_image_dtype(image, dtype=tf1.float32)
    if random_crop:
        image = tf1.slice(image, draws["begin"], draws["size"])
        image.set_shape([None, None, 3])
    image = tf1.image.resize_images(
        image, [height, width], int(draws["method"])
    )
    if draws["flip"]:
        image = tf1.reverse(image, [1])
    image = _distort_color(tf1, image, int(draws["ordering"]), fast_mode, draws)
    if use_grayscale:
        image = tf1.image.rgb_to_grayscale(image)
    image = tf1.subtract(image, 0.5)
    return tf1.multiply(image, 2.0)


def _inception_eval(
    tf1,
    image,
    height,
    width,
    central_fraction=0.875,
    central_crop=True,
    use_grayscale=False,
):
    if image.dtype != tf1.float32:
        image = tf1.image.convert_image_dtype(image, dtype=tf1.float32)
    if use_grayscale:
        image = tf1.image.rgb_to_grayscale(image)
    if central_crop and central_fraction:
        image = tf1.image.central_crop(image, central_fraction=central_fraction)
    if height and width:
        image = tf1.expand_dims(image, 0)
        image = tf1.image.resize_bilinear(
            image, [height, width], align_corners=False
        )
        image = tf1.squeeze(image, [0])
    image = tf1.subtract(image, 0.5)
    return tf1.multiply(image, 2.0)


# vgg_preprocessing


def _vgg_resize(tf1, image, smallest_side):
    smallest_side = tf1.convert_to_tensor(smallest_side, dtype=tf1.int32)
    shape = tf1.shape(image)
    height = tf1.to_float(shape[0])
    width = tf1.to_float(shape[1])
    side = tf1.to_float(smallest_side)
    scale = tf1.cond(
        tf1.greater(height, width), lambda: side / width, lambda: side / height
    )
    new_height = tf1.to_int32(tf1.rint(height * scale))
    new_width = tf1.to_int32(tf1.rint(width * scale))
    image = tf1.expand_dims(image, 0)
    image = tf1.image.resize_bilinear(
        image, [new_height, new_width], align_corners=False
    )
    image = tf1.squeeze(image)
    image.set_shape([None, None, 3])
    return image


def _vgg_crop(tf1, image, offset_height, offset_width, height, width):
    cropped_shape = tf1.stack([height, width, tf1.shape(image)[2]])
    offsets = tf1.to_int32(tf1.stack([offset_height, offset_width, 0]))
    image = tf1.slice(image, offsets, cropped_shape)
    return tf1.reshape(image, cropped_shape)


def _vgg_means(tf1, image):
    channels = tf1.split(axis=2, num_or_size_splits=3, value=image)
    for i, mean in enumerate((123.68, 116.78, 103.94)):
        channels[i] -= mean
    return tf1.concat(axis=2, values=channels)


def _vgg_train(tf1, image, height, width, draws):
    image = _vgg_resize(tf1, image, int(draws["resize_side"]))
    image = _vgg_crop(
        tf1,
        image,
        int(draws["offset_height"]),
        int(draws["offset_width"]),
        height,
        width,
    )
    image.set_shape([height, width, 3])
    image = tf1.to_float(image)
    if draws["flip"]:
        image = tf1.reverse(image, [1])
    return _vgg_means(tf1, image)


def _vgg_eval(tf1, image, height, width, resize_side_min=256):
    image = _vgg_resize(tf1, image, resize_side_min)
    offset_height = (tf1.shape(image)[0] - height) / 2
    offset_width = (tf1.shape(image)[1] - width) / 2
    image = _vgg_crop(tf1, image, offset_height, offset_width, height, width)
    image.set_shape([height, width, 3])
    image = tf1.to_float(image)
    return _vgg_means(tf1, image)


# cifarnet_preprocessing


def _cifarnet_train(
    tf1, image, height, width, draws, padding=4, use_grayscale=False
):
    image = tf1.to_float(image)
    if use_grayscale:
        image = tf1.image.rgb_to_grayscale(image)
    if padding > 0:
        image = tf1.pad(image, [[padding, padding], [padding, padding], [0, 0]])
    # random_crop after its draw: slice(value, offset, size). TF-Slim's
    # size is [height, width, 3], which fails for one gray channel.
    begin = [int(draws["offset_height"]), int(draws["offset_width"]), 0]
    image = tf1.slice(image, begin, [height, width, 1 if use_grayscale else 3])
    if draws["flip"]:
        image = tf1.reverse(image, [1])
    image = tf1.image.adjust_brightness(image, draws["brightness"])
    image = tf1.image.adjust_contrast(image, draws["contrast"])
    return tf1.image.per_image_standardization(image)


def _cifarnet_eval(tf1, image, height, width, use_grayscale=False):
    image = tf1.to_float(image)
    if use_grayscale:
        image = tf1.image.rgb_to_grayscale(image)
    image = tf1.image.resize_image_with_crop_or_pad(image, width, height)
    return tf1.image.per_image_standardization(image)


# lenet_preprocessing


def _lenet_eval(tf1, image, height, width, use_grayscale=False):
    image = tf1.to_float(image)
    if use_grayscale:
        image = tf1.image.rgb_to_grayscale(image)
    image = tf1.image.resize_image_with_crop_or_pad(image, width, height)
    image = tf1.subtract(image, 128.0)
    return tf1.div(image, 128.0)


_FAMILIES = {
    "inception": {"train": _inception_train, "eval": _inception_eval},
    "vgg": {"train": _vgg_train, "eval": _vgg_eval},
    "cifarnet": {"train": _cifarnet_train, "eval": _cifarnet_eval},
    "lenet": {"eval": _lenet_eval},
}
