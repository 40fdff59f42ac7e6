"""The JAX backend's train function: the compiled step, its counters,
and the numeric check's verdict, read on the host a call late or more."""

import functools
import math
import time

import jax
import keras

from keras_slim import errors
from keras_slim._jax import _keras as jax_keras
from keras_slim._jax import run as run_lib
from keras_slim._jax import step as step_lib

__all__ = ["READ_INTERVAL", "TrainFunction"]

#: The least time, in seconds, between two reads of the numeric check's
#: verdict by `TrainFunction.__call__` during a `fit`.
READ_INTERVAL = 0.005


class TrainFunction:
    """`(state, iterator) -> (logs, state)`, as Keras's JAX `fit` calls it.

    One call runs `model.steps_per_execution` compiled steps (fewer when
    the iterator ends), as Keras's own. The step cannot assert under
    `jit`: it applies nothing on a failing update and records the step in
    its counters, which keep every later step from applying anything.
    The verdict is read on the host a call late or more: by the next
    call, before its step takes the counters (the step donates them, as
    it donates the state), only if it is ready (the host never waits for
    the device there) and at most once every `READ_INTERVAL` (5 ms), and at
    every state sync (`check`, which `SlimModel.jax_state_sync` calls at
    the end of each epoch, of `fit` and of `train_on_batch`).
    `NanLossDuringTrainingError` is raised with the model holding the
    state the calls returned, unchanged since the failure.

    Args:
        model: The `SlimModel`, compiled and built.
        plan: Its `JaxPlan`.

    Example:
    ```python
    model.train_function = TrainFunction(model, plan)
    logs, state = model.train_function(state, iterator)
    ```
    """

    def __init__(self, model, plan):
        self._model = model
        self._next_read = 0.0
        self.plan = plan
        self.counters = _placed(step_lib.initial_counters())
        self._out_shardings = self._shardings()
        self._step = self._compile()
        self._summarizing = {}

    def _shardings(self):
        """The compiled step's output shardings under a distribution,
        read now: during an epoch Keras's `fit` has the variables' values
        out of the variables."""
        if jax_keras.distribution() is None:
            return None
        shardings = jax_keras.state_shardings(self._model)
        # The counters come back as they went in (replicated), so the
        # first call's program is the next calls' too.
        counters = jax.tree_util.tree_map(lambda v: v.sharding, self.counters)
        return (None, shardings, counters)

    def _compile(self, summaries=None):
        """The step, jitted as Keras jits its own (the state donated, and
        the counters too: each call's are the next call's input); with
        `summaries`, the one that also returns what they write."""
        step = functools.partial(
            step_lib.run, self._model, self.plan, summaries=summaries
        )
        if self._model.run_eagerly or not self._model.jit_compile:
            return step
        out_shardings = self._out_shardings
        if out_shardings is not None and summaries is not None:
            out_shardings += (None,)
        return jax.jit(step, donate_argnums=(0, 1), out_shardings=out_shardings)

    def _step_for(self, run):
        """The step this call runs: the plain one, or on a call whose end
        `Summaries` writes, the summarizing one (compiled on its first
        use), which leaves what it returns for them in
        `run.summary_outputs` (the call's last step's)."""
        plan = run.summaries
        if plan is None or not run.summary_wanted:
            return self._step
        compiled = self._summarizing.get(plan.key)
        if compiled is None:
            compiled = self._summarizing[plan.key] = self._compile(plan)

        def step(state, counters, data):
            logs, state, counters, run.summary_outputs = compiled(
                state, counters, data
            )
            return logs, state, counters

        return step

    def __call__(self, state, iterator):
        run = run_lib.current(self._model)
        logs, state = self._call(run, state, iterator)
        if run is not None:
            stop = run.stop_batches
            if stop is not None and run.batches >= stop:
                # At `StopAtStep`'s target: `fit` ends after this call.
                self._model.stop_training = True
            try:
                run.call_ended(state)
            except BaseException:
                # A service that raises (`Checkpoints` on SIGTERM) leaves
                # the model this call's state: Keras's loop holds the one
                # the step donated until the call is back.
                jax_keras.attach_state(self._model, state)
                raise
        return logs, state

    def _call(self, run, state, iterator):
        """The call, without the run's `after_each_call` functions."""
        if run is not None and run.trace_step is not None:
            return self._traced(run, state, iterator)
        if run is not None and _steered(run, self._model.steps_per_execution):
            if _rolling_back(run):
                return self._call_rolling_back(run, state, iterator)
            return self._call_in_run(run, state, iterator)
        # The previous call's verdict, read before this call's step takes
        # its counters (it donates them): if that step is done (the host
        # never waits here), and at most every `READ_INTERVAL` seconds (a
        # read costs the fit loop about 20 µs a step when it meets a
        # running step). A failure is sticky (no later step applies
        # anything, every later call's counters say so), so a verdict not
        # read now is read at a later call or at the next sync (`check`),
        # the state still the one from before the failure.
        counters = self.counters
        now = time.monotonic()
        if now >= self._next_read and counters.is_ready():
            self._next_read = now + READ_INTERVAL
            failed = _failed_step(counters)
            if failed:
                jax_keras.attach_state(self._model, state)
                raise self._error(failed, counters)
        logs, state, counters = self._step(state, counters, next(iterator))
        read = 1
        for _ in range(self._model.steps_per_execution - 1):
            try:
                data = next(iterator)
            except StopIteration:
                break
            logs, state, counters = self._step(state, counters, data)
            read += 1
        self.counters = counters
        if run is not None:
            run.ran(read, read)
            run.logs = logs
        return logs, state

    def _traced(self, run, state, iterator):
        """A call `Trace` profiles, named in the trace by the global step
        it traces (`jax.profiler.StepTraceAnnotation`)."""
        step, run.trace_step = run.trace_step, None
        try:
            with jax.profiler.StepTraceAnnotation("train", step_num=step):
                return self._call(run, state, iterator)
        finally:
            run.trace_step = step

    def _call_in_run(self, run, state, iterator):
        """A call the run steers: it passes over batches (a resumed run
        catching up with its position), stops at a step (`StopAtStep`), or
        runs none (a run at its target). Batches passed over are read and
        dropped; a stop reads no batch past it."""
        logs, counters = run.logs, self.counters
        step = self._step_for(run)
        read = ran = 0
        stop = run.stop_batches
        if not run.halted:
            for _ in range(self._model.steps_per_execution):
                if stop is not None and run.batches + ran >= stop:
                    break
                try:
                    data = next(iterator)
                except StopIteration:
                    if read:
                        break
                    raise
                read += 1
                if run.skip_batches:
                    run.skip_batches -= 1
                    continue
                logs, state, counters = step(state, counters, data)
                ran += 1
        self.counters = counters
        run.ran(read, ran)
        run.logs = logs
        if _failed_step(counters):
            jax_keras.attach_state(self._model, state)
            self.check()  # raises, or passes over it (a rollback)
        return (logs if logs is not None else {}), state

    def check(self):
        """Raises for a failure the last call recorded, once; the caller
        has synced the state the call returned into the model.

        Raises:
            NanLossDuringTrainingError: naming the step that failed.
        """
        failed = _failed_step(self.counters)
        if not failed:
            return
        run = run_lib.current(self._model)
        if run is not None and run.rollbacks_left:
            run.rolled_back(_error(failed, self.counters))
            self.counters = _cleared(self.counters)
            return
        raise self._error(failed, self.counters)

    def _error(self, failed, counters):
        """The error of the failed step, the flag cleared so that it is
        raised once."""
        self.counters = _cleared(self.counters)
        return _error(failed, counters)

    def _call_rolling_back(self, run, state, iterator):
        """A call under `NanLossGuard(rollback=n)` (one step a call): the
        previous call's verdict is read first (waiting for it); if its
        step failed, it changed nothing, so this call's batch runs from
        the same state with the failure cleared: the run goes on as if the
        bad batch had not been there."""
        counters = self.counters
        step = self._step_for(run)
        data = next(iterator)
        failed = _failed_step(counters)
        if failed:
            run.rolled_back(_error(failed, counters))
            counters = _cleared(counters)
        logs, state, self.counters = step(state, counters, data)
        run.ran(1, 1)
        run.logs = logs
        return logs, state

    def reset(self):
        """Starts the counters again from zero (each `fit` counts its
        own skipped steps)."""
        self.counters = _placed(step_lib.initial_counters())

    def restore_counters(self, ints, error):
        """Sets the counters a checkpoint saved (`Checkpoints`).

        Args:
            ints: The five ints (`step_lib.host_counters`).
            error: `[loss, squared gradient norm]` of a failed step.
        """
        packed = step_lib.packed_counters(ints, error)
        self.counters = _placed(jax.numpy.asarray(packed))

    def skipped_steps(self):
        """`(count, first, last)` of the steps skipped since the last
        `reset`, as ints (a loss-scale overflow among them); first and
        last are 0 while the count is 0."""
        ints = [int(v) for v in step_lib.host_counters(self.counters)[0]]
        return (
            ints[step_lib.SKIPPED],
            ints[step_lib.FIRST_SKIPPED],
            ints[step_lib.LAST_SKIPPED],
        )


