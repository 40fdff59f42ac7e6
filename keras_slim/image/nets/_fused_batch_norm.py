"""TF-Slim's `slim.batch_norm(fused=True)` as a Keras layer."""

import keras
import numpy as np
import tensorflow as tf

#: Below this epsilon TensorFlow's fused kernel uses this one (cuDNN's
#: floor, applied by `tf.compat.v1.nn.fused_batch_norm` on every device).
MIN_EPSILON = 1.001e-5


@keras.saving.register_keras_serializable(package="keras_slim")
class FusedBatchNormalization(keras.layers.BatchNormalization):
    """Batch norm on TensorFlow's fused kernel, over the last axis.

    Args:
        momentum: The moving averages' decay (TF-Slim's `decay`).
        epsilon: Added to the variance; the kernel uses `MIN_EPSILON`
            for a smaller one, as TF-Slim's fused batch norm did
            (resnet's 1e-5).
        center: Whether there is a `beta`.
        scale: Whether there is a `gamma`.
        **kwargs: `name`, `dtype` and the other arguments of
            `keras.layers.BatchNormalization`, except those the fused
            kernel cannot honor.

    Raises:
        ValueError: for `axis` other than the last, `synchronized`,
            `renorm`; when built for
            inputs that are not 4-D (`[batch, height, width, channels]`).

    Example:
    ```python
    net = FusedBatchNormalization(
        momentum=0.9997, epsilon=0.001, scale=False, name="BatchNorm"
    )(keras.Input((8, 8, 3)))
    ```
    """

    def __init__(self, momentum=0.99, epsilon=0.001, **kwargs):
        unsupported = {
            key: kwargs[key]
            for key, default in (
                ("axis", -1),
                ("synchronized", False),
                ("renorm", False),
            )
            if key in kwargs and kwargs[key] != default
        }
        if unsupported:
            raise ValueError(
                "The fused batch norm normalizes the last axis of one "
                "replica's batch, without renormalization. Received: "
                + ", ".join(f"{k}={v!r}" for k, v in unsupported.items())
                + ". Use keras.layers.BatchNormalization for those."
            )
        super().__init__(momentum=momentum, epsilon=epsilon, **kwargs)

    def _affine(self, channels):
        """`(gamma, beta)`: ones and zeros for the ones the layer lacks."""
        gamma = self.gamma if self.scale else tf.ones([channels])
        beta = self.beta if self.center else tf.zeros([channels])
        return tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta)

    def _move(self, variable, value, nonempty):
        """TF1's `assign_moving_average(variable, value, momentum)`, as
        TF-Slim's layer runs it: the decay `1 - momentum` in float32, no
        update from an empty batch (`nonempty` 0; its statistics may be
        NaN, which `multiply_no_nan` zeroes)."""
        decay = np.float32(1.0) - np.float32(self.momentum)
        delta = (variable - value) * decay
        variable.assign_sub(tf.math.multiply_no_nan(delta, nonempty))

    def build(self, input_shape):
        if len(input_shape) != 4:
            raise ValueError(
                "The fused batch norm takes images [batch, height, width, "
                f"channels]. Received: input_shape={tuple(input_shape)}"
            )
        super().build(input_shape)

    def call(self, inputs, training=None, mask=None):
        del mask  # Images have none.
        x = tf.cast(inputs, "float32")
        gamma, beta = self._affine(x.shape[-1])
        if training and self.trainable:
            y, mean, variance = tf.compat.v1.nn.fused_batch_norm(
                x, gamma, beta, epsilon=self.epsilon, is_training=True
            )
            nonempty = tf.cast(tf.size(x) > 0, tf.float32)
            self._move(self.moving_mean, mean, nonempty)
            self._move(self.moving_variance, variance, nonempty)
        else:
            y, _, _ = tf.compat.v1.nn.fused_batch_norm(
                x,
                gamma,
                beta,
                mean=tf.convert_to_tensor(self.moving_mean),
                variance=tf.convert_to_tensor(self.moving_variance),
                epsilon=self.epsilon,
                is_training=False,
            )
        return tf.cast(y, self.compute_dtype)
