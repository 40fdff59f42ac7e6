"""The linear learning-rate warmup of `--warmup_epochs`, for every decay."""

import keras
import tensorflow as tf


@keras.saving.register_keras_serializable(package="keras_slim")
class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """`target * step / warmup_steps` below `warmup_steps`, then
    `schedule(step - warmup_steps)`.

    Args:
        schedule: A `LearningRateSchedule`, or a float (a fixed rate).
        warmup_steps: Positive number (a float under `--sync_replicas`,
            as TF-Slim's decay steps).
        target: The rate the ramp reaches at `warmup_steps`.

    Example:
    ```python
    warm = LinearWarmup(0.1, warmup_steps=10, target=0.1)
    warm(5)  # 0.05
    ```
    """

    def __init__(self, schedule, warmup_steps, target):
        self.schedule = schedule
        self.warmup_steps = warmup_steps
        self.target = target

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        warmup = tf.cast(self.warmup_steps, tf.float32)
        ramp = self.target * step / warmup
        after = self._after(step - warmup)
        return tf.where(step < warmup, ramp, after)

    def _after(self, step):
        if isinstance(
            self.schedule, keras.optimizers.schedules.LearningRateSchedule
        ):
            return tf.cast(self.schedule(tf.maximum(step, 0.0)), tf.float32)
        return tf.constant(self.schedule, tf.float32)

    def get_config(self):
        schedule = self.schedule
        if isinstance(
            schedule, keras.optimizers.schedules.LearningRateSchedule
        ):
            schedule = keras.saving.serialize_keras_object(schedule)
        return {
            "schedule": schedule,
            "warmup_steps": self.warmup_steps,
            "target": self.target,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        if isinstance(config["schedule"], dict):
            config["schedule"] = keras.saving.deserialize_keras_object(
                config["schedule"]
            )
        return cls(**config)
