"""`keras_slim.callbacks.Checkpoints` on JAX (keras_slim/_jax/callbacks/
checkpoints.py, keras_slim/_jax/checkpoint_store.py): a run killed with
SIGKILL and rerun ends with the weights of a straight run, bitwise;
SIGTERM saves and stops; a full disk loses no complete checkpoint; a
damaged one is moved aside and named."""

import os
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

import keras_slim
from keras_slim._jax import checkpoint_store
from tests_jax import helpers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _script(directory, out, *args):
    """Runs tests_jax/scripts/resume_run.py in its own process, on 4 host
    devices (a `DataParallel` of 4 clones)."""
    env = dict(os.environ, KERAS_BACKEND="jax")
    env["PYTHONPATH"] = os.pathsep.join([os.environ["PYTHONPATH"], ROOT])
    return subprocess.run(
        [sys.executable, "-m", "tests_jax.scripts.resume_run",
         "--directory", str(directory), "--out", str(out), "--devices", "4",
         *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _load(path):
    with np.load(path) as saved:
        return {k: saved[k] for k in saved.files}


def _assert_bitwise(a, b):
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def _steps(directory):
    names = sorted(os.listdir(directory))
    return sorted(
        int(n.split("-")[-1]) for n in names if n.startswith("model.ckpt-")
    )


@pytest.fixture(scope="module")
def straight(tmp_path_factory):
    """The uninterrupted run (3 epochs of 8 steps), saving every 3."""
    root = tmp_path_factory.mktemp("straight")
    result = _script(root / "run", root / "w.npz")
    assert result.returncode == 0, result.stderr[-3000:]
    assert _steps(root / "run")[-5:] == [12, 15, 18, 21, 24]
    return _load(root / "w.npz")


@pytest.mark.parametrize(
    "kill_at, extra",
    [
        (None, []),  # a random step, mid-epoch or at an epoch's end
        # Two steps a call: saved at 16 (the first call end past 15), the
        # end of epoch 2, and killed right after that save. The calls run
        # the same compiled step: the straight run is the reference.
        (16, ["--steps_per_execution", "2"]),
    ],
    ids=["arrays", "steps_per_execution"],
)
def test_kill_9_then_rerun_equals_the_straight_run_bitwise(
    tmp_path, straight, kill_at, extra
):
    if kill_at is None:
        kill_at = int(np.random.default_rng().integers(4, 24))
    directory, out = tmp_path / "run", tmp_path / "w.npz"
    killed = _script(directory, out, "--kill_at", str(kill_at), *extra)
    print("killed at global step", kill_at)  # shown when the test fails
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert not out.exists()
    saved = _steps(directory)
    assert saved and saved[-1] <= kill_at
    rerun = _script(directory, out, *extra)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"Resumed from {directory}/model.ckpt-{saved[-1]}" in rerun.stderr
    _assert_bitwise(straight, _load(out))


def test_sigterm_saves_stops_and_the_rerun_resumes(tmp_path, straight):
    directory, out = tmp_path / "run", tmp_path / "w.npz"
    stopped = _script(directory, out, "--term_at", "10")
    assert stopped.returncode == 42, stopped.stderr[-3000:]
    # The signal came at step 10's end, after Checkpoints had seen that
    # batch: the next call (step 11) finishes, then the save and the stop.
    assert f"preempted 11 {directory}/model.ckpt-11" in stopped.stdout
    assert "SIGTERM received" in stopped.stderr
    assert 11 in _steps(directory)
    # The lock went with the run: a rerun takes the directory.
    assert not (directory / ".keras_slim.lock").exists()
    rerun = _script(directory, out)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    _assert_bitwise(straight, _load(out))


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, unmounted after; `None` where none can be mounted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:  # not root, or no tmpfs here
        yield None
        return
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def _fails_to_save(directory, out, *args, why):
    full = _script(directory, out, *args)
    assert full.returncode != 0
    assert "CheckpointSaveError" in full.stderr, full.stderr[-3000:]
    assert why in full.stderr
    assert f"the last one is '{directory}/model.ckpt-6'" in full.stderr
    assert _steps(directory) == [3, 6]
    assert not [n for n in os.listdir(directory) if "tmp" in n]


def test_a_full_disk_loses_no_complete_checkpoint(
    small_disk, tmp_path, straight
):
    # On a small tmpfs where one can be mounted (root), else on tmp_path
    # with the file-size limit only.
    root = small_disk or tmp_path
    directory, out = root / "run", tmp_path / "w.npz"
    first = _script(directory, out, "--kill_at", "7")
    assert first.returncode == -signal.SIGKILL
    assert _steps(directory) == [3, 6]
    # Past 8 KiB a file cannot grow: the next save fails (a checkpoint's
    # JSON part is about 15 KiB).
    limit = ["--file_size_limit", str(8 * 1024)]
    _fails_to_save(directory, out, *limit, why="the file-size limit")
    if small_disk is not None:
        filler = small_disk / "filler"
        free = os.statvfs(small_disk)
        # Room for the lock and the directory's byte probe, not a save.
        filler.write_bytes(b"\0" * (free.f_bavail - 4) * free.f_frsize)
        _fails_to_save(directory, out, why="the disk is full")
        filler.unlink()
    rerun = _script(directory, out)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    _assert_bitwise(straight, _load(out))


# In this process: the store and the callback's checks.


def _fit(model, directory, epochs=1, **kwargs):
    x, y = helpers.data(32)
    saver = keras_slim.callbacks.Checkpoints(
        str(directory), every_n_steps=2, every_n_secs=None, **kwargs
    )
    model.fit(x, y, batch_size=8, epochs=epochs, verbose=0, callbacks=[saver])
    return saver


def _trainable(model):
    return [np.array(v) for v in model.trainable_variables]


def _saver(directory, every_n_steps):
    return keras_slim.callbacks.Checkpoints(
        str(directory), every_n_steps=every_n_steps, every_n_secs=None
    )


def _fresh_fit(inputs, callbacks=(), optimizer=None, **kwargs):
    """A newly built dropout MLP (the same initial weights each time; a
    new process would build it afresh) fitted on `inputs`, shuffled."""
    model = helpers.compile_model(helpers.mlp(dropout=True), optimizer)
    model.fit(
        *inputs, shuffle=True, verbose=0, callbacks=list(callbacks), **kwargs
    )
    return model


@pytest.mark.parametrize("data", ["arrays", "py_dataset"])
def test_a_stopped_run_rebuilt_and_continued_equals_a_straight_run(
    tmp_path, data
):
    # What a notebook does: stop (StopAtStep mid-epoch), build the model
    # again, fit again with the same Checkpoints directory; then a finished
    # run continued to more epochs. Shuffled, with dropout.
    x, y = helpers.data(64)
    inputs = (x, y) if data == "arrays" else (helpers.Batches(x, y), None)
    batch_size = 8 if data == "arrays" else None

    def fit(epochs, *callbacks):
        return _fresh_fit(
            inputs, callbacks, epochs=epochs, batch_size=batch_size
        )

    def saver():
        return _saver(tmp_path, 4)

    straight = fit(4)
    fit(3, saver(), keras_slim.callbacks.StopAtStep(last_step=13))
    assert _steps(tmp_path)[-1] == 13
    fit(2, saver())  # ends the interrupted run's 2 epochs: step 16
    continued = fit(4, saver())  # then past them
    assert int(continued.optimizer.iterations) == 32
    for a, b in zip(_trainable(straight), _trainable(continued)):
        np.testing.assert_array_equal(a, b)


def test_a_seeded_tf_data_pipeline_resumes_exactly_in_a_later_epoch(
    tmp_path, caplog
):
    # Keras reads a tf.data.Dataset one iterator an epoch, and a seeded
    # shuffle reshuffles with each new iterator: a run resumed in its
    # second epoch must read that epoch's order, not the first's. Each fit
    # builds its dataset afresh, as a new process would.
    import tensorflow as tf

    x, y = helpers.data(64)

    def dataset():
        data = tf.data.Dataset.from_tensor_slices((x, y))
        return data.shuffle(64, seed=7).batch(8)

    def fit(*callbacks):
        model = helpers.compile_model(helpers.mlp(dropout=True))
        # Built after the model, whose build sets TF's global seed: the
        # shuffle's order depends on it, as in a script run again.
        model.fit(dataset(), epochs=3, verbose=0, callbacks=list(callbacks))
        return model

    def saver():
        return _saver(tmp_path, 4)

    straight = fit()
    fit(saver(), keras_slim.callbacks.StopAtStep(last_step=13))
    assert _steps(tmp_path)[-1] == 13  # the second epoch's fifth batch
    with caplog.at_level("WARNING", logger="keras_slim"):
        continued = fit(saver())
    assert "a seeded shuffle reshuffles alike" in caplog.text
    assert int(continued.optimizer.iterations) == 24
    for a, b in zip(_trainable(straight), _trainable(continued)):
        np.testing.assert_array_equal(a, b)


def test_steps_per_epoch_warns_that_the_position_is_not_held(tmp_path, caplog):
    # Keras keeps one iterator across epochs under steps_per_epoch: the
    # run says before its first step that a resume would not be exact.
    x, y = helpers.data(64)
    model = helpers.compile_model(helpers.mlp())
    saver = _saver(tmp_path, 2)
    with caplog.at_level("WARNING", logger="keras_slim"):
        model.fit(
            x, y, batch_size=8, epochs=2, steps_per_epoch=3, verbose=0,
            callbacks=[saver],
        )  # fmt: skip
    assert "with steps_per_epoch=3 Keras reads the input" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="keras_slim"):
        _fit(helpers.compile_model(helpers.mlp()), tmp_path / "plain")
    assert "steps_per_epoch" not in caplog.text


@pytest.fixture
def mixed_float16():
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    yield
    keras.mixed_precision.set_dtype_policy("float32")


def _accumulating():
    return keras.optimizers.AdamW(0.01, gradient_accumulation_steps=3)


def _scaled():
    # The scale doubles every 2 finite steps: it moves within the run,
    # and halves on an overflow.
    return keras.optimizers.LossScaleOptimizer(
        keras.optimizers.SGD(0.05, momentum=0.9),
        initial_scale=2.0**10,
        dynamic_growth_steps=2,
    )


@pytest.mark.parametrize(
    "optimizer, stop",
    [
        # 8 batches an epoch, 3 a step: the first fit ends 2 micro-batches
        # into global step 3, its sums saved.
        (_accumulating, None),
        (_scaled, 5),
    ],
    ids=["accumulation-mid-step", "loss-scale"],
)
def test_the_step_state_resumes_exactly(tmp_path, request, optimizer, stop):
    if optimizer is _scaled:
        request.getfixturevalue("mixed_float16")
    x, y = helpers.data(64)

    def fit(epochs, *callbacks):
        return _fresh_fit(
            (x, y), callbacks, optimizer(), epochs=epochs, batch_size=8
        )

    def saver():
        return _saver(tmp_path, 100)

    straight = fit(3)
    first = [saver()]
    if stop:
        first.append(keras_slim.callbacks.StopAtStep(last_step=stop))
    stopped = fit(1, *first)
    continued = fit(3, saver())
    if optimizer is _accumulating:
        # The first fit stopped between updates: its sums were not zero.
        sums = [
            np.array(v)
            for v in stopped.optimizer.variables
            if "accumulator" in v.path
        ]
        assert sums and any(np.abs(s).sum() > 0 for s in sums)
        assert int(stopped.optimizer.iterations) == 2  # 8 // 3
    else:
        scale = float(straight.optimizer.dynamic_scale)
        assert scale != 2.0**10  # it moved
        assert float(continued.optimizer.dynamic_scale) == scale
    # Every variable, the optimizer's and the seed generators' too (their
    # paths are numbered per process, their order is the model's).
    for a, b in zip(straight.variables, continued.variables):
        np.testing.assert_array_equal(a, b, err_msg=a.path)
    optimizers = (straight.optimizer, continued.optimizer)
    for a, b in zip(*(o.variables for o in optimizers)):
        np.testing.assert_array_equal(a, b, err_msg=a.path)


def test_names_keep_max_and_the_lock(tmp_path):
    model = helpers.compile_model(helpers.mlp())
    _fit(model, tmp_path, epochs=3, max_to_keep=2)
    assert _steps(tmp_path) == [10, 12]
    assert not (tmp_path / ".keras_slim.lock").exists()
    # The same process's lock from an unfinished fit is taken over; a
    # live other process's is refused.
    (tmp_path / ".keras_slim.lock").write_text(
        '{"pid": 1, "host": "%s", "since": "then"}' % os.uname().nodename
    )
    with pytest.raises(RuntimeError, match="is in use by process 1"):
        _fit(helpers.compile_model(helpers.mlp()), tmp_path)


def test_a_damaged_checkpoint_is_moved_aside_and_named(tmp_path, caplog):
    model = helpers.compile_model(helpers.mlp())
    _fit(model, tmp_path, epochs=2)
    newest = tmp_path / "model.ckpt-8"
    for root, _, files in os.walk(newest / "state"):
        for name in files:
            with open(os.path.join(root, name), "wb") as f:
                f.write(b"broken")
    resumed = helpers.compile_model(helpers.mlp())
    saver = _fit(resumed, tmp_path, epochs=0)
    assert saver.restored_path == str(tmp_path / "model.ckpt-6")
    assert "model.ckpt-8 cannot be read" in caplog.text
    assert [n for n in os.listdir(tmp_path) if ".unreadable-" in n]


def test_another_models_checkpoints_are_refused_before_any_step(tmp_path):
    _fit(helpers.compile_model(helpers.mlp()), tmp_path)
    other = helpers.compile_model(helpers.mlp(batch_norm=True))
    with pytest.raises(ValueError, match="are of another model"):
        _fit(other, tmp_path)
    assert int(other.optimizer.iterations) == 0


def test_a_plain_keras_model_is_refused_with_the_fix(tmp_path):
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    model.compile("sgd", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"keras_slim.SlimModel\(inputs"):
        model.fit(
            *helpers.data(8), verbose=0,
            callbacks=[keras_slim.callbacks.Checkpoints(str(tmp_path))],
        )  # fmt: skip


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="every_n_steps"):
        keras_slim.callbacks.Checkpoints("/tmp/x", every_n_steps=0)
    with pytest.raises(ValueError, match="max_to_keep"):
        keras_slim.callbacks.Checkpoints("/tmp/x", max_to_keep=-1)


