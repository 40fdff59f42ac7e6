"""The image commands stay on TensorFlow: on Keras's JAX backend each
refuses to start, naming the backend and what to set instead."""

import json
import os
import subprocess
import sys

from tests_jax import no_tensorflow

_RUN = """
import contextlib, io, json
from keras_slim.image import eval_image_classifier as eval_
from keras_slim.image import export_inference_graph as export
from keras_slim.image import train_image_classifier as train

results = {}
for name, module, argv in [
    ("train", train, ["--train_dir", "t", "--max_number_of_steps", "1"]),
    ("eval", eval_, ["--checkpoint_path", "t"]),
    ("export", export, ["--output_file", "g.pb"]),
]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            code = module.main(argv)
        except SystemExit as exit:
            code = exit.code
    results[name] = [code, err.getvalue().strip().splitlines()[-1]]
print(json.dumps(results))
"""


def _path():
    """The run's `PYTHONPATH` (tests_jax/conftest.py), then the root."""
    return os.pathsep.join([os.environ["PYTHONPATH"], str(no_tensorflow.ROOT)])


def test_each_command_refuses_the_jax_backend_first(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run(
        [sys.executable, "-c", _RUN],
        cwd=tmp_path, env={**env, "PYTHONPATH": _path()},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads(result.stdout.strip().splitlines()[-1])
    for name, (code, message) in results.items():
        assert code == 2, (name, message)
        assert f"keras-slim-{name}: error: keras-slim-{name} runs on " in (
            message
        )
        assert "'jax' (KERAS_BACKEND=jax)" in message
        assert "Use KERAS_BACKEND=tensorflow for this command" in message
    assert not list(tmp_path.iterdir())  # nothing written
