"""Shared fixtures: 4 logical CPU devices and one MirroredStrategy over them.

Logical devices must be configured before TensorFlow initializes its
devices, so this runs at import, before any test touches TensorFlow.
"""

import gc
import logging
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# Every Python process the tests start (commands, clusters, TF-Slim's
# reference runs, the docs' pages) skips Keras's imports of scikit-learn
# and matplotlib, about 1.5 s of CPU each: see startup/sitecustomize.py.
_STARTUP = str(pathlib.Path(__file__).parent / "startup")
os.environ["PYTHONPATH"] = os.pathsep.join(
    [_STARTUP, *filter(None, [os.environ.get("PYTHONPATH")])]
)

from tests.startup import sitecustomize  # noqa: E402

sitecustomize.install()

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

from tests import zygote  # noqa: E402

NUM_REPLICAS = 4

_cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    _cpus[0], [tf.config.LogicalDeviceConfiguration()] * NUM_REPLICAS
)

# The imports' objects (TensorFlow, Keras, keras_slim: never garbage) out
# of the collector's full passes, which a test's tracing triggers often.
gc.freeze()


# The modules whose tests train in subprocesses or clusters, longest
# test first: sorted to the front, they start at once on both xdist
# workers and the short tests fill the end, so no core idles at the tail.
_LONG_FIRST = (
    "test_resume",
    "test_parameter_server",
    "test_docs",
    "test_train_image_classifier",
    "test_preemption",
    "test_eval_image_classifier",
    "test_multi_worker",
    "test_sync_replicas",
    "test_learning",
)


def pytest_collection_modifyitems(items):
    def rank(item):
        name = item.module.__name__.rsplit(".", 1)[-1]
        return (
            _LONG_FIRST.index(name) if name in _LONG_FIRST else len(_LONG_FIRST)
        )

    items.sort(key=rank)  # stable: the order within a module is kept


# Subprocesses forked from a pre-imported interpreter in the modules
# marked `prestarted` (tests/zygote.py).
_PRESTARTED = zygote.install()


@pytest.fixture(scope="module", autouse=True)
def _prestarted(request):
    marked = request.node.get_closest_marker("prestarted") is not None
    if not (marked and _PRESTARTED):
        yield
        return
    with zygote.prestarted():
        yield


@pytest.fixture(scope="session")
def mirrored():
    """One MirroredStrategy over the 4 logical CPUs, shared by all tests
    and with `DeploymentConfig`, which keeps one per device set (reducing
    on one device: TensorFlow's collectives on CPUs abort when a second
    strategy joins a group of another size, or of another shape).
    """
    from keras_slim.deployment import mirrored_strategy

    return mirrored_strategy([f"/cpu:{i}" for i in range(NUM_REPLICAS)])


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _logging_state():
    loggers = [logging.getLogger("keras_slim"), tf.get_logger()]
    return [
        (lg, lg.handlers[:], lg.filters[:], lg.level, lg.propagate)
        for lg in loggers
    ]


# The loggers as a fresh process has them.
_FRESH_LOGGING = _logging_state()


@pytest.fixture(autouse=True)
def _restore_logging():
    """A command's `main()` called in the test process (in a test or in a
    module's fixture) configures the `keras_slim` and TensorFlow loggers
    for the console: a handler on the stdout of that moment, INFO, no
    propagation. After each test they are put back as a fresh process has
    them, so the next test's `caplog` and output see what it would alone."""
    yield
    for lg, handlers, filters, level, propagate in _FRESH_LOGGING:
        lg.handlers[:] = handlers
        lg.filters[:] = filters
        lg.setLevel(level)
        lg.propagate = propagate


@pytest.fixture(autouse=True)
def _clear_keras_session():
    yield
    # Without Keras's gc.collect(): 0.3 s a test as the heap grows (a
    # third of the suite's time); Python's collector runs as usual.
    keras.backend.clear_session(free_memory=False)


@pytest.fixture
def tf1(tmp_path):
    """A TF1 name-based checkpoint of slim names: `(prefix, {name: value})`."""
    from tests import checkpoint_files as files

    values = files.slim_values()
    return files.write_tf1(tmp_path / "tf1" / "model.ckpt", values), values


@pytest.fixture
def source():
    """A trained model whose state the TF2 and Keras checkpoint files hold."""
    from tests import checkpoint_files as files
    from tests.helpers import compile_model
    from tests.helpers import mlp

    return files.trained(compile_model(mlp(seed=11)))
