"""Models, data and statistics shared by the benchmarks in bench/.

The two models of the foundation benchmark (issue 2): an MLP 32-64-64-10
and a CNN 28x28x1 conv32-pool-conv64-dense10, on one in-memory batch of 64
repeated, so input pipelines cost nothing and only the step is timed.
"""

import os
import statistics

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def mlp_layers(inputs):
    x = keras.layers.Dense(64, activation="relu", name="layer1")(inputs)
    x = keras.layers.Dense(64, activation="relu", name="layer2")(x)
    return keras.layers.Dense(10, name="logits")(x)


def cnn_layers(inputs):
    x = keras.layers.Conv2D(32, 3, activation="relu", name="layer1")(inputs)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(64, 3, activation="relu", name="layer2")(x)
    x = keras.layers.Flatten()(x)
    return keras.layers.Dense(10, name="logits")(x)


# name: (input shape, layers, steps per timed run)
MODELS = {
    "MLP 32-64-64-10": ((32,), mlp_layers, 100),
    "CNN 28x28x1 conv32-pool-conv64-dense10": ((28, 28, 1), cnn_layers, 15),
}


def dataset(input_shape):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64,) + input_shape).astype("float32")
    y = rng.integers(0, 10, size=64).astype("int32")
    return tf.data.Dataset.from_tensors((x, y)).repeat()


def ratios_to(results, baseline):
    """Per-run ratios to `baseline`, runs taken side by side.

    The machine drifts (+-20% between identical runs here); a ratio of two
    runs taken one after the other cancels most of it.
    """
    return {
        v: [a / b for a, b in zip(r, results[baseline])]
        for v, r in results.items()
    }


def summary(ratios):
    """`median (q1-q3)` of a list of ratios."""
    q1, median, q3 = statistics.quantiles(ratios, n=4)
    return f"{median:.3f} ({q1:.2f}-{q3:.2f})"


def header(runs):
    return (
        f"keras {keras.__version__}, tensorflow {tf.__version__}, "
        f"{os.cpu_count()} CPUs, {runs} interleaved runs; ratio: "
        "median of per-run ratios (quartiles)"
    )


def spread(values, fmt="{:.1f}"):
    """`min / median / max` of `values`, each formatted with `fmt`."""
    return " / ".join(
        fmt.format(v)
        for v in (min(values), statistics.median(values), max(values))
    )
