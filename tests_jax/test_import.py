"""`import keras_slim` on Keras's JAX backend imports no TensorFlow, and
works where TensorFlow cannot be imported; what needs Keras's TensorFlow
backend says so, naming what to use instead, before doing anything."""

import json
import os
import subprocess
import sys
import textwrap

import keras
import pytest

import keras_slim
from keras_slim import _backend
from keras_slim import _startup
from keras_slim import cluster
from keras_slim import moving_averages
from keras_slim import optimizers
from keras_slim import testing
from keras_slim import training_state
from keras_slim.callbacks import StepCallback
from tests_jax import no_tensorflow

# Run in a process where importing TensorFlow raises: the package, its
# callbacks, a policy; then what the process imported.
WITHOUT_TENSORFLOW = textwrap.dedent(
    """
    import json
    import keras_slim
    import keras_slim.callbacks
    from keras_slim import checks, errors

    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 2.0}, clip_global_norm=1.0
    )
    names = [
        keras_slim.SlimModel, keras_slim.wrap, keras_slim.DeploymentConfig,
        keras_slim.train, checks.positive_int, errors.PREEMPTED_EXIT_CODE,
    ]
    tensorflow_only = sorted(
        name for name in ("optimizers", "moving_averages")
        if "keras_slim." + name in sys.modules
    )
    rmsprop = keras_slim.optimizers.RMSProp
    print(json.dumps({
        "tensorflow": sorted(m for m in sys.modules if m.split(".")[0]
                             == "tensorflow"),
        "backend": keras_slim._backend.backend(),
        "policy": type(policy).__name__,
        "imported_eagerly": tensorflow_only,
        "optimizers_on_access": rmsprop.__module__,
    }))
    """
)