def test_the_store_saves_whole_or_not_at_all(tmp_path):
    store = checkpoint_store.Store(tmp_path, max_to_keep=None, keep_hours=1)
    state = {name: [np.ones(3, "float32")] for name in checkpoint_store.LISTS}
    state["metrics"] = []
    store.save(1, state, {"a": 1})
    assert store.steps() == [1]
    restored, meta = store.restore(1, like=state)
    assert meta == {"a": 1}
    np.testing.assert_array_equal(restored["trainable"][0], np.ones(3))
    store.close()


class _TermAt(keras.callbacks.Callback):
    """Sends this process SIGTERM as the call of global step `step`
    begins (`Checkpoints` holds the signal during its fit)."""

    def __init__(self, step):
        super().__init__()
        self.step = step

    def on_train_batch_begin(self, batch, logs=None):
        if batch + 1 == self.step:
            os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_in_process_leaves_the_model_at_the_saved_step(tmp_path):
    # The save and the error come after the call that ran step 6, from
    # inside `fit`'s loop: the model holds that call's state (the call
    # donated the one before), which the checkpoint holds too.
    model = helpers.compile_model(helpers.mlp(dropout=True))
    x, y = helpers.data(64)
    with pytest.raises(keras_slim.TrainingPreemptedError) as info:
        model.fit(
            x, y, batch_size=8, epochs=2, shuffle=True, verbose=0,
            callbacks=[_saver(tmp_path, 100), _TermAt(6)],
        )  # fmt: skip
    assert info.value.step == 6 and _steps(tmp_path) == [6]
    assert int(model.optimizer.iterations) == 6
    # A model restored from that checkpoint, at its target: no step runs.
    restored = helpers.compile_model(helpers.mlp(dropout=True))
    restored.fit(
        x, y, batch_size=8, epochs=1, verbose=0,
        callbacks=[
            _saver(tmp_path, 100),
            keras_slim.callbacks.StopAtStep(last_step=6),
        ],
    )  # fmt: skip
    assert int(restored.optimizer.iterations) == 6
    for a, b in zip(_trainable(model), _trainable(restored)):
        np.testing.assert_array_equal(a, b)
