"""`SkippedSteps`: the steps a `SlimModel` skipped, counted in the graph."""

import tensorflow as tf


class SkippedSteps:
    """A count of skipped steps, with the first and the last.

    Args:
        strategy: The model's `tf.distribute.Strategy`: the variable is
            made in its scope, and updated in cross-replica context.

    Example:
    ```python
    skipped = SkippedSteps(model.distribute_strategy)
    skipped.record(step)  # in the skip branch of the step, in the graph
    count, first, last = skipped.read()  # on the host
    ```
    """

    def __init__(self, strategy):
        with strategy.scope():
            self._state = tf.Variable(
                tf.zeros([3], tf.int64),
                trainable=False,
                name="keras_slim_skipped_steps",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )

    def record(self, step):
        """Records the skipped global step `step` (a scalar tensor).

        Args:
            step: The global step of the skipped step (counting from 1).
        """
        step = tf.cast(step, tf.int64)
        state = tf.convert_to_tensor(self._state)
        first = tf.where(state[0] == 0, step, state[1])
        self._state.assign(tf.stack([state[0] + 1, first, step]))

    def read(self):
        """Returns `(count, first, last)` as Python ints (first and last
        are 0 while count is 0)."""
        count, first, last = (int(v) for v in self._state.numpy())
        return count, first, last

    def reset(self):
        """Starts the count again from zero."""
        self._state.assign(tf.zeros([3], tf.int64))
