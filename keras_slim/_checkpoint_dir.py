"""A checkpoint directory that survives damage, kills and a second user.

`tf.train.CheckpointManager` trusts the `checkpoint` state file: a garbage,
empty or deleted one makes a rerun start from step 0 and overwrite good
checkpoints. Here the checkpoints are found by their files
(`model.ckpt-<step>.index`), the state file is rewritten from them when it
disagrees, what an interrupted save left (`model.ckpt-<step>_temp/`) is
removed, and a checkpoint that cannot be read is moved aside
(`<name>.damaged-<time>`), never deleted. One training at a time holds a
directory: `lock` writes `.keras_slim.lock` with the holder's pid and
host; a lock whose process is gone is taken over.
"""

import json
import logging
import os
import re
import shutil
import socket
import time

import tensorflow as tf

logger = logging.getLogger("keras_slim")

LOCK_NAME = ".keras_slim.lock"


def checkpoint_files(directory, name):
    """The checkpoints of `directory` found by their files, oldest first.

    Args:
        directory: The checkpoint directory.
        name: The checkpoint name (`model.ckpt`).

    Returns:
        A list of `(step, prefix)`, sorted by step.
    """
    pattern = re.compile(re.escape(name) + r"-(\d+)\.index$")
    if not tf.io.gfile.isdir(directory):
        return []  # a worker's view before the chief made it
    found = []
    for entry in tf.io.gfile.listdir(directory):
        match = pattern.match(entry)
        if match:
            found.append(
                (int(match.group(1)), os.path.join(directory, entry[:-6]))
            )
    return sorted(found)


def _state_paths(directory):
    """The checkpoints the state file lists, or `None` if it is damaged
    or missing."""
    try:
        state = tf.train.get_checkpoint_state(directory)
    except Exception:  # An empty file: ValueError; garbage: ParseError.
        return None
    if state is None:
        return None
    # Already joined to `directory` where relative (TensorFlow does it).
    return list(state.all_model_checkpoint_paths)


def _move_aside(path):
    target = f"{path}.damaged-{time.strftime('%Y%m%d-%H%M%S')}"
    os.replace(path, target)
    return target


def repair(directory, name, *, keep_hours=False):
    """Makes the state file agree with the checkpoint files on disk.

    Removes leftover `<name>-<step>_temp` directories of interrupted saves;
    when the state file is garbage, empty, missing or lists other
    checkpoints than the files, moves it aside (when present) and writes it
    anew from the files, with a warning.

    Args:
        directory: The checkpoint directory (it exists).
        name: The checkpoint name.
        keep_hours: Whether checkpoints kept by `keep_checkpoint_every_n_
            hours` may be among the files: then none found on disk is
            deleted by retention; else retention counts them all.
            Defaults to `False`.
    """
    temp = re.compile(re.escape(name) + r"-\d+_temp")
    for entry in tf.io.gfile.listdir(directory):
        if temp.match(entry.rstrip("/")):
            path = os.path.join(directory, entry.rstrip("/"))
            shutil.rmtree(path, ignore_errors=True)
            logger.warning("Removed %s, left by an interrupted save.", path)
    files = [prefix for _, prefix in checkpoint_files(directory, name)]
    state_file = os.path.join(directory, "checkpoint")
    listed = _state_paths(directory)
    if not files and listed is None:
        return
    if listed is not None and sorted(map(os.path.normpath, listed)) == sorted(
        map(os.path.normpath, files)
    ):
        return
    if os.path.exists(state_file):
        moved = _move_aside(state_file)
        logger.warning(
            "The checkpoint state file of %s does not match the checkpoints "
            "on disk (moved to %s); it is written again from the files: %s.",
            directory,
            moved,
            [os.path.basename(f) for f in files],
        )
    elif files:
        logger.warning(
            "The checkpoint state file of %s is missing; it is written "
            "again from the files: %s.",
            directory,
            [os.path.basename(f) for f in files],
        )
    write_state(directory, files, preserve=keep_hours)


def write_state(directory, prefixes, *, preserve=False):
    """Writes the state file listing `prefixes` (oldest first).

    Args:
        directory: The checkpoint directory.
        prefixes: The checkpoints, oldest first.
        preserve: Whether `CheckpointManager`'s retention must keep them
            all (they may hold hourly ones); else it counts them.
            Defaults to `False`.
    """
    if not prefixes:
        path = os.path.join(directory, "checkpoint")
        if os.path.exists(path):
            os.remove(path)
        return
    stamps = [os.path.getmtime(p + ".index") for p in prefixes]
    tf.compat.v1.train.update_checkpoint_state(
        directory,
        prefixes[-1],
        all_model_checkpoint_paths=list(prefixes),
        all_model_checkpoint_timestamps=stamps,
        # The manager deletes only checkpoints newer than this.
        last_preserved_timestamp=max(stamps) if preserve else 0.0,
    )


def set_aside(prefix):
    """Moves the files of an unreadable checkpoint aside; returns them."""
    directory, base = os.path.split(prefix)
    moved = []
    for entry in tf.io.gfile.listdir(directory):
        if entry == base + ".index" or entry.startswith(base + ".data-"):
            moved.append(_move_aside(os.path.join(directory, entry)))
    return moved


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return True


def lock(directory):
    """Takes the directory for this process's training.

    Args:
        directory: The checkpoint directory (it exists).

    Returns:
        The lock file's path, for `unlock`.

    Raises:
        RuntimeError: if another live process holds the directory (the
            message names the directory, the pid, the host and since when).
    """
    path = os.path.join(directory, LOCK_NAME)
    me = {
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder is None or _stale(holder, me):
                logger.warning(
                    "Taking over the training directory %s from %s, which "
                    "is gone.",
                    directory,
                    holder or "an unreadable lock",
                )
                try:
                    os.remove(path)
                except FileNotFoundError:
                    pass
                continue
            raise RuntimeError(
                f"The training directory {directory!r} is in use by process "
                f"{holder.get('pid')} on host {holder.get('host')!r} (since "
                f"{holder.get('since')}). Two trainings in one directory "
                "would mix their checkpoints: wait for it to end, use another "
                f"directory, or delete {path} if that process is gone."
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(me, f)
        return path
    raise RuntimeError(f"Could not take the lock {path}.")


def _holder(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _stale(holder, me):
    """Whether the lock's process is gone (or is this process)."""
    if holder.get("host") != me["host"]:
        return False  # Its pid means nothing here.
    pid = holder.get("pid")
    if not isinstance(pid, int):
        return True
    # This process: an earlier fit that did not end (a notebook).
    return pid == me["pid"] or not _alive(pid)


def unlock(path):
    """Releases a lock `lock` returned (if this process still holds it)."""
    if path is None:
        return
    holder = _holder(path)
    if holder is not None and holder.get("pid") == os.getpid():
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
