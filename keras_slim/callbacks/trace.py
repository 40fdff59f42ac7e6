"""`Trace`: Chrome traces of chosen steps (slim's `trace_every_n_steps`)."""

import glob
import logging
import os

from keras_slim import _backend
from keras_slim import _keras
from keras_slim import checks
from keras_slim._backend import tensorflow as tf
from keras_slim.callbacks._files import check_writable
from keras_slim.callbacks._interval import IntervalTrigger
from keras_slim.callbacks.step_callback import StepCallback

logger = logging.getLogger("keras_slim")


def xplane_to_chrome_trace(xplane_path):
    """Converts a profiler `.xplane.pb` file to Chrome-trace JSON bytes.

    Args:
        xplane_path: Path of a `.xplane.pb` file the profiler wrote.

    Returns:
        The Chrome-trace JSON, as bytes (`{"traceEvents": [...], ...}`).

    Raises:
        RuntimeError: if TensorFlow's converter fails.
    """
    data, ok = _keras.xspace_to_chrome_trace(xplane_path)
    if not ok:
        raise RuntimeError(f"Could not convert {xplane_path} to a trace.")
    return data


def _newest_xplane(logdir, since):
    pattern = os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")
    paths = [p for p in glob.glob(pattern) if os.path.getmtime(p) >= since]
    return max(paths, key=os.path.getmtime) if paths else None


class Trace(StepCallback):
    """Traces chosen training steps with the TensorFlow profiler.

    For each chosen step, writes the profile TensorBoard's profile tab
    shows (`logdir/plugins/profile/...`) and a Chrome trace
    `logdir/tf_trace-<global step>.json` holding the step's real op events
    (MatMul and the like). A step is named by the global step it begins
    at: `at_steps=[0]` traces the first step, and `every_n_steps=N` traces
    the steps beginning at 0, N, 2N, ..., as TF-Slim's
    `trace_every_n_steps` did.

    With `steps_per_execution > 1` the profiler sees a whole execution: the
    execution holding a chosen step is traced, and named by the chosen
    step. Under gradient accumulation (an optimizer with
    `gradient_accumulation_steps=k`) a step is its `k` micro-batches: the
    profiler runs from the call holding the first micro-batch of the
    chosen step to the call holding its last (a run resumed in the middle
    of that step traces the micro-batches left). A profiler that cannot
    start (another one is running, say Keras's
    `TensorBoard(profile_batch=...)`) is logged and training goes on; the
    callback stops only a profiler it started. Two traces within one second
    share TensorBoard's profile folder (the newer replaces the older
    there); their JSON files are distinct. Only the chief traces (the
    worker whose strategy writes summaries).

    Args:
        logdir: Directory for the profiles and the JSON traces.
        every_n_steps: Positive integer or `None`: trace the steps that begin
            at multiples of it.
            Defaults to `None`.
        at_steps: Global steps whose step to trace.
            Defaults to `()`.

    Raises:
        ValueError: for an empty `logdir`, an `every_n_steps` that is not a
            positive integer, or `at_steps` that are not non-negative
            integers; at train begin, before the first step, for a `logdir`
            that cannot be created or written.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    trace = keras_slim.callbacks.Trace("/tmp/run", at_steps=[10])
    model.fit(x, y, callbacks=[trace])
    ```
    """

    def __init__(self, logdir, *, every_n_steps=None, at_steps=()):
        _backend.require_tensorflow(
            "keras_slim.callbacks.Trace",
            "keras.callbacks.TensorBoard(profile_batch=...)",
        )
        super().__init__()
        self.logdir = checks.path("logdir", logdir)
        self._steps = IntervalTrigger(
            every_n_steps=every_n_steps, at_steps=at_steps
        )
        self.every_n_steps = self._steps.every_n_steps
        self.at_steps = self._steps.at_steps
        self.traces = []

    def step_multiples(self, model):
        # A trace is of one step: one step per call when any is chosen.
        return [1] if self.every_n_steps or self.at_steps else []

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        # Only the chief traces, as only it writes summaries.
        self._chief = self._run.is_chief
        if self._chief:
            check_writable("logdir", self.logdir, what="traces", create=False)
        self._tracing = None

    def on_train_batch_begin(self, batch, logs=None):
        super().on_train_batch_begin(batch, logs)
        if not self._chief or self.no_step or self._tracing is not None:
            return
        # Calls run batches: `k` of them make a step under accumulation.
        k = self.counter.batches_per_step
        first = self.counter.batches
        last = first + self.model.steps_per_execution - 1
        step = self._steps.first_due(first // k, last // k)
        if step is not None:
            self._start(step, until=(step + 1) * k)

    def _start(self, step, *, until):
        """Starts the profiler for `step`, to stop once `until` batches
        were applied."""
        started = tf.timestamp().numpy()
        try:
            tf.profiler.experimental.start(self.logdir)
        except Exception as error:  # Another profiler, a bad logdir, ...
            logger.warning(
                "Trace of step %d skipped: the profiler did not start (%s).",
                step,
                error,
            )
            return
        self._tracing = (step, started, until)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self._tracing is None:
            return
        step, started, until = self._tracing
        if self.counter.batches >= until:
            self._finish(step, started)
            self._tracing = None

    def _finish(self, step, started):
        tf.profiler.experimental.stop()
        xplane = _newest_xplane(self.logdir, since=started - 1)
        if xplane is None:
            logger.warning("Trace of step %d: no profile was written.", step)
            return
        path = os.path.join(self.logdir, f"tf_trace-{step}.json")
        with tf.io.gfile.GFile(path, "wb") as f:
            f.write(xplane_to_chrome_trace(xplane))
        self.traces.append(path)
        logger.info("Wrote trace %s", path)

    def on_train_end(self, logs=None):
        if self._tracing is not None:
            tf.profiler.experimental.stop()
            self._tracing = None
