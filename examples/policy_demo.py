"""keras_slim demo: a gradient policy on 2 clones equals one device.

Trains a small classifier on scikit-learn's 8x8 digits (shipped with the
package, nothing is downloaded) twice from the same initial weights: once
on one device, once with 2 clones (MirroredStrategy over 2 logical CPU
devices). The policy multiplies the head's gradients, freezes the first
layer's bias, and clips every gradient's norm after the cross-replica sum,
as TF-Slim's create_train_op did. Then a diverging run shows the numeric
check: the step whose loss overflows is skipped and training stops with a
clear error, every weight still finite.

Run with `make demo`, or `python examples/policy_demo.py --epochs 3`.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

NUM_CLONES = 2
_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_CLONES
)

import keras  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import keras_slim  # noqa: E402

POLICY = keras_slim.GradientPolicy(
    multipliers={"logits/.*": 2.0, r".*/bias": 0.5},
    freeze=["fc1/bias"],
    clip_norm=1.0,
)


def load_data():
    digits = load_digits()
    x = (digits.data / 16.0).astype("float32")
    y = digits.target.astype("int32")
    order = np.random.default_rng(0).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1536], y[:1536]), (x[1536:], y[1536:])


def build_model():
    keras.utils.set_random_seed(0)
    inputs = keras.Input((64,))
    hidden = keras.layers.Dense(64, activation="relu", name="fc1")(inputs)
    hidden = keras.layers.Dense(32, activation="relu", name="fc2")(hidden)
    outputs = keras.layers.Dense(10, name="logits")(hidden)
    model = keras_slim.SlimModel(
        inputs, outputs, name="digits_mlp", gradient_policy=POLICY
    )
    model.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def train(strategy, train_data, epochs):
    with strategy.scope():
        model = build_model()
    x, y = train_data
    history = model.fit(
        x, y, batch_size=64, epochs=epochs, shuffle=False, verbose=0
    )
    return model, history.history


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args(argv)
    train_data, test_data = load_data()

    print("Gradient policy, stage by stage:")
    print(POLICY.describe(build_model()))

    devices = [f"/cpu:{i}" for i in range(NUM_CLONES)]
    one, h1 = train(tf.distribute.get_strategy(), train_data, args.epochs)
    clones, h2 = train(
        tf.distribute.MirroredStrategy(devices), train_data, args.epochs
    )
    diff = max(
        float(np.max(np.abs(a.numpy() - b.numpy())))
        for a, b in zip(one.weights, clones.weights)
    )
    _, accuracy = clones.evaluate(*test_data, verbose=0)
    print(f"\nloss per epoch, 1 device:  {np.round(h1['loss'], 4).tolist()}")
    print(
        f"loss per epoch, {NUM_CLONES} clones: "
        f"{np.round(h2['loss'], 4).tolist()}"
    )
    print(f"max |w(1 device) - w({NUM_CLONES} clones)| = {diff:.2e}")
    print(f"held-out accuracy ({len(test_data[0])} digits): {accuracy:.3f}")

    # A diverging run: with an absurd learning rate the loss overflows.
    clones.optimizer.learning_rate.assign(1e30)
    try:
        clones.fit(*train_data, batch_size=64, epochs=5, verbose=0)
        print("\nThe diverging run did not overflow.")
        return 1
    except keras_slim.NanLossDuringTrainingError as error:
        finite = all(np.all(np.isfinite(w.numpy())) for w in clones.weights)
        print(f"\nDiverging run (learning rate 1e30): {error}")
        print(f"every weight still finite: {finite}")
    ok = diff < 1e-5 and accuracy >= 0.9 and finite
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
