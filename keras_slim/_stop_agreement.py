"""Workers agree to stop: a signal to one worker stops all at one step."""

import math
import time

from keras_slim import _strategy
from keras_slim._backend import tensorflow as tf


class StopAgreement:
    """Whether any worker was signalled, the same answer on every worker.

    Args:
        strategy: The `tf.distribute.Strategy` of the fit.
        interval_secs: Positive number: about how often workers agree after
            the calibration.
            Defaults to `1.0`.
        calibration_calls: Positive integer: the first calls, at each of
            which workers agree, timing them.
            Defaults to `10`.
        total: For tests: a function of a list of floats that returns
            their sums over all replicas (each adds its worker's values)
            and the number of replicas, as a pair.
            Defaults to `None` (an all-reduce under `strategy`).
        clock: For tests: a function returning seconds.
            Defaults to `time.monotonic`.

    Example:
    ```python
    agree = StopAgreement(model.distribute_strategy)
    # at the end of each call, on every worker:
    if agree(run.stop_signal is not None):
        ...  # every worker saves the same step and stops
    ```
    """

    def __init__(
        self,
        strategy,
        *,
        interval_secs=1.0,
        calibration_calls=10,
        total=None,
        clock=time.monotonic,
    ):
        self._several = (
            total is not None or _strategy.mode(strategy).workers_in_lockstep
        )
        if total is None and self._several:
            total = _all_reduce(strategy)
        self._total = total
        self._interval_secs = interval_secs
        self._calibration_calls = calibration_calls
        self._clock = clock
        self._calls = 0
        self._since = None
        self._timed = 0
        #: Calls between agreements once calibrated (1 before).
        self.every = 1

    def __call__(self, flag):
        """Returns whether any worker's `flag` is set.

        Every worker must call this (or `decide`) at the end of each call
        of the train function; between agreements, the answer is `False`
        on all.

        Args:
            flag: Boolean: this worker was signalled.

        Returns:
            Boolean, the same on every worker.
        """
        return self.decide(flag)[0]

    def decide(self, flag, save=False):
        """Returns whether any worker's `flag` is set, and whether any
        worker's `save` is (the chief's time to save).

        As `__call__`: between agreements, both answers are `False`.

        Args:
            flag: Boolean: this worker was signalled.
            save: Boolean: this worker asks every worker to save now.
                Defaults to `False`.

        Returns:
            `(stop, save)`, booleans, the same on every worker.
        """
        if not self._several:
            return bool(flag), bool(save)
        now = self._clock()
        if self._since is None:
            # Calls are timed from the end of the first one.
            self._since, self._timed = now, 0
        else:
            self._timed += 1
        self._calls += 1
        if self._calls % self.every:
            return False, False
        calibrating = self.every == 1 and self._calls >= self._calibration_calls
        elapsed = (now - self._since) / self._timed if self._timed else 0.0
        sums, replicas = self._total(
            [1.0 if flag else 0.0, elapsed, 1.0 if save else 0.0]
        )
        if calibrating:
            mean_call_secs = sums[1] / replicas
            self.every = max(
                1, math.ceil(self._interval_secs / max(mean_call_secs, 1e-9))
            )
            # Slow calls (every call agrees) calibrate again, from now.
            self._calls, self._since, self._timed = 0, now, 0
        return bool(sums[0] > 0.0), bool(sums[2] > 0.0)


def _all_reduce(strategy):
    """A function of a float32 vector: its sum over all replicas of all
    workers (each replica adds its worker's vector), and the number of
    replicas."""

    @tf.function(autograph=False)
    def total(vector):
        per_replica = strategy.run(lambda: tf.identity(vector))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, None)

    def sums(values):
        vector = tf.constant(values, tf.float32)
        return total(vector).numpy(), strategy.num_replicas_in_sync

    return sums
