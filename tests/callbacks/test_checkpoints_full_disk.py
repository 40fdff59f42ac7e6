"""Checkpoints on a full disk: a failed save loses nothing written whole.

A file-size limit (`RLIMIT_FSIZE`; Python ignores SIGXFSZ, so a write past
it fails with EFBIG) works anywhere; a small tmpfs, where the test can
mount one (root), fills up for real (ENOSPC), at a chosen file of the save.
"""

import contextlib
import errno
import os
import resource
import stat
import subprocess

import keras
import pytest
import tensorflow as tf

import keras_slim
from keras_slim.callbacks import Checkpoints
from tests.callbacks import common
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import weights

DATA = "model.ckpt-2.data-00000-of-00001"


@contextlib.contextmanager
def file_size_limit(nbytes):
    """This process's writes past `nbytes` fail with EFBIG."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MB tmpfs, unmounted after; skipped where none can be mounted."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def fill(disk, leave_blocks=0):
    """Fills `disk` up to `leave_blocks` free blocks; returns the filler."""
    filler = disk / "filler"
    free = os.statvfs(disk)
    filler.write_bytes(b"\0" * (free.f_bavail - leave_blocks) * free.f_frsize)
    return filler


def blocks(path):
    return -(-os.path.getsize(path) // os.statvfs(path).f_frsize)


def contents(directory):
    """Every file of `directory` but the lock, with its bytes."""
    return {
        p.name: p.read_bytes()
        for p in directory.iterdir()
        if p.is_file() and p.name != ".keras_slim.lock"
    }


class Before(keras.callbacks.Callback):
    """Calls `function` when step `at_step` ends (`None`: when training
    ends), before a `Checkpoints` listed after it saves."""

    def __init__(self, function, at_step=None):
        super().__init__()
        self.function = function
        self.at_step = at_step

    def on_train_batch_end(self, batch, logs=None):
        if global_step(self.model) == self.at_step:
            self.function()

    def on_train_end(self, logs=None):
        if self.at_step is None:
            self.function()


def saved_at_2(directory):
    """A run of 2 steps that saved model.ckpt-2; its files."""
    _, _, data = common.full_batch()
    common.fit(common.model(), data, 2, [Checkpoints(directory)])
    return contents(directory)


def assert_resumes_from_2(directory, to_step=4):
    """A rerun of the 2-step fit restores model.ckpt-2 and ends at
    `to_step` (2 when that checkpoint says its fit had not finished) with
    the weights of a run never stopped."""
    _, _, data = common.full_batch()
    reference = common.model()
    common.fit(reference, data, to_step)
    model = common.model()
    saver = Checkpoints(directory)
    common.fit(model, data, 2, [saver])
    assert saver.restored_path == str(directory / "model.ckpt-2")
    assert global_step(model) == to_step
    assert max_abs_diff(weights(model), weights(reference)) == 0.0


def test_past_the_file_size_limit_nothing_is_lost_and_a_rerun_resumes(
    tmp_path,
):
    before = saved_at_2(tmp_path)
    _, _, data = common.full_batch()
    with (
        file_size_limit(os.path.getsize(tmp_path / DATA) // 2),
        pytest.raises(
            keras_slim.CheckpointSaveError,
            match=(
                f"global step 4 in '{tmp_path}': a file is too large .*File "
                f"too large.* the last one is '{tmp_path}/model.ckpt-2'; "
                r"raise the limit \(`ulimit -f`\) and rerun"
            ),
        ) as error,
    ):
        common.fit(common.model(), data, 2, [Checkpoints(tmp_path)])
    assert error.value.errno == errno.EFBIG
    assert error.value.checkpoint == str(tmp_path / "model.ckpt-2")
    # Nothing removed, changed or left behind; the state file as it was.
    assert contents(tmp_path) == before
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == []
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(
        tmp_path / "model.ckpt-2"
    )
    assert_resumes_from_2(tmp_path)


def test_on_a_full_disk_nothing_is_lost_and_a_rerun_resumes(small_disk):
    before = saved_at_2(small_disk)
    _, _, data = common.full_batch()
    full = Before(lambda: fill(small_disk), at_step=4)
    with pytest.raises(
        keras_slim.CheckpointSaveError,
        match=f"in '{small_disk}': the disk is full .*No space left",
    ) as error:
        common.fit(common.model(), data, 2, [full, Checkpoints(small_disk)])
    assert error.value.errno == errno.ENOSPC
    (small_disk / "filler").unlink()
    assert contents(small_disk) == before
    assert_resumes_from_2(small_disk)


@pytest.mark.parametrize("fails_at", ["data", "index"])
def test_a_checkpoint_being_replaced_survives_a_full_disk(fails_at, small_disk):
    """A finished run of a `SlimModel` saves its last step again at the
    end (the input position says it finished). TensorFlow moves the new
    data over the old and rewrites the index in place: another writer
    taking the space between the two would leave neither whole. The old
    files are moved aside for the save and put back when it fails, at
    the data (`SaveV2`) or at the index (`MergeV2Checkpoints`)."""
    _, _, data = common.full_batch()
    saved = {}

    def full():
        saved.update(contents(small_disk))
        # Room for the save's data and index in `model.ckpt-2_temp/`,
        # not for the index TensorFlow then writes in place.
        room = blocks(small_disk / DATA) + blocks(
            small_disk / "model.ckpt-2.index"
        )
        fill(small_disk, room if fails_at == "index" else 0)

    with pytest.raises(keras_slim.CheckpointSaveError) as error:
        common.fit(
            common.model(),
            data,
            2,
            [Before(full), Checkpoints(small_disk, every_n_steps=2)],
        )
    op = "MergeV2Checkpoints" if fails_at == "index" else "SaveV2"
    assert f"[Op:{op}]" in error.value.detail
    assert error.value.checkpoint == str(small_disk / "model.ckpt-2")
    (small_disk / "filler").unlink()
    assert contents(small_disk) == saved
    # The step-2 save's position: its fit still had to end.
    assert_resumes_from_2(small_disk, to_step=2)


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permissions")
def test_a_directory_made_read_only_loses_nothing(tmp_path):
    before = saved_at_2(tmp_path)
    _, _, data = common.full_batch()
    read_only = Before(lambda: tmp_path.chmod(stat.S_IRUSR | stat.S_IXUSR), 4)
    try:
        with pytest.raises(
            keras_slim.CheckpointSaveError,
            match=f"in '{tmp_path}': permission denied",
        ):
            common.fit(
                common.model(), data, 2, [read_only, Checkpoints(tmp_path)]
            )
    finally:
        tmp_path.chmod(stat.S_IRWXU)
    assert contents(tmp_path) == before
    assert_resumes_from_2(tmp_path)
