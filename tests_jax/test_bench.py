"""The JAX benches still run: bench/jax_devices.py at a tiny size.

Speed itself is measured by the scripts in bench/, never by tests; this
only keeps the script that is meant to be copied to a GPU machine from
rotting (its flags, its JSON line, its DataParallel path).
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
