"""LogEveryNSteps: TF-Slim's line, the loss of the step itself."""

import logging
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.callbacks import LogEveryNSteps
from keras_slim.callbacks import NanLossGuard
from tests.callbacks import common
from tests.helpers import global_step

LINE = re.compile(
    r"global step (\d+): loss = (\d+\.\d{4}|nan) \((\d+\.\d{3}) sec/step\)"
    r"(?:, (\d+\.\d) examples/sec)?$"
)


def logged(caplog):
    lines = [r.getMessage() for r in caplog.records if r.name == "keras_slim"]
    return [LINE.match(line) for line in lines]


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    return caplog


@pytest.mark.parametrize(
    "kind, steps_per_execution", [("slim", 1), ("slim", 4), ("keras", 1)]
)
def test_logs_the_loss_of_the_step_at_multiples(
    kind, steps_per_execution, caplog_info
):
    # With 4 steps per call, steps 5 and 10 fall inside calls: a SlimModel
    # records each step's loss, so the lines are still those steps'.
    x, y, data = common.full_batch()
    model = common.model(kind, steps_per_execution=steps_per_execution)
    common.fit(model, data, 12, [LogEveryNSteps(every_n_steps=5)])
    matches = logged(caplog_info)
    assert all(matches), [m for m in matches]
    assert [int(m.group(1)) for m in matches] == [5, 10]
    # Reference: the loss of step 5 is the loss of the weights after 4
    # steps; of step 10, after 9.
    reference = common.model(kind)
    common.fit(reference, data, 4)
    loss5 = common.loss_on(reference, x, y)
    common.fit(reference, data, 5)
    loss10 = common.loss_on(reference, x, y)
    assert float(matches[0].group(2)) == pytest.approx(loss5, abs=1e-4)
    assert float(matches[1].group(2)) == pytest.approx(loss10, abs=1e-4)
    # Not Keras's running mean of the epoch.
    history_mean = model.history.history["loss"][0]
    assert abs(float(matches[1].group(2)) - history_mean) > 1e-3


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_examples_per_sec_from_the_batch_size(steps_per_execution, caplog_info):
    _, _, data = common.full_batch(n=64)
    times = iter(range(0, 1000, 1))

    model = common.model(steps_per_execution=steps_per_execution)
    callback = LogEveryNSteps(every_n_steps=2, clock=lambda: next(times))
    common.fit(model, data, 4, [callback])
    matches = logged(caplog_info)
    # The fake clock ticks 1 s per call: one call at the first batch, one
    # per logged line (per call of the train function with 2 steps).
    assert [m.group(3) for m in matches] == ["0.500", "0.500"]
    assert [m.group(4) for m in matches] == ["128.0", "128.0"]


@pytest.mark.parametrize(
    "kind, steps", [("keras", [12, 20]), ("slim", [10, 20])]
)
def test_steps_per_execution_logs_at_execution_boundaries(
    kind, steps, caplog_info
):
    # Calls end at 4, 8, 12, ...: a keras.Model logs at the first boundary
    # past each multiple, a SlimModel at the multiple itself.
    _, _, data = common.full_batch()
    model = common.model(kind, steps_per_execution=4)
    common.fit(model, data, 24, [LogEveryNSteps(every_n_steps=10)])
    assert [int(m.group(1)) for m in logged(caplog_info)] == steps


def test_every_step_of_a_multi_step_call(caplog_info):
    x, y, data = common.full_batch()
    model = common.model(steps_per_execution=3)
    common.fit(model, data, 6, [LogEveryNSteps(every_n_steps=1)])
    matches = logged(caplog_info)
    assert [int(m.group(1)) for m in matches] == list(range(1, 7))
    reference = common.model()
    for match in matches:
        assert float(match.group(2)) == pytest.approx(
            common.loss_on(reference, x, y), abs=1e-4
        )
        common.fit(reference, data, 1)


@pytest.mark.parametrize("steps_per_execution", [1, 4])
def test_a_skipped_step_is_a_step_logged_as_nan(
    caplog_info, steps_per_execution
):
    # fail=False: a SlimModel skips the NaN steps (no variable changes)
    # but they advance the global step; their lines show nan, never a
    # running mean, and the other lines the loss of their own step.
    x, y, _ = common.full_batch()
    bad = x.copy()
    bad[0, 0] = float("nan")
    batches = [x, x, bad, x, bad, x, x, x]
    data = tf.data.Dataset.from_tensor_slices(
        (np.stack(batches), np.stack([y] * len(batches)))
    )
    model = common.model(steps_per_execution=steps_per_execution)
    common.fit(
        model,
        data,
        len(batches),
        [LogEveryNSteps(every_n_steps=1), NanLossGuard(fail=False)],
    )
    lines = [m for m in logged(caplog_info) if m]
    assert [int(m.group(1)) for m in lines] == list(range(1, 9))
    assert global_step(model) == 8
    reference = common.model()
    for number, line in enumerate(lines, 1):
        if number in (3, 5):
            assert line.group(2) == "nan"
            # A skipped step: the step count (the optimizer's too) only.
            reference.optimizer.iterations.assign_add(1)
            continue
        assert float(line.group(2)) == pytest.approx(
            common.loss_on(reference, x, y), abs=1e-4
        )
        common.fit(reference, tf.data.Dataset.from_tensors((x, y)), 1)
    warnings = [
        r.getMessage() for r in caplog_info.records if r.levelname == "WARNING"
    ]
    assert warnings[0].startswith("1 step skipped so far")
    assert "(first at global step 3, last at 3)" in warnings[0]
    assert warnings[-1].startswith("2 steps skipped so far")
    assert "(first at global step 3, last at 5)" in warnings[-1]


def test_a_resumed_run_logs_at_global_multiples(caplog_info):
    _, _, data = common.full_batch()
    model = common.model()
    common.fit(model, data, 3)
    common.fit(model, data, 10, [LogEveryNSteps(every_n_steps=5)])
    assert [int(m.group(1)) for m in logged(caplog_info)] == [5, 10]


@pytest.mark.parametrize("steps_per_execution", [1, 3])
def test_under_mirrored_strategy(steps_per_execution, mirrored, caplog_info):
    x, y, data = common.full_batch()
    with mirrored.scope():
        model = common.model(steps_per_execution=steps_per_execution)
    common.fit(model, data, 4, [LogEveryNSteps(every_n_steps=4)])
    reference = common.model()
    common.fit(reference, data, 3)
    (match,) = logged(caplog_info)
    assert int(match.group(1)) == 4
    assert float(match.group(2)) == pytest.approx(
        common.loss_on(reference, x, y), abs=1e-4
    )
    assert match.group(4) is not None


@pytest.mark.parametrize("value", [0, -1, 2.0, None])
def test_bad_every_n_steps(value):
    with pytest.raises(ValueError, match=f"Received: every_n_steps={value}"):
        LogEveryNSteps(every_n_steps=value)
