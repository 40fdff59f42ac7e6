"""A checkpoint directory that survives damage, kills and a second user."""

import json
import logging
import socket
import subprocess
import sys

import pytest

from keras_slim import _checkpoint_dir
from keras_slim.callbacks import Checkpoints
from tests.callbacks import common
from tests.helpers import global_step

pytestmark = pytest.mark.prestarted  # tests/zygote.py


def trained(tmp_path, steps=30, every=10, **kwargs):
    """A run that saved model.ckpt-10, -20, -30 in `tmp_path`."""
    _, _, data = common.full_batch()
    model = common.model()
    common.fit(
        model,
        data,
        steps,
        [Checkpoints(tmp_path, every_n_steps=every, **kwargs)],
    )
    return model


def indexes(path):
    return sorted(p.name for p in path.glob("model.ckpt-*.index"))


def rerun(tmp_path, steps=5, **kwargs):
    _, _, data = common.full_batch()
    model = common.model()
    saver = Checkpoints(tmp_path, **kwargs)
    common.fit(model, data, steps, [saver])
    return model, saver


@pytest.mark.parametrize("damage", ["garbage", "empty", "deleted"])
def test_a_damaged_state_file_restores_the_newest_file(
    damage, tmp_path, caplog
):
    trained(tmp_path)
    state = tmp_path / "checkpoint"
    if damage == "deleted":
        state.unlink()
    else:
        state.write_text(
            "\x00\x01 not a proto {{{" if damage == "garbage" else ""
        )
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model, saver = rerun(tmp_path)
    assert saver.restored_path == str(tmp_path / "model.ckpt-30")
    assert global_step(model) == 35
    assert "state file" in caplog.text
    # Nothing older was overwritten or lost; the new one is listed.
    assert indexes(tmp_path) == [
        "model.ckpt-10.index",
        "model.ckpt-20.index",
        "model.ckpt-30.index",
        "model.ckpt-35.index",
    ]
    assert _checkpoint_dir._state_paths(str(tmp_path))[-1].endswith("-35")


@pytest.mark.parametrize("relative", [False, True])
def test_a_sound_directory_is_resumed_from_as_it_is(
    relative, tmp_path, caplog, monkeypatch
):
    """An intact state file is left alone, the directory given absolute or
    relative to the working directory (as `make demo` gives it)."""
    directory = tmp_path / "run"
    if relative:
        monkeypatch.chdir(tmp_path)
        directory = directory.relative_to(tmp_path)
    trained(directory)
    caplog.set_level(logging.WARNING, logger="keras_slim")
    _, saver = rerun(directory)
    assert saver.restored_path == str(directory / "model.ckpt-30")
    assert not caplog.records, caplog.text
    assert [p.name for p in (tmp_path / "run").glob("checkpoint*")] == [
        "checkpoint"
    ]


def test_a_leftover_temp_directory_is_removed(tmp_path):
    trained(tmp_path)
    temp = tmp_path / "model.ckpt-40_temp"
    temp.mkdir()
    (temp / "part-00000-of-00001.data-00000-of-00001").write_bytes(b"x")
    rerun(tmp_path)
    assert not temp.exists()


@pytest.mark.parametrize("new", ["partial", "whole"])
def test_a_replacement_a_kill_interrupted_is_settled(new, tmp_path, caplog):
    """A process killed while it saved model.ckpt-30 again: the old files
    are at model.ckpt-30.previous; the new ones partial or whole."""
    trained(tmp_path)
    old = {p.name: p.read_bytes() for p in tmp_path.glob("model.ckpt-30.*")}
    for name, data in old.items():
        (tmp_path / name.replace("-30.", "-30.previous.")).write_bytes(data)
    if new == "partial":
        (tmp_path / "model.ckpt-30.index").write_bytes(b"")
    (tmp_path / "checkpoint.tmp0123abcd").write_text("model_checkp")
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model, saver = rerun(tmp_path)
    assert saver.restored_path == str(tmp_path / "model.ckpt-30")
    assert global_step(model) == 35
    settled = "previous one is put back" if new == "partial" else "kept"
    assert f"replacing {tmp_path}/model.ckpt-30: " in caplog.text
    assert settled in caplog.text
    assert not list(tmp_path.glob("*previous*"))
    assert not list(tmp_path.glob("checkpoint.tmp*"))
    assert indexes(tmp_path) == [
        "model.ckpt-10.index",
        "model.ckpt-20.index",
        "model.ckpt-30.index",
        "model.ckpt-35.index",
    ]


def test_an_unreadable_newest_checkpoint_is_moved_aside(tmp_path, caplog):
    trained(tmp_path)
    data_file = next(tmp_path.glob("model.ckpt-30.data-*"))
    data_file.write_bytes(data_file.read_bytes()[:10])
    caplog.set_level(logging.WARNING, logger="keras_slim")
    # The same fit again: it goes on from step 20 to its end, 30.
    model, saver = rerun(tmp_path, steps=30, every_n_steps=10)
    assert saver.restored_path == str(tmp_path / "model.ckpt-20")
    assert global_step(model) == 30
    assert "cannot be restored" in caplog.text
    aside = sorted(p.name for p in tmp_path.glob("model.ckpt-30.*.damaged-*"))
    assert len(aside) == 2  # .index and .data: kept, not deleted
    assert "model.ckpt-30.index" in indexes(tmp_path)  # saved anew at 30


def test_retention_counts_the_files_on_disk(tmp_path):
    trained(tmp_path, max_to_keep=None)
    (tmp_path / "checkpoint").unlink()
    rerun(tmp_path, steps=10, every_n_steps=10, max_to_keep=2)
    assert indexes(tmp_path) == ["model.ckpt-30.index", "model.ckpt-40.index"]


HOLDER = """
import sys, time
from keras_slim import _checkpoint_dir

_checkpoint_dir.lock(sys.argv[1])
print("locked", flush=True)
time.sleep(60)
"""


def test_a_directory_in_use_fails_before_the_first_step(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        _, _, data = common.full_batch()
        model = common.model()
        with pytest.raises(
            RuntimeError, match=f"in use by process {holder.pid}"
        ):
            common.fit(model, data, 3, [Checkpoints(tmp_path)])
        assert global_step(model) == 0
        assert indexes(tmp_path) == []
    finally:
        holder.kill()
        holder.wait()
    # The holder is gone: its lock is taken over.
    model, _ = rerun(tmp_path, steps=3)
    assert global_step(model) == 3
    assert not (tmp_path / _checkpoint_dir.LOCK_NAME).exists()


def test_a_stale_lock_is_taken_over(tmp_path, caplog):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
    )
    pid = int(dead.stdout)
    lock = tmp_path / _checkpoint_dir.LOCK_NAME
    lock.write_text(
        json.dumps({"pid": pid, "host": socket.gethostname(), "since": "then"})
    )
    caplog.set_level(logging.WARNING, logger="keras_slim")
    model, _ = rerun(tmp_path, steps=2)
    assert global_step(model) == 2
    assert "Taking over" in caplog.text
    assert not lock.exists()
