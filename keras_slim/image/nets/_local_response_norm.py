"""TensorFlow's `tf.nn.lrn` as a Keras layer, for cifarnet's `norm1` and
`norm2` (Keras has no local response normalization layer)."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_slim")
class LocalResponseNormalization(keras.layers.Layer):
    """`tf.nn.lrn(x, depth_radius, bias, alpha, beta)` over the channels:
    `x / (bias + alpha * sum(x**2 over 2 * depth_radius + 1
    channels)) ** beta`, on TensorFlow's `LRN` kernel.

    Args:
        depth_radius: The half-width of the channel window.
        bias: The offset.
        alpha: The scale of the sum of squares.
        beta: The exponent.
        **kwargs: Keras layer arguments (`name`).

    Example:
    ```python
    net = LocalResponseNormalization(
        4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name="norm1"
    )(net)
    ```
    """

    def __init__(self, depth_radius, *, bias, alpha, beta, **kwargs):
        super().__init__(**kwargs)
        self.depth_radius = int(depth_radius)
        self.bias = float(bias)
        self.alpha = float(alpha)
        self.beta = float(beta)

    def call(self, inputs):
        return tf.nn.local_response_normalization(
            inputs,
            depth_radius=self.depth_radius,
            bias=self.bias,
            alpha=self.alpha,
            beta=self.beta,
        )

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "depth_radius": self.depth_radius,
            "bias": self.bias,
            "alpha": self.alpha,
            "beta": self.beta,
        }
