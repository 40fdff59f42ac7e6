"""Trace: Chrome traces of chosen steps, with the step's real op events."""

import glob
import json
import logging
import os

import pytest
import tensorflow as tf

import keras_slim
from keras_slim.callbacks import Trace
from tests.callbacks import common
from tests.helpers import global_step


def traced_steps(logdir):
    return sorted(
        int(os.path.basename(p)[len("tf_trace-") : -len(".json")])
        for p in glob.glob(os.path.join(logdir, "tf_trace-*.json"))
    )


def op_names(path):
    with open(path) as f:
        trace = json.load(f)
    return {e.get("name", "") for e in trace["traceEvents"]}


def test_at_steps_writes_a_chrome_trace_with_the_step_ops(tmp_path):
    _, _, data = common.full_batch()
    model = common.model()
    trace = Trace(tmp_path, at_steps=[2])
    common.fit(model, data, 4, [trace])
    assert traced_steps(tmp_path) == [2]
    names = op_names(tmp_path / "tf_trace-2.json")
    assert any("MatMul" in n for n in names), sorted(names)[:50]
    assert glob.glob(str(tmp_path / "plugins/profile/*/*.xplane.pb"))


def test_every_n_steps_traces_steps_0_n_2n(tmp_path):
    _, _, data = common.full_batch()
    common.fit(
        common.model("keras"), data, 7, [Trace(tmp_path, every_n_steps=3)]
    )
    assert traced_steps(tmp_path) == [0, 3, 6]


def test_steps_per_execution_traces_the_execution_holding_the_step(tmp_path):
    _, _, data = common.full_batch()
    model = common.model(steps_per_execution=4)
    common.fit(model, data, 12, [Trace(tmp_path, at_steps=[5])])
    assert traced_steps(tmp_path) == [5]


def test_a_running_profiler_is_left_alone(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="keras_slim")
    _, _, data = common.full_batch()
    tf.profiler.experimental.start(str(tmp_path / "other"))
    try:
        model = common.model()
        common.fit(model, data, 3, [Trace(tmp_path, at_steps=[1])])
        assert global_step(model) == 3
        assert "profiler did not start" in caplog.text
        assert traced_steps(tmp_path) == []
    finally:
        # Still running: the callback did not stop a profiler it had not
        # started, so this stop succeeds.
        tf.profiler.experimental.stop()


def test_train_trace_every_n_steps(tmp_path):
    _, _, data = common.full_batch()
    keras_slim.train(
        common.model(),
        data,
        logdir=str(tmp_path),
        number_of_steps=5,
        trace_every_n_steps=2,
        save_summaries_secs=None,
    )
    assert traced_steps(tmp_path) == [0, 2, 4]


def test_unwritable_logdir_fails_before_the_first_step(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    _, _, data = common.full_batch()
    model = common.model()
    with pytest.raises(ValueError, match="traces cannot be written"):
        common.fit(model, data, 3, [Trace(blocker / "run", at_steps=[1])])
    assert global_step(model) == 0


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"logdir": ""}, "Received: logdir=''"),
        ({"every_n_steps": 0}, "Received: every_n_steps=0"),
        ({"at_steps": [-1]}, "Received: at_steps=\\[-1\\]"),
        ({"at_steps": 3}, "Received: at_steps=3"),
    ],
)
def test_bad_arguments(kwargs, message, tmp_path):
    kwargs = {"logdir": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=message):
        Trace(**kwargs)
