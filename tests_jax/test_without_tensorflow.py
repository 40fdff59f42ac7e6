"""A SlimModel with a full policy trains on 2 host devices in a process
where TensorFlow cannot be imported (a GPU image with JAX and no
TensorFlow), and equals the same run on one device."""

import json
import os
import subprocess
import sys

from tests_jax import no_tensorflow

_TRAIN = """
import json, os
os.environ["KERAS_BACKEND"] = "jax"
import keras
import numpy as np
import keras_slim
from tests_jax import helpers

def run(clones):
    config = keras_slim.DeploymentConfig(num_clones=clones, clone_on_cpu=True)
    x, y = helpers.data()
    with config.strategy().scope():
        model = helpers.compile_model(helpers.mlp(helpers.POLICIES["full"]))
        model.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    devices = model.get_layer("fc1").kernel.value.sharding.device_set
    return helpers.weights(model), len(devices), model.describe()

two, devices, text = run(2)
one, _, _ = run(1)
helpers.assert_close(one, two)
print(json.dumps({
    "devices": devices,
    "tensorflow": sorted(m for m in sys.modules if m.startswith("tensorflow")),
    "frozen": bool("frozen by 'fc1/bias'" in text),
}))
"""


def _report_without_tensorflow(code):
    """Runs `code` where TensorFlow cannot be imported, on 2 host devices
    (`DeploymentConfig` sets the count): `(its last line of output as
    JSON, its stderr)`."""
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    env.pop("XLA_FLAGS", None)
    result = subprocess.run(
        [sys.executable, "-c", no_tensorflow.prelude() + code],
        cwd=no_tensorflow.ROOT, env=env, capture_output=True, text=True,
        timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1]), result.stderr


def test_a_full_policy_trains_on_two_host_devices_without_tensorflow():
    report, _ = _report_without_tensorflow(_TRAIN)
    assert report == {"devices": 2, "tensorflow": [], "frozen": True}


_TRAIN_WITH_SERVICES = """
import json, logging, os, sys, tempfile
os.environ["KERAS_BACKEND"] = "jax"
import keras
import numpy as np
import keras_slim
from tests_jax import helpers

logging.basicConfig(level=logging.INFO)
config = keras_slim.DeploymentConfig(num_clones=2, clone_on_cpu=True)
x, y = helpers.data(64)
logdir = tempfile.mkdtemp()
weights = os.path.join(tempfile.mkdtemp(), "start.weights.h5")
with config.strategy().scope():
    start = helpers.compile_model(helpers.mlp(helpers.POLICIES["full"]))
    start.save_weights(weights)
    model = helpers.compile_model(helpers.mlp(helpers.POLICIES["full"]))
    loss = keras_slim.train(
        model, (x, y), logdir, number_of_steps=12, batch_size=16,
        log_every_n_steps=4, save_summaries_steps=4, save_interval_steps=4,
        keep_checkpoint_max=2, trace_every_n_steps=10,
        summarize_variables=True, warm_start=weights, rollback_on_nan=1,
    )
print(json.dumps({
    "step": int(model.optimizer.iterations),
    "loss": bool(np.isfinite(loss)),
    "files": sorted(
        f for f in os.listdir(logdir)
        if f.startswith(("model.ckpt", "events", "tf_trace"))
    ),
    "tensorflow": sorted(m for m in sys.modules if m.startswith("tensorflow")),
}))
"""


def test_train_with_every_service_runs_without_tensorflow():
    report, log = _report_without_tensorflow(_TRAIN_WITH_SERVICES)
    assert report["step"] == 12 and report["loss"]
    assert report["tensorflow"] == []
    files = report["files"]
    assert [f for f in files if f.startswith("model.ckpt")] == [
        "model.ckpt-12", "model.ckpt-8",
    ]  # fmt: skip
    assert any(f.startswith("events.out.tfevents") for f in files), files
    assert "tf_trace-10.json" in files, files
    assert "global step 12: loss = " in log
    assert "Warm start from " in log and "0 missing, 0 mismatched" in log
