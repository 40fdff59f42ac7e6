"""A checkpoint directory that survives damage, kills and a second user."""

import errno
import json
import logging
import os
import re
import shutil
import socket
import time

from keras_slim._backend import tensorflow as tf
from keras_slim.errors import CheckpointSaveError

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

    Removes leftover `<name>-<step>_temp` directories and temporary state
    files (`checkpoint.tmp<hex>`) of interrupted saves; settles a
    checkpoint an interrupted save was replacing (`save`): the new one if
    whole, else the one before it; when the state file is garbage, empty,
    missing or lists other checkpoints than the files, moves it aside
    (when present) and writes it anew from the files, with a warning.

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
    _settle_interrupted(directory, name)
    _remove_state_temps(directory)
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


def _settle_interrupted(directory, name):
    """Settles each checkpoint a save was replacing when the process died
    (its `<prefix>.previous` files are there)."""
    replaced = re.compile(
        "(" + re.escape(name) + r"-\d+)" + re.escape(PREVIOUS) + r"\."
    )
    for base in sorted(
        {
            m.group(1)
            for m in map(replaced.match, tf.io.gfile.listdir(directory))
            if m
        }
    ):
        prefix = os.path.join(directory, base)
        kept = _complete(prefix)
        _settle(prefix)
        logger.warning(
            "An interrupted save was replacing %s: %s.",
            prefix,
            "the new one is whole and kept"
            if kept
            else "the previous one is put back",
        )


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
    return [_move_aside(path) for path in _files_of(prefix)]


#: Where `save` keeps a checkpoint of the same number while it is
#: replaced: `<name>-<step>.previous`, itself a readable checkpoint prefix.
PREVIOUS = ".previous"

# What the file system's failures read as in TensorFlow's messages.
_STRERRORS = {
    errno.ENOSPC: "No space left on device",
    errno.EDQUOT: "Disk quota exceeded",
    errno.EFBIG: "File too large",
    errno.EACCES: "Permission denied",
    errno.EPERM: "Operation not permitted",
    errno.EROFS: "Read-only file system",
}


def _op_errnos():
    """TensorFlow's codes for errno (tsl's ErrnoToCode), when its message
    has no strerror: ENOSPC is RESOURCE_EXHAUSTED, EFBIG OUT_OF_RANGE."""
    return {
        tf.errors.ResourceExhaustedError: errno.ENOSPC,
        tf.errors.OutOfRangeError: errno.EFBIG,
        tf.errors.PermissionDeniedError: errno.EACCES,
    }


def _op_io_errors():
    """Other OpErrors that a file system's failure becomes."""
    return (
        tf.errors.UnknownError,
        tf.errors.UnavailableError,
        tf.errors.DataLossError,
        tf.errors.NotFoundError,
        tf.errors.AbortedError,
    )


def _files_of(prefix):
    """The files of the checkpoint `prefix`: its index and data shards."""
    directory, base = os.path.split(prefix)
    if not tf.io.gfile.isdir(directory):
        return []  # a worker's directory, made by the save
    # Exactly: not the files set aside (`<file>.damaged-<time>`).
    pattern = re.compile(re.escape(base) + r"\.(index|data-\d+-of-\d+)")
    return [
        os.path.join(directory, entry)
        for entry in tf.io.gfile.listdir(directory)
        if pattern.fullmatch(entry)
    ]


def _complete(prefix):
    """Whether the checkpoint `prefix` is whole: every data shard there,
    and an index that reads to its end.

    TensorFlow moves the data in place before it writes the index, so a
    whole index beside the data means a whole checkpoint.
    """
    shards = [
        re.search(r"\.data-(\d+)-of-(\d+)$", path) for path in _files_of(prefix)
    ]
    counts = {int(m.group(2)) for m in shards if m}
    if len(counts) != 1 or len([m for m in shards if m]) != counts.pop():
        return False
    try:
        tf.train.load_checkpoint(prefix).get_variable_to_shape_map()
    except Exception:  # A partial index fails in many ways.
        return False
    return True


def _rename_files(prefix, target):
    # The index last: until it moves, `prefix` is not a checkpoint.
    files = sorted(_files_of(prefix), key=lambda p: p.endswith(".index"))
    for path in files:
        os.replace(path, target + path[len(prefix) :])


def _remove_files(prefix):
    for path in _files_of(prefix):
        os.remove(path)


def _remove_state_temps(directory):
    """Removes the temporary state files (`checkpoint.tmp<hex>`) that
    TensorFlow leaves when writing the state file fails."""
    if not tf.io.gfile.isdir(directory):
        return
    for entry in tf.io.gfile.listdir(directory):
        if re.fullmatch(r"checkpoint\.tmp[0-9a-f]+", entry):
            os.remove(os.path.join(directory, entry))


