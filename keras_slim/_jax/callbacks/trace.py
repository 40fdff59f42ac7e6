"""`Trace` on JAX: profiles of chosen steps through `jax.profiler`
(slim's `trace_every_n_steps`)."""

import glob
import gzip
import logging
import os
import shutil
import time

import jax

from keras_slim import checks
from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks._files import check_writable
from keras_slim.callbacks._interval import IntervalTrigger

logger = logging.getLogger("keras_slim")


def _newest_trace(logdir, since):
    """The newest `*.trace.json.gz` the profiler wrote in `logdir` since
    `since` (seconds since the epoch), or `None`."""
    pattern = os.path.join(logdir, "plugins", "profile", "*", "*.trace.json.gz")
    paths = [p for p in glob.glob(pattern) if os.path.getmtime(p) >= since]
    return max(paths, key=os.path.getmtime) if paths else None


class Trace(RunCallback):
    """Traces chosen training steps with the JAX profiler.

    `keras_slim.callbacks.Trace` on JAX, with its arguments: for each chosen
    step, the call of the train function holding it runs under
    `jax.profiler` (started when the call's batch begins, stopped when it
    ends, once its device work is done), named in the trace by the global
    step (a `jax.profiler.StepTraceAnnotation("train", step_num=step)`).
    It writes:

    - the profile TensorBoard's profile tab shows:
      `logdir/plugins/profile/<time>/<host>.xplane.pb`, with the
      profiler's Chrome trace beside it (`<host>.trace.json.gz`, and
      `perfetto_trace.json.gz` for ui.perfetto.dev);
    - a Chrome trace `logdir/tf_trace-<global step>.json` (uncompressed,
      the name TensorFlow's `Trace` gives its own), listed in `traces`.

    A step is named by the global step it begins at: `at_steps=[0]`
    traces the first step, and `every_n_steps=N` the steps beginning at
    0, N, 2N, ..., as TF-Slim's `trace_every_n_steps` did. With
    `steps_per_execution > 1` the call holding the chosen step is traced
    whole, and named by the chosen step; under gradient accumulation
    (`gradient_accumulation_steps=k`) the profiler runs from the call
    holding the step's first micro-batch to the call holding its last.
    A profiler that cannot start (another one is running) is logged and
    training goes on; the callback stops only a profiler it started, when
    the fit ends however it ends. Two traces within one second share the
    profile folder (the newer replaces the older there); their JSON files
    are distinct.

    What differs from TensorFlow: the events are JAX's (the compiled
    step's XLA ops, and the host's Python and dispatch), not TensorFlow's
    op kernels; nothing of TensorFlow is imported.

    Args:
        logdir: Directory for the profiles and the JSON traces.
        every_n_steps: Positive integer or `None`: trace the steps that
            begin at multiples of it.
            Defaults to `None`.
        at_steps: Global steps whose step to trace.
            Defaults to `()`.

    Raises:
        ValueError: for an empty `logdir`, an `every_n_steps` that is not a
            positive integer, or `at_steps` that are not non-negative
            integers; at train begin, before the first step, for a `logdir`
            that cannot be created or written, or a model that is not a
            `keras_slim.SlimModel`.

    Example:
    ```python
    trace = keras_slim.callbacks.Trace("/tmp/run", at_steps=[10])
    model.fit(x, y, callbacks=[trace])
    ```
    """

    def __init__(self, logdir, *, every_n_steps=None, at_steps=()):
        super().__init__()
        self.logdir = checks.path("logdir", logdir)
        self._steps = IntervalTrigger(
            every_n_steps=every_n_steps, at_steps=at_steps
        )
        self.every_n_steps = self._steps.every_n_steps
        self.at_steps = self._steps.at_steps
        self.traces = []
        self._tracing = None

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        check_writable("logdir", self.logdir, what="traces", create=False)
        self._tracing = None
        self.run.at_end(self._abandon)

    def on_train_batch_begin(self, batch, logs=None):
        run = self.run
        if self._tracing is not None or run.halted or not self._steps.enabled:
            return
        # Calls run batches: `k` of them make a step under accumulation.
        k = run.per_step
        run.start()
        first = run.batches
        last = first + self._model.steps_per_execution - 1
        step = self._steps.first_due(first // k, last // k)
        if step is not None:
            self._start(step, until=(step + 1) * k)

    def _start(self, step, *, until):
        """Starts the profiler for `step`, to stop once `until` batches
        were applied."""
        started = time.time()
        try:
            jax.profiler.start_trace(self.logdir, create_perfetto_trace=True)
        except Exception as error:  # Another profiler, a bad logdir, ...
            logger.warning(
                "Trace of step %d skipped: the profiler did not start (%s).",
                step,
                error,
            )
            return
        self.run.trace_step = step
        self._tracing = (step, started, until)

    def after_call(self):
        if self._tracing is None:
            return
        step, started, until = self._tracing
        if self.run.batches >= until:
            self._finish(step, started)

    def _finish(self, step, started):
        self._tracing = None
        self.run.trace_step = None
        # The call's device work, in the trace: waits for this step only.
        jax.block_until_ready(self.run.logs)
        jax.profiler.stop_trace()
        written = _newest_trace(self.logdir, since=started - 1)
        if written is None:
            logger.warning("Trace of step %d: no trace was written.", step)
            return
        path = os.path.join(self.logdir, f"tf_trace-{step}.json")
        with gzip.open(written, "rb") as source, open(path, "wb") as target:
            shutil.copyfileobj(source, target)
        self.traces.append(path)
        logger.info("Wrote trace %s", path)

    def _abandon(self):
        """Stops a profiler this callback started and did not stop (a fit
        that ended, or raised, mid-trace)."""
        if self._tracing is None:
            return
        step = self._tracing[0]
        self._tracing = None
        self.run.trace_step = None
        try:
            jax.profiler.stop_trace()
        except Exception as error:  # Not to hide what ended the fit.
            logger.warning("Trace of step %d not stopped (%s).", step, error)

    def on_train_end(self, logs=None):
        self._abandon()
