"""Summaries written from inside a `SlimModel` train step."""

import logging

import keras

from keras_slim._backend import tensorflow as tf
from keras_slim.callbacks._histogram import histogram
from keras_slim.callbacks._histogram import zero_fraction
from keras_slim.gradients import variable_path

logger = logging.getLogger("keras_slim")


def _values(grad):
    return grad.values if isinstance(grad, tf.IndexedSlices) else grad


def activation_probe(model, only=None):
    """A functional model giving the model's outputs and its layers'.

    Args:
        model: A functional Keras model.
        only: Names of the layers to probe, or `None` for every one.

    Returns:
        `(names, probe)`: the layer names and a `keras.Model` sharing the
        layers of `model`, returning `(outputs, [one tensor per name])`,
        `outputs` structured as `model`'s.

    Example:
    ```python
    names, probe = activation_probe(model, ["fc1"])
    y_pred, (fc1,) = probe(x, training=True)
    ```
    """
    names, outputs = [], []
    for layer in model.layers:
        if isinstance(layer, keras.layers.InputLayer):
            continue
        if only is not None and layer.name not in only:
            continue
        output = layer.output
        if isinstance(output, (list, tuple)):
            continue
        names.append(layer.name)
        outputs.append(output)
    return names, keras.Model(model.input, (model.output, outputs))


class StepSummaries:
    """Writes gradient and activation summaries from the train step.

    Args:
        make_writer: A function of no argument returning the
            `tf.summary` writer, called when the step is first traced.
        gradients: Whether to write each gradient's histogram and norm.
        activations: Whether to write each layer output's histogram and
            zero fraction (the model must be functional), or the names of
            the layers whose outputs to write.
        model: The model, for the activation probe.
    """

    def __init__(self, make_writer, *, gradients, activations, model):
        self._make_writer = make_writer
        self._writer = None
        self.gradients = gradients
        self.activations = activations
        with model.distribute_strategy.scope():
            self.record_step = tf.Variable(
                -1,
                dtype=tf.int64,
                trainable=False,
                name="keras_slim_summary_step",
            )
        if activations:
            only = activations if isinstance(activations, tuple) else None
            self._names, self._probe = activation_probe(model, only)
        self._unlogged = set()

    @property
    def writer(self):
        """The writer, made on first use (outside the graph being traced)."""
        if self._writer is None:
            with tf.init_scope():
                self._writer = self._make_writer()
        return self._writer

    def forward(self, x, training=None):
        """The step's forward pass, with the activations to summarize.

        Args:
            x: The batch's inputs.
            training: The `training` argument of the model's call (the
                probe is functional: it passes it to each layer).

        Returns:
            `(y_pred, activations)`: the model's outputs and the outputs
            of the summarized layers, or `None` for the activations (then
            `y_pred` is `None` too: the step calls the model itself).
        """
        if not self.activations:
            return None, None
        return self._probe(x, training=training)

    def __call__(self, model, x, grads, variables, activations=None):
        """Adds the summary ops to the step being traced.

        Args:
            model: The model.
            x: The batch's inputs.
            grads: The gradients after the policy.
            variables: Their variables.
            activations: What `forward` gave for the step, or `None`.
        """
        from keras_slim._step import apply  # TensorFlow's step

        ctx = tf.distribute.get_replica_context()
        first = tf.constant(True)
        if ctx is not None and ctx.num_replicas_in_sync > 1:
            first = tf.equal(ctx.replica_id_in_sync_group, 0)
        step = tf.cast(model.optimizer.iterations, tf.int64) + 1

        def write():
            # Tags are named from the root, not from the cond's scope.
            graph = tf.compat.v1.get_default_graph()
            with graph.name_scope(None), self.writer.as_default(step=step):
                if self.gradients:
                    self._write_gradients(
                        grads, variables, apply.gradient_scale(model.optimizer)
                    )
                if self.activations:
                    self._write_activations(activations)
            return tf.constant(True)

        tf.cond(
            tf.logical_and(tf.equal(step, self.record_step), first),
            write,
            lambda: tf.constant(False),
        )

    def _write_gradients(self, grads, variables, scale):
        for grad, variable in zip(grads, variables):
            path = variable_path(variable)
            if grad is None:
                if path not in self._unlogged:
                    logger.info(
                        "Variable %s has no gradient to summarize.", path
                    )
                    self._unlogged.add(path)
                continue
            values = _values(grad)
            if scale is not None:
                # A LossScaleOptimizer's gradients still carry the scale.
                values = values / tf.cast(scale, values.dtype)
            histogram(f"{path}/gradient", values)
            tf.summary.scalar(f"{path}/gradient_norm", tf.norm(values))

    def _write_activations(self, outputs):
        for name, output in zip(self._names, outputs):
            histogram(f"activations/{name}", output)
            tf.summary.scalar(f"sparsity/{name}", zero_fraction(output))
