"""The JAX backend's tests: 4 host devices, no TensorFlow unless a test
asks for it.

Keras's backend and XLA's host device count are fixed when Keras and JAX
start, so they are set here, at import, before any test imports either;
these tests run in their own pytest process (`make test` runs `tests/`
on TensorFlow, then this folder on JAX).
"""

import atexit
import os
import pathlib
import shutil
import tempfile

os.environ["KERAS_BACKEND"] = "jax"
_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Every Python process of this run (its workers, the commands and training
# scripts the tests start) skips Keras's imports of scikit-learn and
# matplotlib: tests/startup/sitecustomize.py, as for tests/.
_ROOT = pathlib.Path(__file__).resolve().parent.parent
_STARTUP = str(_ROOT / "tests" / "startup")
_PATH = list(filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep)))
if _STARTUP not in _PATH:
    os.environ["PYTHONPATH"] = os.pathsep.join([_STARTUP, *_PATH])


def _compilation_cache():
    """XLA's persistent compilation cache, one folder for the whole run:
    made by the process that starts first (pytest's controller, whose
    workers and their subprocesses inherit its environment) and removed
    when it exits. The suite compiles the same small programs in many
    processes (a killed run, its rerun and the straight run compile the
    same step); a program read from the cache is the one XLA would
    compile, so no result changes. Nothing outlives the run: a clean
    clone and a second run measure the same."""
    if "JAX_COMPILATION_CACHE_DIR" in os.environ:
        return
    folder = tempfile.mkdtemp(prefix="keras_slim_xla_cache_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = folder
    # Every program, however fast it compiles or small it is.
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


_compilation_cache()

from tests.startup import sitecustomize  # noqa: E402

sitecustomize.install()

import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

NUM_DEVICES = 4

assert keras.backend.backend() == "jax", keras.backend.backend()
assert len(jax.devices()) == NUM_DEVICES, jax.devices()


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _clear_keras_session():
    yield
    keras.backend.clear_session(free_memory=False)