def _settle(prefix):
    """After a save of `prefix` that did not finish: keeps what it wrote
    if whole, else removes it and puts back the checkpoint it replaced
    (`<prefix>.previous`).

    Without a replaced checkpoint, the files at `prefix` are the failed
    save's own (`save` found none there before it).
    """
    shutil.rmtree(prefix + "_temp", ignore_errors=True)
    previous = prefix + PREVIOUS
    if not _files_of(previous):
        if _files_of(prefix) and not _complete(prefix):
            _remove_files(prefix)
    elif _complete(prefix):
        _remove_files(previous)
    else:
        # Over what the save wrote part way, which has the same names.
        _rename_files(previous, prefix)


def _failure_errno(error):
    """The `errno` of a file system's failure, `0` when it has none, or
    `None` when `error` is not a file system's failure."""
    if isinstance(error, OSError):
        return error.errno or 0
    if not isinstance(error, tf.errors.OpError):
        return None
    for number, text in _STRERRORS.items():
        if text.lower() in error.message.lower():
            return number
    for cls, number in _op_errnos().items():
        if isinstance(error, cls):
            return number
    return 0 if isinstance(error, _op_io_errors()) else None


def _detail(error):
    if isinstance(error, tf.errors.OpError):
        # Without TensorFlow's `{{function_node ...}}` prefix.
        text = re.sub(r"^\{\{[^}]*\}\}\s*", "", error.message)
        return f"{type(error).__name__}: {text}"
    return f"{type(error).__name__}: {error}"


def save(manager, number, *, name, preserve=False):
    """Saves checkpoint `number` with `manager`; a failure loses nothing.

    TensorFlow writes a checkpoint's data and index in `<prefix>_temp/`,
    moves the data in place and writes `<prefix>.index` (directly), then
    the state file (through `checkpoint.tmp<hex>`), and deletes the
    checkpoints beyond `max_to_keep`. A full disk can stop it at any of
    these; the checkpoints before are untouched, except one of the same
    number, whose data would be replaced and index truncated: it is moved
    aside (`<prefix>.previous`) first, and put back if the save fails.
    After a failure, what the save wrote part way is removed (a whole new
    checkpoint is kept), and the state file is written again from the
    files when it no longer lists them (when it can be: its write is
    atomic).

    Args:
        manager: The `tf.train.CheckpointManager` that writes.
        number: Integer. The checkpoint's number (the global step).
        name: The checkpoint name (`model.ckpt`).
        preserve: As for `write_state`. Defaults to `False`.

    Returns:
        The path written.

    Raises:
        CheckpointSaveError: when the file system failed (a full disk, a
            file-size limit, no permission), naming the directory and the
            last complete checkpoint in it.
    """
    directory = manager.directory
    prefix = os.path.join(directory, f"{name}-{number}")
    replaced = bool(_files_of(prefix))
    try:
        if replaced:
            _rename_files(prefix, prefix + PREVIOUS)
        path = manager.save(checkpoint_number=number)
    except Exception as error:
        found = _recover(directory, prefix, name, preserve)
        error_number = _failure_errno(error)
        if error_number is None:
            raise
        raise CheckpointSaveError(
            directory,
            number,
            found[-1] if found else None,
            error_number or None,
            _detail(error),
        ) from error
    if replaced:
        _remove_files(prefix + PREVIOUS)
    return path


def _recover(directory, prefix, name, preserve):
    """Undoes a failed save of `prefix`; returns the complete checkpoints
    left, oldest first."""
    _settle(prefix)
    _remove_state_temps(directory)
    found = [p for _, p in checkpoint_files(directory, name)]
    listed = _state_paths(directory)
    same = listed is not None and sorted(
        map(os.path.normpath, listed)
    ) == sorted(map(os.path.normpath, found))
    if not same:
        try:
            write_state(directory, found, preserve=preserve)
        except (OSError, tf.errors.OpError) as error:
            # The state file is written atomically: the old one stays.
            logger.warning(
                "The checkpoint state file of %s could not be written "
                "again (%s); a rerun writes it from the files.",
                directory,
                _detail(error),
            )
            _remove_state_temps(directory)
    return found


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
        OSError: when the lock cannot be written (a full disk); none is
            left behind.
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
        try:
            with os.fdopen(fd, "w") as f:
                json.dump(me, f)
        except OSError:
            os.remove(path)  # No empty lock behind (a full disk).
            raise
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
        # A directory made read-only: the next run takes the lock over
        # (its process is gone), and the error that ended this one shows.
        except OSError:
            pass
