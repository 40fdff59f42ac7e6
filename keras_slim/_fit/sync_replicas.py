"""Synchronous steps over parameter servers, with backup workers.
docs/design.md ("Private Keras internals") says how and why.
"""

import logging
import queue
import threading
import time

import numpy as np

from keras_slim import _keras
from keras_slim._backend import tensorflow as tf

logger = logging.getLogger("keras_slim")


class Aggregator:
    """The host side of one synchronous step: take the first `R` fresh
    gradients, drop stale ones.

    Args:
        replicas_to_aggregate: Positive integer `R`.

    Example:
    ```python
    aggregator = Aggregator(2)
    aggregator.start(step=0)
    aggregator.offer(0, [g1], 0.5)  # fresh
    aggregator.offer(-1, [g0], 0.7)  # stale: dropped
    aggregator.offer(0, [g2], 0.3)
    grads, loss = aggregator.take()  # [(g1 + g2) / 2], 0.4
    ```
    """

    def __init__(self, replicas_to_aggregate):
        self.replicas_to_aggregate = replicas_to_aggregate
        #: Gradients applied (`R` per step) and stale ones dropped.
        self.used = 0
        self.dropped = 0
        self._step = 0
        self._grads = []
        self._losses = []

    @property
    def needed(self):
        """How many fresh gradients the step still needs."""
        return self.replicas_to_aggregate - len(self._grads)

    def start(self, step):
        """Begins collecting for the computations tagged `step`."""
        self._step = step
        self._grads, self._losses = [], []

    def offer(self, tag, grads, loss):
        """Takes a result computed at step `tag`; returns whether it counts.

        Args:
            tag: The step the computation was scheduled at.
            grads: Its gradients (NumPy arrays).
            loss: Its loss.

        Returns:
            `True` when it is fresh and still needed; `False` when it is
            dropped (stale, or the step already has `R`).
        """
        if tag != self._step or self.needed <= 0:
            self.dropped += 1
            return False
        self._grads.append(grads)
        self._losses.append(loss)
        return True

    def drop(self):
        """Counts a result that arrived after its step: stale."""
        self.dropped += 1

    def take(self):
        """The average of the `R` gradients and losses collected.

        Returns:
            `(grads, loss)`: one float array per gradient, and a float.

        Raises:
            RuntimeError: if fewer than `R` were collected.
        """
        if self.needed > 0:
            raise RuntimeError(
                f"A synchronous step needs {self.replicas_to_aggregate} "
                f"gradients; {len(self._grads)} were collected."
            )
        count = len(self._grads)
        grads = [sum(parts) / count for parts in zip(*self._grads)]
        loss = float(np.mean(self._losses))
        self.used += count
        self._grads, self._losses = [], []
        return grads, loss


