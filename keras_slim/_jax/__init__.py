"""keras_slim on Keras's JAX backend."""
