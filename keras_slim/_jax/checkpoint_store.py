"""Training checkpoints on JAX: orbax-checkpoint's `CheckpointManager`
under TF-Slim's names (`model.ckpt-<global step>`).

Orbax writes each checkpoint into a temporary directory and renames it
when complete, so a checkpoint is there whole or not at all, after a
`kill -9` or a full disk too; its `CheckpointManager` keeps the newest
`max_to_keep` and one every `keep_time_interval`, TF1 `Saver`'s
`max_to_keep` and `keep_checkpoint_every_n_hours`. What this module adds:
the names, the errors (`CheckpointSaveError`, a damaged checkpoint moved
aside and named), and one tree of the four variable lists Keras's JAX
trainer keeps (by variable path, so that another model is named, not
half-restored).
"""

import dataclasses
import datetime
import errno
import glob
import logging
import os
import re
import shutil
import threading
import time

from keras_slim.errors import CheckpointSaveError

__all__ = ["NAME", "Store", "LISTS"]

logger = logging.getLogger("keras_slim")

NAME = "model.ckpt"
# The four lists of Keras's JAX trainer state, in its order.
LISTS = ("trainable", "non_trainable", "optimizer", "metrics")
#: The most seconds a failed save waits for its other writers to end.
SETTLE_SECS = 60.0
_STEP_DIR = re.compile(re.escape(NAME) + r"-(\d+)$")


def _orbax():
    """orbax.checkpoint, imported on first use (it is not light)."""
    import orbax.checkpoint as ocp

    return ocp


@dataclasses.dataclass(frozen=True)
class _Names:
    """orbax's `NameFormat` of TF-Slim's checkpoint names: step `n` is
    the directory `model.ckpt-<n>`; anything else (orbax's temporary
    directories, a checkpoint moved aside) is not a step."""

    def build_name(self, step):
        return f"{NAME}-{step}"

    def find_all(self, base_path):
        base = str(base_path)
        if not os.path.isdir(base):
            return
        for entry in sorted(os.listdir(base)):
            match = _STEP_DIR.match(entry)
            path = os.path.join(base, entry)
            if match and os.path.isdir(path):
                yield _metadata(int(match.group(1)), path)

    def find_step(self, base_path, step):
        path = os.path.join(str(base_path), self.build_name(step))
        if not os.path.isdir(path):
            raise ValueError(f"No checkpoint of step {step} in {base_path}")
        return _metadata(step, path)


def _metadata(step, path):
    from etils import epath
    from orbax.checkpoint._src.path import step as orbax_step

    return orbax_step.Metadata(step=step, path=epath.Path(path))