class SyncSteps:
    """Runs synchronous steps of a `SlimModel` over parameter servers.

    Args:
        model: The `SlimModel`, built under the `ParameterServerStrategy`.
        coord: The strategy's `ClusterCoordinator`.
        iterator: The per-worker iterator the gradient steps read.
        settings: The strategy's `SyncSettings` (`keras_slim/_strategy.py`).
        watch: A `WorkerWatch`: every wait fails when no worker is
            reachable for its timeout.
        poll_secs: Seconds between two checks of the watch while waiting.
            Defaults to `0.05`.
        timeout_secs: Seconds a wait for the next gradient may last even
            while the workers answer (a hung one holds its computation):
            then `RuntimeError`. `None` takes the watch's bound
            (`KERAS_SLIM_WORKER_TIMEOUT_SECS`, default 300).
            Defaults to `None`.

    Example:
    ```python
    steps = SyncSteps(model, coord, iterator, settings, watch)
    for _ in range(100):
        steps.step()  # one global step, R gradients averaged
    steps.drain()  # waits for the backups still in flight
    ```
    """

    def __init__(
        self,
        model,
        coord,
        iterator,
        settings,
        watch,
        poll_secs=0.05,
        timeout_secs=None,
    ):
        self._model = model
        self._coord = coord
        self._iterator = iterator
        self._settings = settings
        self._watch = watch
        self._poll_secs = poll_secs
        self._timeout_secs = (
            timeout_secs
            if timeout_secs is not None
            else getattr(watch, "timeout", None)
        )
        self.aggregator = Aggregator(settings.replicas_to_aggregate)
        self._results = queue.Queue()
        self._in_flight = 0
        self._step = int(model.optimizer.iterations.numpy())
        self._backups = max(
            settings.total_num_replicas - settings.replicas_to_aggregate, 0
        )
        self._present = None
        self._compute = tf.function(self._compute_fn)
        self._apply = tf.function(self._apply_fn)
        _keras.allow_run_on_coordinator(model.distribute_strategy)

    def _compute_fn(self, iterator):
        strategy = self._model.distribute_strategy
        grads, loss = strategy.run(
            self._model.gradient_step, args=(next(iterator),)
        )
        local = strategy.experimental_local_results
        # Every clone holds the same sum: take the first.
        grads = [None if g is None else local(g)[0] for g in grads]
        self._present = [g is not None for g in grads]
        present = [tf.convert_to_tensor(g) for g in grads if g is not None]
        return present, local(loss)[0]

    def _apply_fn(self, grads, loss):
        grads = iter(grads)
        full = [next(grads) if p else None for p in self._present]
        strategy = self._model.distribute_strategy
        strategy.run(self._model.apply_step, args=(full, loss))

    def _schedule(self):
        tag = self._step
        value = self._coord.schedule(self._compute, args=(self._iterator,))
        self._in_flight += 1
        threading.Thread(
            target=self._fetch, args=(tag, value, self._results), daemon=True
        ).start()

    @staticmethod
    def _fetch(tag, value, results):
        """Waits for one result and queues it (or its error)."""
        try:
            results.put((tag, value.fetch(), None))
        except BaseException as error:  # re-raised on the coordinator
            results.put((tag, None, error))

    def _next_result(self):
        """The next gradient result, checking the watch meanwhile.

        Raises:
            RuntimeError: when no worker is reachable for the watch's
                timeout, or none returns a gradient for `timeout_secs`.
        """
        began = time.monotonic()
        while True:
            try:
                tag, value, error = self._results.get(timeout=self._poll_secs)
            except queue.Empty:
                self._watch.check()
                self._check_wait(time.monotonic() - began)
                continue
            self._in_flight -= 1
            if error is not None:
                raise error
            return tag, value

    def _check_wait(self, waited):
        if self._timeout_secs is None or waited <= self._timeout_secs:
            return
        raise RuntimeError(
            f"No gradient came back from the workers for {waited:.0f} s, "
            f"with {self._in_flight} computations in flight: more workers "
            "hang than there are backups (total_num_replicas - "
            "replicas_to_aggregate). Restart the hung workers, or rerun: a "
            "run with keras_slim.callbacks.Checkpoints resumes from the "
            "latest checkpoint. The bound is KERAS_SLIM_WORKER_TIMEOUT_SECS "
            "(seconds)."
        )

    def step(self):
        """Runs one synchronous step: the first `R` fresh gradients,
        averaged, through the policy and the optimizer.

        Raises:
            RuntimeError: when no worker has been reachable for the
                watch's timeout.
            tf.errors.InvalidArgumentError: from the step's NaN check.
        """
        aggregator = self.aggregator
        aggregator.start(self._step)
        while aggregator.needed > 0:
            # Enough in flight that `backups` of them may hang.
            while self._in_flight < aggregator.needed + self._backups:
                self._schedule()
            tag, (grads, loss) = self._next_result()
            aggregator.offer(tag, grads, loss)
        grads, loss = aggregator.take()
        # On the coordinator, not on a worker: a straggler that would
        # take the call holds no step hostage.
        self._apply(
            [tf.constant(g) for g in grads], tf.constant(loss, tf.float32)
        )
        self._step += 1

    def drain(self):
        """Waits for the computations in flight; their results are stale."""
        while self._in_flight > 0:
            self._next_result()
            self.aggregator.drop()

    def log_counts(self):
        """Logs the gradients applied and dropped so far."""
        logger.info(
            "sync replicas: %d gradients applied (%d per step), %d stale "
            "dropped",
            self.aggregator.used,
            self._settings.replicas_to_aggregate,
            self.aggregator.dropped,
        )