def _steered(run, steps_per_execution):
    """Whether the run changes what this call does (rarely: the plain
    call is the fast path)."""
    if run.halted or run.skip_batches or run.rollbacks_left:
        return True
    if run.summary_wanted and run.summaries is not None:
        return True
    stop = run.stop_batches
    return stop is not None and run.batches + steps_per_execution > stop


def _rolling_back(run):
    """Whether this call runs its one step under a rollback's watch."""
    stop = run.stop_batches
    return (
        run.rollbacks_left > 0
        and not (run.halted or run.skip_batches)
        and (stop is None or run.batches < stop)
    )


def _cleared(counters):
    """The counters with the failure flag down, placed as they were."""
    cleared = counters.at[step_lib.FAILED].set(0)
    return jax.device_put(cleared, counters.sharding)


def _failed_step(counters):
    """The step a call's counters name as failed, 0 for none: one
    device-to-host transfer (indexing on the device first would run one
    more operation, about 0.3 ms on a CPU)."""
    return int(step_lib.host_counters(counters)[0][step_lib.FAILED])


def _placed(counters):
    """The counters replicated over the distribution's devices, where the
    compiled step returns them too; as they are without a distribution."""
    distribution = jax_keras.distribution()
    if distribution is None:
        return counters
    layout = keras.distribution.TensorLayout([None], distribution.device_mesh)
    return jax.tree_util.tree_map(
        lambda v: keras.distribution.distribute_tensor(v, layout), counters
    )


def _error(step, counters):
    """The `NanLossDuringTrainingError` of the step that failed."""
    loss, squares = (float(v) for v in step_lib.host_counters(counters)[1])
    cause = "gradient" if math.isfinite(loss) else "loss"
    norm = math.sqrt(squares) if squares >= 0 else float("nan")
    return errors.NanLossDuringTrainingError(
        step, loss, cause=cause, gradient_norm=norm
    )