class Store:
    """The checkpoints of one directory.

    Args:
        directory: The checkpoint directory (it exists).
        max_to_keep: How many recent checkpoints to keep; `None` keeps
            every one.
        keep_hours: Also keep one per this many hours, or `None`.

    Example:
    ```python
    store = Store("/tmp/run", max_to_keep=5, keep_hours=None)
    store.save(100, state, meta)
    state, meta = store.restore(store.steps()[-1], like=state)
    ```
    """

    def __init__(self, directory, *, max_to_keep, keep_hours):
        ocp = _orbax()
        self.directory = os.path.abspath(directory)
        _remove_temporaries(self.directory)
        keep = datetime.timedelta(hours=keep_hours) if keep_hours else None
        options = ocp.CheckpointManagerOptions(
            max_to_keep=max_to_keep,
            keep_time_interval=keep,
            enable_async_checkpointing=False,
            step_name_format=_Names(),
            create=False,
        )
        self._manager = ocp.CheckpointManager(
            self.directory, options=options, item_names=("state", "meta")
        )

    def path(self, step):
        """The path of the checkpoint of global step `step`."""
        return os.path.join(self.directory, f"{NAME}-{step}")

    def steps(self):
        """The global steps of the complete checkpoints, oldest first."""
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def save(self, step, state, meta):
        """Writes the checkpoint of global step `step`, whole or not at all.

        Args:
            step: The global step.
            state: A dict of the four lists of `LISTS` of arrays.
            meta: A JSON-serializable dict.

        Returns:
            The checkpoint's path.

        Raises:
            CheckpointSaveError: when it cannot be written; what the
                failed save wrote is removed, the complete checkpoints are
                left whole.
        """
        ocp = _orbax()
        args = ocp.args.Composite(
            state=ocp.args.StandardSave(_as_tree(state)),
            meta=ocp.args.JsonSave(meta),
        )
        try:
            self._manager.save(step, args=args, force=True)
            self._manager.wait_until_finished()
        except Exception as error:  # orbax and tensorstore raise many kinds
            self._settle()
            _remove_temporaries(self.directory)
            self._manager.reload()
            steps = self.steps()
            last = self.path(steps[-1]) if steps else None
            raise CheckpointSaveError(
                self.directory, step, last, _errno(error), _detail(error)
            ) from error
        return self.path(step)

    def restore(self, step, *, like):
        """Reads the checkpoint of global step `step`.

        Args:
            step: A step of `steps()`.
            like: The state it restores into (the arrays' shapes, dtypes
                and shardings are taken from it).

        Returns:
            `(state, meta)`.

        Raises:
            Exception: whatever orbax raises for a damaged checkpoint
                (`restore_newest` names it).
        """
        import jax

        ocp = _orbax()
        target = jax.tree_util.tree_map(
            lambda v: jax.ShapeDtypeStruct(
                v.shape, v.dtype, sharding=getattr(v, "sharding", None)
            ),
            _as_tree(like),
        )
        restored = self._manager.restore(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardRestore(target),
                meta=ocp.args.JsonRestore(),
            ),
        )
        return _from_tree(restored["state"]), dict(restored["meta"])

    def meta(self, step):
        """The JSON part of the checkpoint of global step `step`."""
        ocp = _orbax()
        restored = self._manager.restore(
            step, args=ocp.args.Composite(meta=ocp.args.JsonRestore())
        )
        return dict(restored["meta"])

    def restore_newest(self, *, like, check):
        """Reads the newest checkpoint that can be read.

        A checkpoint that cannot be read (damaged, or of another model as
        `check` says) is moved aside as `<name>.unreadable-<time>` and
        named in a warning, and the one before it is tried; nothing is
        deleted.

        Args:
            like: As for `restore`.
            check: A function of the restored `meta` that raises
                `ValueError` for a checkpoint of another model.

        Returns:
            `(step, state, meta)`, or `None` when the directory holds no
            checkpoint.

        Raises:
            RuntimeError: when checkpoints exist and none can be read.
            ValueError: what `check` raises for the newest checkpoint
                (another model's directory is an error, not damage).
        """
        steps = self.steps()
        failures = []
        for step in reversed(steps):
            try:
                meta = self.meta(step)
            except Exception as error:  # orbax raises many kinds
                failures.append((self.path(step), error))
                self._set_aside(step, error)
                continue
            check(meta)  # another model's: an error, not damage
            try:
                state, meta = self.restore(step, like=like)
            except Exception as error:  # orbax raises many kinds
                failures.append((self.path(step), error))
                self._set_aside(step, error)
                continue
            return step, state, meta
        if failures:
            named = "; ".join(f"{p} ({_detail(e)})" for p, e in failures)
            raise RuntimeError(
                f"No checkpoint in {self.directory!r} can be read: {named}. "
                "They were moved aside (`.unreadable-*`); remove the "
                "directory's checkpoints or use another directory to train "
                "from the start."
            )
        return None

    def _set_aside(self, step, error):
        path = self.path(step)
        aside = f"{path}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}"
        logger.warning(
            "Checkpoints: %s cannot be read (%s); moved aside to %s, "
            "resuming from the one before it.",
            path,
            _detail(error),
            aside,
        )
        os.rename(path, aside)
        self._manager.reload()

    def _settle(self):
        """Lets the failed save's writers end (they fail too, or finish)
        before what they wrote is removed: orbax writes each item in its
        own thread, and the first failure returns before the others end.
        The wait is bounded (`SETTLE_SECS`)."""
        try:
            self._manager.wait_until_finished()
        except Exception:  # the same failure, reported already
            pass
        deadline = time.monotonic() + SETTLE_SECS
        for thread in threading.enumerate():
            writer = type(thread).__module__.startswith("orbax")
            if writer and thread is not threading.current_thread():
                try:  # orbax's threads raise their failure on `join`
                    thread.join(max(deadline - time.monotonic(), 0))
                except Exception:
                    pass

    def close(self):
        """Ends the manager (its background threads)."""
        try:
            self._manager.close()
        except Exception:  # a failed save's writers, reported already
            pass
        # What a failed save's last writers left after its cleanup.
        _remove_temporaries(self.directory)


def _as_tree(state):
    """The four lists as orbax's tree: a dict of lists (an empty list
    becomes a dict orbax can hold)."""
    return {name: {str(i): v for i, v in enumerate(state[name])}
            for name in LISTS}  # fmt: skip


def _from_tree(tree):
    return {name: [tree[name][str(i)] for i in range(len(tree[name]))]
            for name in LISTS}  # fmt: skip


def _remove_temporaries(directory):
    """What an interrupted save left (orbax's temporary directories)."""
    for path in glob.glob(os.path.join(directory, "*.orbax-checkpoint-tmp*")):
        shutil.rmtree(path, ignore_errors=True)


def _errno(error):
    """The errno of a failure, from the error or what caused it, or from
    the text tensorstore gives; `None` when unknown."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno:
            return error.errno
        text = str(error)
        for code in (errno.ENOSPC, errno.EFBIG, errno.EDQUOT, errno.EACCES):
            if os.strerror(code) in text:
                return code
        error = error.__cause__ or error.__context__
    return None


def _detail(error):
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:300]
