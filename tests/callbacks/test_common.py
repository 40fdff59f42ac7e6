"""Every callback together, in each setting a user may train in.

Plain keras.Model and SlimModel, steps_per_execution 1 and 4, under
MirroredStrategy, beside Keras's own TensorBoard callback.
"""

import logging
import os

import keras
import pytest

from keras_slim import callbacks as ks_callbacks
from tests.callbacks import common
from tests.callbacks.test_summaries import read_events
from tests.helpers import global_step

SETTINGS = {
    "keras": {"kind": "keras"},
    "slim": {"kind": "slim"},
    "slim_spe4": {"kind": "slim", "steps_per_execution": 4},
    "keras_spe4": {"kind": "keras", "steps_per_execution": 4},
    "slim_mirrored": {"kind": "slim", "mirrored": True},
    "slim_mirrored_spe4": {
        "kind": "slim",
        "mirrored": True,
        "steps_per_execution": 4,
    },
}


@pytest.mark.parametrize("setting", sorted(SETTINGS))
def test_all_callbacks_together(setting, mirrored, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")
    config = dict(SETTINGS[setting])
    use_mirrored = config.pop("mirrored", False)
    _, _, data = common.full_batch()

    def build():
        if use_mirrored:
            with mirrored.scope():
                return common.model(**config)
        return common.model(**config)

    def services(last_step):
        return [
            ks_callbacks.Checkpoints(tmp_path / "ckpt", every_n_steps=4),
            ks_callbacks.StopAtStep(last_step=last_step),
            ks_callbacks.NanLossGuard(),
            ks_callbacks.LogEveryNSteps(every_n_steps=4),
            ks_callbacks.Summaries(
                tmp_path / "summaries",
                every_n_steps=4,
                every_n_secs=None,
                gradients=config["kind"] == "slim",
            ),
            ks_callbacks.Trace(tmp_path / "trace", at_steps=[12]),
            keras.callbacks.TensorBoard(str(tmp_path / "tb")),
        ]

    model = build()
    model.fit(data, epochs=1, verbose=0, callbacks=services(8))
    assert global_step(model) == 8
    resumed = build()
    resumed.fit(data, epochs=1, verbose=0, callbacks=services(16))
    assert global_step(resumed) == 16
    assert common.all_finite(resumed)
    saved = sorted(os.listdir(tmp_path / "ckpt"))
    assert "model.ckpt-16.index" in saved
    assert "model.ckpt-8.index" in saved
    lines = [
        r.getMessage()
        for r in caplog.records
        if r.getMessage().startswith("global step")
    ]
    assert [line.split(":")[0] for line in lines] == [
        "global step 4",
        "global step 8",
        "global step 12",
        "global step 16",
    ]
    assert os.listdir(tmp_path / "tb")
    events = read_events(tmp_path / "summaries")
    assert sorted(events["loss"]) == [4, 8, 12, 16]
    if config["kind"] == "slim":
        assert sorted(events["logits/kernel/gradient_norm"]) == [4, 8, 12, 16]
    assert os.path.exists(tmp_path / "trace" / "tf_trace-12.json")
