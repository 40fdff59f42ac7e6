"""The JAX benches still run: bench/jax_devices.py at a tiny size, and
bench/jax_policy_overhead.py on a few steps.

Speed itself is measured by the scripts in bench/, never by tests; this
only keeps the scripts from rotting: the one meant to be copied to a GPU
machine (its flags, its JSON line, its DataParallel path), and the one
that steps `SlimModel`'s compiled step by hand (its arguments follow the
train function's: the counters it donates).
"""

import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_jax_devices_runs_tiny_on_two_host_devices():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["KERAS_BACKEND"] = "jax"
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
    flags = [
        "--image_size", "32", "--batch_size", "8", "--steps", "2",
        "--warmup", "2", "--repeats", "1", "--width", "0.25",
        "--dtypes", "fp32", "--blocks", "1",
    ]  # fmt: skip
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "jax_devices.py"), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["bench"] == "jax_devices"
    assert line["platform"] == "cpu"
    assert line["device_count"] == 2
    assert (line["image_size"], line["batch_size"]) == (32, 8)
    assert line["blocks"] == 1
    fp32 = line["results"]["fp32"]
    assert fp32["keras_images_per_s"] > 0
    assert fp32["slim_images_per_s"] > 0
    assert fp32["slim_over_keras"]["median"] > 0
    assert list(line["results"]) == ["fp32"]


def test_jax_policy_overhead_runs_on_a_few_steps():
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    env["KERAS_BACKEND"] = "jax"
    flags = ["--rounds", "1", "--blocks", "1", "--steps", "3"]
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "jax_policy_overhead.py"),
         *flags, "--model", "MLP"],
        capture_output=True, text=True, timeout=300, cwd=ROOT, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    line = json.loads(result.stdout.strip().splitlines()[-1])
    assert line["bench"] == "jax_policy_overhead"
    (name,) = line["models"]
    assert name.startswith("MLP")
    model = line["models"][name]
    slim = {"slim", "slim-noread", "slim-check"}
    assert set(model["over_keras"]) == {"keras-waiting", *slim}
    assert set(model["over_keras_waiting"]) == slim
    assert all(rate > 0 for rate in model["steps_per_s"].values())
    assert all(us > 0 for us in model["step_us"].values())
    # The kernels of Keras's step and of the policy's, counted for each.
    assert set(model["kernels"]) == {"keras", "slim", "slim-check"}
    for ops in model["kernels"].values():
        assert sum(ops.values()) > 0
