"""Images/s of a MobileNet v1 on whatever devices JAX sees: keras.Model.fit
vs SlimModel.fit with a full gradient policy, in fp32 and bf16.

Self-contained: it needs keras, jax, numpy and keras_slim, and imports no
TensorFlow, so it can be copied to a GPU machine with those wheels alone.
Once keras_slim is imported without TensorFlow, the process refuses
TensorFlow's modules as if it were not installed (Keras would import it
when installed, to seed it and to look for tf.data) and checks at the end
that none was imported; while keras_slim's import still brings TensorFlow
in, it prints a warning instead.

The net is MobileNet v1 as TF-Slim's nets/mobilenet_v1.py lays it out
(Conv2d_0, then 13 depthwise-separable blocks Conv2d_i_depthwise /
Conv2d_i_pointwise, each convolution followed by batch norm and ReLU6;
`--width` is its depth multiplier, min depth 8; `--blocks` cuts it
short, for tests), global average pool and a
1000-class Logits layer, written here with Keras layers (Keras's
BatchNormalization; no weights downloaded). The input is one synthetic
batch of `--batch_size` images of `--image_size` px, put on the devices
once and yielded again and again by a generator, so the figure is the
step's, not an input pipeline's. With more than one device both models
train under `keras.distribution.DataParallel` over all of them.

Variants, per dtype (`fp32`, or `bf16`: `keras.config.set_dtype_policy(
"mixed_bfloat16")` while the model is built):

  keras  keras.Model, SGD with momentum 0.9
  slim   SlimModel, the same optimizer, with multipliers (Logits x2,
         batch-norm betas x0.5), lr_multipliers (Logits x10), Conv2d_0
         and its batch norm frozen, clip_global_norm=1.0, NaN check on

Each model is compiled by a first fit of `--warmup` steps (at least 2:
under a distribution SlimModel's step compiles again on its second call;
the first fit's seconds are in the JSON line), then the variants take
turns (which goes first alternates) for `--repeats` timed fits of
`--steps` steps each; images/s is steps x batch / seconds of a fit,
median over the repeats, and the ratio slim / keras is per repeat, median
and min-max. Prints a table and one JSON line. The default size (224 px,
batch 128, 10 + 3 x 50 steps of 4 models) ran in under 3.5 minutes on
one H200 (docs/benchmarks.md).

Run: `KERAS_BACKEND=jax python bench/jax_devices.py [--image_size 224]
[--batch_size 128] [--steps 50] [--width 1.0] [--dtypes fp32,bf16]`.
On this repository's 2-core CPU: `--image_size 64 --batch_size 32
--steps 10`.
"""

import os

os.environ.setdefault("KERAS_BACKEND", "jax")

import argparse  # noqa: E402
import importlib.metadata  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_slim  # noqa: E402

# Whether keras_slim's own import brought TensorFlow in (until keras_slim
# is TensorFlow-free under JAX); if it did not, nothing later may.
TF_AT_IMPORT = "tensorflow" in sys.modules


class NoTensorFlow:
    """A `sys.meta_path` finder that refuses TensorFlow's modules, as where
    TensorFlow is not installed. Keras imports TensorFlow whenever it is
    installed (`keras.utils.set_random_seed` seeds it, the data adapters
    look for tf.data); refused, Keras runs as on a machine with only the
    JAX wheels, and anything of keras_slim's that imports TensorFlow
    fails."""

    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


if not TF_AT_IMPORT:
    sys.meta_path.insert(0, NoTensorFlow())

DTYPES = {"fp32": "float32", "bf16": "mixed_bfloat16"}
VARIANTS = ("keras", "slim")

# TF-Slim's MOBILENETV1_CONV_DEFS: (kind, stride, depth).
CONV_DEFS = (
    ("conv", 2, 32),
    ("sep", 1, 64),
    ("sep", 2, 128),
    ("sep", 1, 128),
    ("sep", 2, 256),
    ("sep", 1, 256),
    ("sep", 2, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 1, 512),
    ("sep", 2, 1024),
    ("sep", 1, 1024),
)


