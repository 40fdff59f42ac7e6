"""LogEveryNSteps: TF-Slim's line, the loss of the step itself."""

import logging
import re

import pytest

from keras_slim.callbacks import LogEveryNSteps
from tests.callbacks import common

LINE = re.compile(
    r"global step (\d+): loss = (\d+\.\d{4}) \((\d+\.\d{3}) sec/step\)"
    r"(?:, (\d+\.\d) examples/sec)?$"
)


def logged(caplog):
    lines = [r.getMessage() for r in caplog.records if r.name == "keras_slim"]
    return [LINE.match(line) for line in lines]


@pytest.fixture
def caplog_info(caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    return caplog


@pytest.mark.parametrize("kind", ["slim", "keras"])
def test_logs_the_loss_of_the_step_at_multiples(kind, caplog_info):
    x, y, data = common.full_batch()
    model = common.model(kind)
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


def test_examples_per_sec_from_the_batch_size(caplog_info):
    _, _, data = common.full_batch(n=64)
    times = iter(range(0, 1000, 1))

    model = common.model()
    callback = LogEveryNSteps(every_n_steps=2, clock=lambda: next(times))
    common.fit(model, data, 4, [callback])
    matches = logged(caplog_info)
    # The fake clock ticks 1 s per call: one call at the first batch, one
    # per logged line.
    assert [m.group(3) for m in matches] == ["0.500", "0.500"]
    assert [m.group(4) for m in matches] == ["128.0", "128.0"]


def test_steps_per_execution_logs_at_execution_boundaries(caplog_info):
    _, _, data = common.full_batch()
    model = common.model(steps_per_execution=4)
    common.fit(model, data, 24, [LogEveryNSteps(every_n_steps=10)])
    assert [int(m.group(1)) for m in logged(caplog_info)] == [12, 20]


def test_a_resumed_run_logs_at_global_multiples(caplog_info):
    _, _, data = common.full_batch()
    model = common.model()
    common.fit(model, data, 3)
    common.fit(model, data, 10, [LogEveryNSteps(every_n_steps=5)])
    assert [int(m.group(1)) for m in logged(caplog_info)] == [5, 10]


def test_under_mirrored_strategy(mirrored, caplog_info):
    x, y, data = common.full_batch()
    with mirrored.scope():
        model = common.model()
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
