"""A model's accuracy, top-5 recall and loss on a held-out split."""

import keras
import tensorflow as tf

__all__ = ["Evaluator", "evaluate"]


class Evaluator:
    """A model's evaluation: its metrics and its traced step, made once.

    Accuracy, top-5 recall and loss on batches of `(images, one-hot
    labels)`, in inference mode. Each call starts the metrics afresh and
    reuses the traced step, so evaluating checkpoint after checkpoint
    restored into the same model (a following keras-slim-eval,
    `--keep_best`) traces once per batch shape, not once per checkpoint.
    Whoever evaluates again holds the `Evaluator`; nothing global keeps
    the model alive.

    Args:
        model: A Keras model returning logits (its first output, when it
            has TF-Slim's AuxLogits too).

    Example:
    ```python
    evaluator = Evaluator(model)
    for path in paths:
        model.load_weights(path)
        print(evaluator(dataset.batch(100))["accuracy"])
    ```
    """

    def __init__(self, model):
        classes = model.outputs[0].shape[-1]
        self.metrics = {
            "accuracy": keras.metrics.CategoricalAccuracy(),
            "loss": keras.metrics.Mean(),
        }
        if classes > 5:
            self.metrics["recall_5"] = keras.metrics.TopKCategoricalAccuracy(
                k=5
            )
        cross_entropy = keras.losses.CategoricalCrossentropy(
            from_logits=True, reduction=None
        )
        metrics = self.metrics

        @tf.function
        def step(images, labels):
            logits = model(images, training=False)
            if isinstance(logits, (list, tuple)):
                logits = logits[0]  # not TF-Slim's AuxLogits
            # Metrics in float32 whatever the net computes in (a mixed
            # precision net's logits are float16 or bfloat16).
            logits = tf.cast(logits, tf.float32)
            for name, metric in metrics.items():
                if name == "loss":
                    metric.update_state(cross_entropy(labels, logits))
                else:
                    metric.update_state(labels, logits)
            return tf.shape(images)[0]

        self.model = model
        self.step = step

    def __call__(self, dataset, *, max_num_batches=None):
        """The metrics on `dataset`.

        Args:
            dataset: A finite `tf.data.Dataset`.
            max_num_batches: Evaluate at most this many batches (`None`:
                all). Defaults to `None`.

        Returns:
            A dict: `accuracy`, `recall_5` (`None` with 5 classes or
            fewer), `loss` (mean cross-entropy) and `count` (examples).
        """
        for metric in self.metrics.values():
            metric.reset_state()
        if max_num_batches is not None:
            dataset = dataset.take(max_num_batches)
        count = 0
        for images, labels in dataset:
            count += int(self.step(images, labels))
        results = {name: float(m.result()) for name, m in self.metrics.items()}
        results.setdefault("recall_5", None)
        results["count"] = count
        return results


def evaluate(model, dataset, *, max_num_batches=None):
    """Accuracy, top-5 recall and loss of a model on batches of
    `(images, one-hot labels)`, in inference mode: `Evaluator(model)`
    called once (hold an `Evaluator` to evaluate the model again).

    Args:
        model: A Keras model returning logits (its first output, when
            it has TF-Slim's AuxLogits too).
        dataset: A finite `tf.data.Dataset`.
        max_num_batches: Evaluate at most this many batches (`None`: all).
            Defaults to `None`.

    Returns:
        A dict: `accuracy`, `recall_5` (`None` with 5 classes or fewer),
        `loss` (mean cross-entropy) and `count` (examples).

    Example:
    ```python
    results = evaluate(model, dataset.batch(100))
    print(results["accuracy"])
    ```
    """
    return Evaluator(model)(dataset, max_num_batches=max_num_batches)
