"""The JAX backend's train function: the compiled step, its counters,
and the numeric check's verdict read after each call."""

import functools
import math

import jax
import numpy as np

from keras_slim import errors
from keras_slim._jax import _keras as jax_keras
from keras_slim._jax import step as step_lib

__all__ = ["TrainFunction"]


class TrainFunction:
    """`(state, iterator) -> (logs, state)`, as Keras's JAX `fit` calls it.

    One call runs `model.steps_per_execution` compiled steps (fewer when
    the iterator ends), as Keras's own. The step cannot assert under
    `jit`: it applies nothing on a failing update and records the step in
    its counters, which keep every later step of the call from applying
    anything; after the call the counters are read on the host (one
    device-to-host read per call) and `NanLossDuringTrainingError` is
    raised with the state the call returned, unchanged since the failure.

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
        self.plan = plan
        self.counters = step_lib.initial_counters()
        self._step = self._compile()

    def _compile(self):
        step = functools.partial(step_lib.run, self._model, self.plan)
        if self._model.run_eagerly or not self._model.jit_compile:
            return step
        out_shardings = None
        if jax_keras.distribution() is not None:
            shardings = jax_keras.state_shardings(self._model)
            out_shardings = (None, shardings, None)
        return jax.jit(step, donate_argnums=0, out_shardings=out_shardings)

    def __call__(self, state, iterator):
        counters = self.counters
        logs, state, counters = self._step(state, counters, next(iterator))
        for _ in range(self._model.steps_per_execution - 1):
            try:
                data = next(iterator)
            except StopIteration:
                break
            logs, state, counters = self._step(state, counters, data)
        self.counters = counters
        # One transfer of the counters: indexing the device array first
        # would run one more operation per call (about 0.3 ms on a CPU).
        failed = int(np.asarray(counters.ints)[step_lib.FAILED])
        if failed:
            jax_keras.attach_state(self._model, state)
            self.counters = step_lib.Counters(
                ints=counters.ints.at[step_lib.FAILED].set(0),
                error=counters.error,
            )
            raise _error(failed, counters.error)
        return logs, state

    def reset(self):
        """Starts the counters again from zero (each `fit` counts its
        own skipped steps)."""
        self.counters = step_lib.initial_counters()

    def skipped_steps(self):
        """`(count, first, last)` of the steps skipped since the last
        `reset`, as ints (a loss-scale overflow among them); first and
        last are 0 while the count is 0."""
        ints = [int(v) for v in self.counters.ints]
        return (
            ints[step_lib.SKIPPED],
            ints[step_lib.FIRST_SKIPPED],
            ints[step_lib.LAST_SKIPPED],
        )


def _error(step, error):
    """The `NanLossDuringTrainingError` of the step that failed."""
    loss, squares = (float(v) for v in error)
    cause = "gradient" if math.isfinite(loss) else "loss"
    norm = math.sqrt(squares) if squares >= 0 else float("nan")
    return errors.NanLossDuringTrainingError(
        step, loss, cause=cause, gradient_norm=norm
    )
