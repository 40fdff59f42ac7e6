"""The JAX backend's tests: 4 host devices, no TensorFlow unless a test
asks for it.

Keras's backend and XLA's host device count are fixed when Keras and JAX
start, so they are set here, at import, before any test imports either;
these tests run in their own pytest process (`make test` runs `tests/`
on TensorFlow, then this folder on JAX).
"""

import os

os.environ["KERAS_BACKEND"] = "jax"
_FLAG = "--xla_force_host_platform_device_count=4"
if _FLAG not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FLAG}"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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
