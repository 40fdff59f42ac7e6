"""Exact resume after `kill -9`, on the data users have.

Each case runs tests/scripts/resume_run.py once uninterrupted, then a
chain of runs in one log directory, each killed with SIGKILL as soon as it
reports a randomly chosen step (3 kills at increasing steps, so a kill
lands anywhere: in a step, between calls, in a save), the last run left to
finish. The final weights of the chain must equal the uninterrupted run's,
bitwise (op determinism is on). The input is shuffled each epoch and
randomly augmented, and the model has `Dropout`.
"""

import logging
import os
import pathlib
import sys

import numpy as np
import pytest

from tests.processes import reaching
from tests.processes import watched

pytestmark = pytest.mark.prestarted  # tests/zygote.py

SCRIPT = pathlib.Path(__file__).parent / "scripts" / "resume_run.py"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")


def run(args, kill_at=None, timeout=120):
    """Runs the script; kills it (SIGKILL) once it prints a step of at
    least `kill_at` (a watchdog kills it after `timeout` seconds, so a hang
    fails the test instead of stalling it).

    Returns:
        The step at which it was killed, or `None` if it finished.
    """
    result = watched(
        [sys.executable, str(SCRIPT), *args],
        env=ENV,
        timeout=timeout,
        signal_when=reaching(kill_at),
    )
    steps = result.steps()
    if result.killed and result.signalled:
        return steps[-1] if steps else kill_at
    result.check(0)
    return None


def weights(path):
    with np.load(path) as data:
        return [data[k] for k in sorted(data.files, key=lambda k: int(k[4:]))]


@pytest.mark.parametrize(
    "mode, strategy, data",
    [
        # Each mode, strategy and input once (each case costs five
        # processes): the distributed dataset's position, the arrays' own
        # shuffle.
        ("train", "mirrored", "dataset"),
        ("fit", "default", "arrays"),
    ],
)
def test_kill_9_at_random_steps_then_rerun_equals_an_uninterrupted_run(
    mode, strategy, data, tmp_path
):
    reference = tmp_path / "reference.npz"
    run([mode, strategy, data, str(tmp_path / "ref"), str(reference)])
    rng = np.random.default_rng(len(mode) + len(strategy) + len(data))
    kills = sorted(rng.choice(np.arange(2, 31), size=3, replace=False))
    logdir, out = str(tmp_path / "run"), tmp_path / "resumed.npz"
    killed = [
        run([mode, strategy, data, logdir, str(out)], kill_at=int(k))
        for k in kills
    ]
    assert all(step is not None for step in killed), killed
    run([mode, strategy, data, logdir, str(out)])
    for a, b in zip(weights(reference), weights(out)):
        np.testing.assert_array_equal(a, b)


def test_a_rerun_with_other_steps_per_call_warns_and_finishes(tmp_path, caplog):
    """Blocks of k batches make the saved iterator depend on k: a rerun
    that picks another k says so and goes on from the saved step."""
    import tensorflow as tf

    import keras_slim
    from tests.helpers import classification_data
    from tests.helpers import compile_model
    from tests.helpers import global_step
    from tests.helpers import mlp

    x, y = classification_data(120)
    data = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(120, seed=1)
    data = data.batch(10)

    class Stop(keras_slim.callbacks.StepCallback):
        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            if self.counter.step >= 8:
                raise KeyboardInterrupt

    def fit(steps_per_execution, callbacks=()):
        model = compile_model(mlp(), steps_per_execution=steps_per_execution)
        saver = keras_slim.callbacks.Checkpoints(
            tmp_path, every_n_steps=4, every_n_secs=None
        )
        model.fit(data, epochs=3, verbose=0, callbacks=[saver, *callbacks])
        return model

    with pytest.raises(KeyboardInterrupt):
        fit("auto", [Stop()])  # blocks of 4 batches
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model = fit(1)  # one batch per read
    assert "read in blocks of 4 batches, this fit reads 1" in caplog.text
    assert global_step(model) == 36
