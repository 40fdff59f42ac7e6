"""Keras's own way to train the net: the Keras peer of keras-slim-train in
bench/vs_tf_slim_nets.py.

`keras.applications.<application>(weights=None)` (MobileNet is
MobileNet v1, ResNet50 is ResNet v1), compiled with Keras's RMSprop
(TF-Slim's flags: rho 0.9, momentum 0.9, epsilon 1.0, rate 0.01) and
categorical cross-entropy on logits, `fit` on the same tf.data pipeline
keras-slim-train reads (`keras_slim.image.datasets.load`: the flowers
TFRecords, inception preprocessing), with `fit`'s defaults otherwise.
Prints `global step N` every `--log_every_n_steps` steps, as both
commands do, for the benchmark's clock.
"""

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402

from keras_slim.image import datasets  # noqa: E402


class _Log(keras.callbacks.Callback):
    def __init__(self, every):
        super().__init__()
        self.every = every

    def on_train_batch_end(self, batch, logs=None):
        if (batch + 1) % self.every == 0:
            print(f"global step {batch + 1}: loss = {logs['loss']:.4f}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset_dir", required=True)
    parser.add_argument("--application", required=True)
    parser.add_argument("--image_size", type=int, required=True)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--log_every_n_steps", type=int, default=10)
    args = parser.parse_args()
    data = datasets.load(
        args.dataset_dir,
        "train",
        image_size=args.image_size,
        batch_size=args.batch_size,
        is_training=True,
        preprocessing_name="inception",
        dataset_name="flowers",
    )
    keras.utils.set_random_seed(0)
    model = getattr(keras.applications, args.application)(
        weights=None,
        input_shape=(args.image_size, args.image_size, 3),
        classes=data.num_classes,
        classifier_activation=None,
    )
    model.compile(
        optimizer=keras.optimizers.RMSprop(
            0.01, rho=0.9, momentum=0.9, epsilon=1.0
        ),
        loss=keras.losses.CategoricalCrossentropy(from_logits=True),
    )
    model.fit(
        data.dataset,
        steps_per_epoch=args.steps,
        epochs=1,
        verbose=0,
        callbacks=[_Log(args.log_every_n_steps)],
    )


if __name__ == "__main__":
    main()