def _run_on_jax(code, *, block=True, **env):
    """Runs `code` in a fresh process on Keras's JAX backend, after
    `no_tensorflow.prelude()` when `block`; returns the JSON its last line
    printed."""
    environ = dict(os.environ, KERAS_BACKEND="jax", **env)
    prelude = no_tensorflow.prelude() if block else "import sys\n"
    result = subprocess.run(
        [sys.executable, "-c", prelude + code],
        capture_output=True,
        text=True,
        timeout=300,
        env=environ,
        cwd=no_tensorflow.ROOT,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_finder_refuses_tensorflow():
    finder = no_tensorflow.BlockTensorFlow()
    with pytest.raises(ModuleNotFoundError, match="tensorflow.python"):
        finder.find_spec("tensorflow.python")
    assert finder.find_spec("tensorflow_datasets") is None
    assert finder.find_spec("keras") is None


@pytest.mark.parametrize("block", [True, False], ids=["blocked", "installed"])
def test_import_keras_slim_without_tensorflow(block):
    """Where importing TensorFlow raises, and where it is installed."""
    seen = _run_on_jax(WITHOUT_TENSORFLOW, block=block)
    assert seen == {
        "tensorflow": [],
        "backend": "jax",
        "policy": "GradientPolicy",
        "imported_eagerly": [],
        "optimizers_on_access": "keras_slim.optimizers",
    }


def test_a_command_starts_without_tensorflow():
    """`_startup.quiet_tensorflow_for_commands` imports TensorFlow for a
    command's process on Keras's TensorFlow backend only."""
    code = textwrap.dedent(
        """
        import gc, json
        sys.orig_argv = ["python", "/venv/bin/keras-slim-train", "--help"]
        import keras_slim
        print(json.dumps({
            "tensorflow": "tensorflow" in sys.modules,
            "gc": gc.isenabled(),
        }))
        """
    )
    seen = _run_on_jax(code, TF_CPP_MIN_LOG_LEVEL="1")
    assert seen == {"tensorflow": False, "gc": True}


@pytest.mark.parametrize(
    "text, backend",
    [('{"backend": "jax"}', "jax"), ("{}", "tensorflow"), ("{", "tensorflow")],
)
def test_the_backend_of_keras_json_before_keras_loads(tmp_path, text, backend):
    (tmp_path / "keras.json").write_text(text)
    environ = {"KERAS_HOME": str(tmp_path)}
    assert _startup._keras_json_backend(environ) == backend
    # Once Keras is imported, its own answer.
    assert _startup.keras_backend(environ) == "jax"


def test_import_leaves_tensorflow_out_of_this_process():
    """In this process TensorFlow is installed: importing keras_slim and
    its callbacks does not import it (unless an earlier test did: Keras's
    `keras.utils.set_random_seed` imports it when it is installed)."""
    if "tensorflow" in sys.modules:
        pytest.skip("an earlier test of this process imported TensorFlow")
    import keras_slim.callbacks  # noqa: F401

    keras_slim.GradientPolicy(freeze=["fc1/.*"])
    assert "tensorflow" not in sys.modules
    assert _backend.tensorflow is not None  # a LazyModule, not imported
    assert "not imported" in repr(_backend.tensorflow)


def test_a_keras_weights_file_is_read_without_tensorflow(tmp_path):
    had_tensorflow = "tensorflow" in sys.modules
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    path = str(tmp_path / "model.weights.h5")
    model.save_weights(path)
    assert keras_slim.checkpoints.checkpoint_format(path) == "keras"
    names = [v.name for v in keras_slim.checkpoints.list_variables(path)]
    assert names == ["layers/dense/vars/0", "layers/dense/vars/1"]
    assert had_tensorflow or "tensorflow" not in sys.modules


def _message(entry_point):
    with pytest.raises(RuntimeError) as raised:
        entry_point()
    return str(raised.value)


def test_the_message_names_the_feature_backend_and_replacement():
    message = _message(lambda: optimizers.RMSProp(0.1))
    assert message == (
        "keras_slim.optimizers.RMSProp runs on Keras's TensorFlow backend "
        "(TF1's kernels); this process runs Keras on 'jax' "
        "(KERAS_BACKEND=jax). Use keras.optimizers.RMSprop instead."
    )


def _local_cluster():
    with testing.local_cluster(workers=-1):
        pass


class _EveryStep(StepCallback):
    pass


def test_the_services_run_on_jax_and_check_their_arguments_first(tmp_path):
    # keras_slim.callbacks's services and keras_slim.train are JAX's own
    # here (tests_jax/test_callbacks.py and the others test them); a bad
    # argument is still refused before anything is made.
    directory = str(tmp_path / "not_made")
    for make in (
        lambda: keras_slim.callbacks.Checkpoints(directory, max_to_keep=-1),
        lambda: keras_slim.callbacks.Summaries(directory, every_n_steps=-1),
        lambda: keras_slim.callbacks.Trace(directory, every_n_steps=-1),
        lambda: keras_slim.callbacks.LogEveryNSteps(every_n_steps=-1),
        lambda: keras_slim.callbacks.NanLossGuard(fail="no"),
        lambda: keras_slim.callbacks.StopAtStep(),
        lambda: keras_slim.train(None, None, directory, number_of_steps=-1),
    ):
        with pytest.raises(ValueError):
            make()
    assert not os.path.exists(directory)


# Each entry point with arguments it would refuse (or act on: a directory
# it would make) if it went past the check of the backend.
ENTRY_POINTS = {
    "GradientDescent": (
        lambda d: optimizers.GradientDescent(-1.0),
        "keras.optimizers.SGD",
    ),
    "Momentum": (
        lambda d: optimizers.Momentum(-1.0, 2.0),
        "keras.optimizers.SGD(momentum=",
    ),
    "RMSProp": (lambda d: optimizers.RMSProp(-1.0), "keras.optimizers.RMSprop"),
    "Adam": (lambda d: optimizers.Adam(-1.0), "keras.optimizers.Adam"),
    "Adagrad": (lambda d: optimizers.Adagrad(-1.0), "keras.optimizers.Adagrad"),
    "Adadelta": (
        lambda d: optimizers.Adadelta(-1.0),
        "keras.optimizers.Adadelta",
    ),
    "Ftrl": (lambda d: optimizers.Ftrl(-1.0), "keras.optimizers.Ftrl"),
    "StepCallback": (lambda d: _EveryStep(), "keras.callbacks.Callback"),
    "LocalCluster": (
        lambda d: cluster.LocalCluster(workers=-1),
        "keras.distribution (one process)",
    ),
    "cluster.main": (
        lambda d: cluster.main(["--workers", "-1", "--", "true"]),
        "keras.distribution (one process)",
    ),
    "local_cluster": (
        lambda d: _local_cluster(),
        "keras.distribution (one process)",
    ),
    "warm_up": (
        lambda d: moving_averages.warm_up(keras.optimizers.SGD()),
        "use_ema=True",
    ),
    "training_checkpoint": (
        lambda d: training_state.training_checkpoint(None),
        "keras.callbacks.BackupAndRestore",
    ),
    "restore_training_state": (
        lambda d: training_state.restore_training_state(None, d),
        "keras.callbacks.BackupAndRestore",
    ),
    "restore_latest": (
        lambda d: training_state.restore_latest(None, None),
        "keras.callbacks.OrbaxCheckpoint",
    ),
    "restore_for_inference": (
        lambda d: training_state.restore_for_inference(None, d),
        "model.load_weights",
    ),
}


@pytest.mark.parametrize("name", sorted(ENTRY_POINTS))
def test_a_tensorflow_only_entry_point_refuses_first(name, tmp_path):
    entry_point, instead = ENTRY_POINTS[name]
    directory = str(tmp_path / "not_made")
    message = _message(lambda: entry_point(directory))
    assert "Keras's TensorFlow backend" in message
    assert "'jax' (KERAS_BACKEND=jax)" in message
    assert instead in message
    assert not os.path.exists(directory)


def test_the_suites_processes_collect_again_once_keras_is_imported():
    # tests/startup/sitecustomize.py starts this suite's processes too
    # (tests_jax/conftest.py): the collector paused until Keras is
    # imported, where no TensorFlow is, then resumed; Keras's own imports
    # of scikit-learn and matplotlib skipped.
    seen = _run_on_jax(
        "import gc, json\n"
        "paused = not gc.isenabled()\n"
        "import keras\n"
        "print(json.dumps({'paused': paused, 'after': gc.isenabled(),\n"
        "    'skipped': not {'sklearn', 'matplotlib'} & set(sys.modules),\n"
        "    'tensorflow': 'tensorflow' in sys.modules}))\n"
    )
    assert seen == {
        "paused": True, "after": True, "skipped": True, "tensorflow": False,
    }  # fmt: skip