def batch_norm_relu6(x, name):
    x = keras.layers.BatchNormalization(
        momentum=0.9997, epsilon=0.001, name=f"{name}_bn"
    )(x)
    return keras.layers.ReLU(6.0, name=f"{name}_relu6")(x)


def conv(x, depth, stride, name):
    x = keras.layers.Conv2D(
        depth, 3, strides=stride, padding="same", use_bias=False, name=name
    )(x)
    return batch_norm_relu6(x, name)


def separable_conv(x, depth, stride, name):
    x = keras.layers.DepthwiseConv2D(
        3,
        strides=stride,
        padding="same",
        use_bias=False,
        name=f"{name}_depthwise",
    )(x)
    x = batch_norm_relu6(x, f"{name}_depthwise")
    x = keras.layers.Conv2D(depth, 1, use_bias=False, name=f"{name}_pointwise")(
        x
    )
    return batch_norm_relu6(x, f"{name}_pointwise")


def mobilenet_v1(inputs, width, blocks=13, num_classes=1000):
    """MobileNet v1's base and its logits (TF-Slim's `mobilenet_v1`; the
    final 1x1 convolution on the pooled 1x1 map is a Dense layer here),
    its first `blocks` depthwise-separable blocks only when fewer than 13
    (TF-Slim's `final_endpoint`)."""
    x = inputs
    for i, (kind, stride, depth) in enumerate(CONV_DEFS[: blocks + 1]):
        depth = max(int(depth * width), 8)
        if kind == "conv":
            x = conv(x, depth, stride, f"Conv2d_{i}")
        else:
            x = separable_conv(x, depth, stride, f"Conv2d_{i}")
    x = keras.layers.GlobalAveragePooling2D(name="AvgPool_1a")(x)
    return keras.layers.Dense(num_classes, name="Logits")(x)


def policy():
    return keras_slim.GradientPolicy(
        multipliers={"Logits/.*": 2.0, r".*_bn/beta": 0.5},
        lr_multipliers={"Logits/.*": 10.0},
        freeze=[r"Conv2d_0(_bn)?/.*"],
        clip_global_norm=1.0,
    )


def build(variant, dtype, args):
    keras.config.set_dtype_policy(DTYPES[dtype])
    try:
        keras.utils.set_random_seed(0)
        inputs = keras.Input((args.image_size, args.image_size, 3))
        outputs = mobilenet_v1(inputs, args.width, args.blocks)
        if variant == "keras":
            model = keras.Model(inputs, outputs)
        else:
            model = keras_slim.SlimModel(
                inputs, outputs, gradient_policy=policy()
            )
    finally:
        keras.config.set_dtype_policy("float32")
    model.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=1,
    )
    return model


def batches(args):
    """One synthetic batch on the devices, yielded forever."""
    rng = np.random.default_rng(0)
    shape = (args.batch_size, args.image_size, args.image_size, 3)
    x = rng.uniform(-1.0, 1.0, size=shape).astype("float32")
    y = rng.integers(0, 1000, size=args.batch_size).astype("int32")
    distribution = keras.distribution.distribution()
    if distribution is None:
        x, y = jax.device_put(x), jax.device_put(y)
    else:
        x, y = (
            jax.device_put(
                a, distribution.get_data_layout(a.shape).backend_layout
            )
            for a in (x, y)
        )
    while True:
        yield x, y


def fit(model, args, steps):
    model.fit(batches(args), steps_per_epoch=steps, shuffle=False, verbose=0)


def images_per_second(model, args):
    start = time.perf_counter()
    fit(model, args, args.steps)
    return args.steps * args.batch_size / (time.perf_counter() - start)


def spread(values):
    return {
        "median": statistics.median(values),
        "min": min(values),
        "max": max(values),
    }


