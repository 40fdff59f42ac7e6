"""The run: one object per `fit` call, reached through one accessor."""

import pathlib
import re

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim import _run
from keras_slim.callbacks import Checkpoints
from keras_slim.callbacks import StepCallback
from keras_slim.callbacks import StopAtStep
from keras_slim.callbacks import WarmStart
from tests.callbacks import common

PACKAGE = pathlib.Path(keras_slim.__file__).parent


class Seen(StepCallback):
    """Records the run each hook sees."""

    def __init__(self):
        super().__init__()
        self.runs = []

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self.runs.append(self.run)

    def on_train_end(self, logs=None):
        self.runs.append(self.run)


def test_start_joins_an_explicit_run_and_removes_it_after():
    model = common.model()
    with _run.start(model, is_chief=False) as outer:
        assert _run.current(model) is outer
        with _run.start(model) as inner:
            assert inner is outer
        assert _run.of(model, params={"epochs": 1}) is outer
        assert not outer.is_chief
    assert _run.current(model) is None


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_one_run_per_fit_shared_by_its_callbacks(kind):
    _, _, data = common.full_batch()
    model = common.model(kind)
    first, second = Seen(), Seen()
    common.fit(model, data, 2, [first, second])
    later = Seen()
    common.fit(model, data, 2, [later])
    assert first.runs[0] is first.runs[1] is second.runs[0]
    assert later.runs[0] is not first.runs[0]
    if kind == "slim":
        # SlimModel.fit ends its run; a plain model's stays until the next.
        assert _run.current(model) is None


class Fail(keras.callbacks.Callback):
    def on_train_batch_begin(self, batch, logs=None):
        raise RuntimeError("stop")


def test_a_failed_fit_leaves_no_state_to_the_next(tmp_path):
    """A plain model's fit that resumed and then failed (no on_train_end)
    must not make the next fit's warm start step aside."""
    _, _, data = common.full_batch()
    run_dir, source = tmp_path / "run", tmp_path / "source"
    donor = common.model("keras")
    common.fit(donor, data, 2, [Checkpoints(source, every_n_steps=1)])
    common.fit(common.model("keras"), data, 2, [Checkpoints(run_dir)])
    model = common.model("keras")
    with pytest.raises(RuntimeError, match="stop"):
        common.fit(model, data, 2, [Checkpoints(run_dir), Fail()])
    warm = WarmStart(str(source))
    common.fit(model, data, 1, [warm])
    assert warm.resumed_from is None
    assert warm.report["restored"]


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_a_run_at_its_target_runs_no_step_and_keeps_the_train_function(
    kind,
):
    _, _, data = common.full_batch()
    model = common.model(kind)
    common.fit(model, data, 3)
    function = model.train_function
    before = [w.copy() for w in model.get_weights()]
    common.fit(model, data, 3, [StopAtStep(last_step=3)])
    assert common.step(model) == 3
    for a, b in zip(before, model.get_weights()):
        np.testing.assert_array_equal(a, b)
    assert model.train_function is function


def test_only_the_run_accessor_sets_an_attribute_on_the_model():
    """`grep -rn "_keras_slim_" keras_slim/` shows only the accessor."""
    hits = [
        f"{p.relative_to(PACKAGE)}:{n}"
        for p in PACKAGE.rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "_keras_slim_" in line
    ]
    assert len(hits) == 1 and hits[0].startswith("_run.py:"), hits


def test_no_callback_assigns_the_train_function():
    pattern = re.compile(r"\.train_function\s*=")
    for path in (PACKAGE / "callbacks").glob("*.py"):
        assert not pattern.search(path.read_text()), path.name


def test_records_step_losses_only_for_slim_models():
    assert _run.records_step_losses(common.model())
    assert not _run.records_step_losses(common.model("keras"))
    assert _run.is_slim_model(common.model())
    assert not _run.is_slim_model(object())
