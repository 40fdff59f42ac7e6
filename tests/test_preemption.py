"""SIGTERM and SIGINT: finish the call, save, stop; the rerun resumes.

The runs are tests/scripts/resume_run.py with checkpoints on time only
(every 600 s), so the checkpoint a signal makes is the only one before the
end; the data is shuffled and augmented, the model has `Dropout`.
"""

import os
import pathlib
import signal
import sys

import numpy as np
import pytest

import keras_slim
from keras_slim import _signals
from keras_slim.callbacks import Checkpoints
from tests.callbacks import common
from tests.helpers import global_step
from tests.processes import reaching
from tests.processes import watched
from tests.test_resume import ENV
from tests.test_resume import SCRIPT
from tests.test_resume import run
from tests.test_resume import weights

pytestmark = pytest.mark.prestarted  # tests/zygote.py


@pytest.mark.parametrize(
    "mode, number",
    [("train", signal.SIGTERM), ("fit", signal.SIGINT)],
)
def test_a_signal_saves_its_step_and_the_rerun_resumes_exactly(
    mode, number, tmp_path
):
    reference = tmp_path / "reference.npz"
    base = [mode, "default", "dataset"]
    run([*base, str(tmp_path / "ref"), str(reference), "0"])
    logdir, out = tmp_path / "run", tmp_path / "out.npz"
    result = watched(
        [sys.executable, str(SCRIPT), *base, str(logdir), str(out), "0"],
        env=ENV,
        signal_when=reaching(10),
        signals=[number],
    ).check(42)
    _, step, path = result.lines[-1].split()
    assert int(step) >= 10
    assert path == str(logdir / f"model.ckpt-{step}")
    # The only checkpoint: time intervals would not have saved yet.
    saved = sorted(p.name for p in logdir.glob("*.index"))
    assert saved == [f"model.ckpt-{step}.index"]
    run([*base, str(logdir), str(out), "0"])
    for a, b in zip(weights(reference), weights(out)):
        np.testing.assert_array_equal(a, b)


def test_a_second_sigint_aborts_at_once_or_after_the_save():
    signals = _signals.StopSignals()
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN in xdist workers
    signals.catch()
    assert signal.getsignal(signal.SIGINT) == signals._on_signal
    signals._on_signal(signal.SIGINT, None)
    assert signals.received == "SIGINT"
    # While a save is written, the abort waits for its end.
    with pytest.raises(KeyboardInterrupt):
        with signals.saving():
            signals._on_signal(signal.SIGINT, None)
    signals.catch()
    with pytest.raises(KeyboardInterrupt):
        signals._on_signal(signal.SIGINT, None)
    # The abort put the previous handlers back.
    assert signal.getsignal(signal.SIGINT) == before


class SendSignal(keras_slim.callbacks.StepCallback):
    def __init__(self, at, number):
        super().__init__()
        self.at, self.number = at, number

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self.counter.step == self.at:
            os.kill(os.getpid(), self.number)


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_handlers_come_back_after_fit(kind, tmp_path):
    _, _, data = common.full_batch()
    before = {n: signal.getsignal(n) for n in (signal.SIGTERM, signal.SIGINT)}
    model = common.model(kind)
    common.fit(model, data, 3, [Checkpoints(tmp_path)])
    assert {n: signal.getsignal(n) for n in before} == before
    with pytest.raises(keras_slim.TrainingPreemptedError) as info:
        common.fit(
            model,
            data,
            10,
            [SendSignal(5, signal.SIGTERM), Checkpoints(tmp_path)],
        )
    assert info.value.step == 5
    assert info.value.signal_name == "SIGTERM"
    assert info.value.checkpoint == str(pathlib.Path(tmp_path) / "model.ckpt-5")
    assert global_step(model) == 5
    assert {n: signal.getsignal(n) for n in before} == before