def measure(args, dtypes):
    models, first_fit = {}, {}
    for dtype in dtypes:
        for variant in VARIANTS:
            model = build(variant, dtype, args)
            start = time.perf_counter()
            fit(model, args, args.warmup)
            first_fit[dtype, variant] = time.perf_counter() - start
            models[dtype, variant] = model
    rates = {key: [] for key in models}
    for repeat in range(args.repeats):
        order = VARIANTS if repeat % 2 == 0 else VARIANTS[::-1]
        for dtype in dtypes:
            for variant in order:
                key = dtype, variant
                rates[key].append(images_per_second(models[key], args))
    results = {}
    for dtype in dtypes:
        keras_, slim = rates[dtype, "keras"], rates[dtype, "slim"]
        results[dtype] = {
            "keras_images_per_s": statistics.median(keras_),
            "slim_images_per_s": statistics.median(slim),
            "slim_over_keras": spread([s / k for s, k in zip(slim, keras_)]),
            "runs": {"keras": keras_, "slim": slim},
            "first_fit_s": {v: first_fit[dtype, v] for v in VARIANTS},
        }
    return results


def version(name):
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def report(args, devices, results):
    kind = devices[0].device_kind
    print(
        f"{len(devices)} x {kind} ({jax.default_backend()}), "
        f"jax {jax.__version__}, keras {keras.__version__}; MobileNet v1 "
        f"width {args.width}, {args.blocks} blocks, {args.image_size} px, "
        f"batch {args.batch_size}; images/s median of {args.repeats} fits of "
        f"{args.steps} steps"
    )
    print()
    print("| dtype | keras fit images/s | SlimModel images/s | ratio |")
    print("|---|---|---|---|")
    for dtype, r in results.items():
        s = r["slim_over_keras"]
        print(
            f"| {dtype} | {r['keras_images_per_s']:.1f} | "
            f"{r['slim_images_per_s']:.1f} | {s['median']:.3f} "
            f"({s['min']:.3f}-{s['max']:.3f}) |"
        )
    print()
    line = {
        "bench": "jax_devices",
        "platform": jax.default_backend(),
        "device_kind": kind,
        "device_count": len(devices),
        "jax": jax.__version__,
        "keras": keras.__version__,
        "keras_slim": version("keras_slim"),
        "net": "mobilenet_v1",
        "width": args.width,
        "blocks": args.blocks,
        "image_size": args.image_size,
        "batch_size": args.batch_size,
        "warmup": args.warmup,
        "steps": args.steps,
        "repeats": args.repeats,
        "results": results,
    }
    print(json.dumps(line), flush=True)


def check_no_tensorflow():
    if TF_AT_IMPORT:
        print(
            "warning: importing keras_slim imported TensorFlow; this "
            "process is not TensorFlow-free yet",
            file=sys.stderr,
        )
        return
    assert "tensorflow" not in sys.modules, "TensorFlow was imported"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image_size", type=int, default=224)
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--steps", type=int, default=50, help="per fit")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--width", type=float, default=1.0)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument(
        "--blocks",
        type=int,
        default=13,
        choices=range(1, 14),
        metavar="1..13",
        help="depthwise-separable blocks (13: the whole net; fewer "
        "compiles faster, for tests)",
    )
    args = parser.parse_args(argv)
    if keras.backend.backend() != "jax":
        parser.error(f"needs KERAS_BACKEND=jax, not {keras.backend.backend()}")
    if args.warmup < 2:
        parser.error("--warmup: at least 2 (the compiles are in them)")
    dtypes = args.dtypes.split(",")
    for dtype in dtypes:
        if dtype not in DTYPES:
            parser.error(f"--dtypes: {dtype!r} is not one of {list(DTYPES)}")
    devices = jax.devices()
    if len(devices) > 1:
        if args.batch_size % len(devices):
            parser.error(
                f"--batch_size {args.batch_size} is not a multiple of the "
                f"{len(devices)} devices"
            )
        keras.distribution.set_distribution(
            keras.distribution.DataParallel(devices=devices)
        )
    results = measure(args, dtypes)
    report(args, devices, results)
    check_no_tensorflow()


if __name__ == "__main__":
    main()
