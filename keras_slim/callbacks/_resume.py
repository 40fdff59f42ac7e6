"""Which checkpoint a training resumes from, with which input position."""

import logging

from keras_slim import _checkpoint_dir
from keras_slim import training_state
from keras_slim._fit.position import Applies

logger = logging.getLogger("keras_slim")


def step_of(prefix):
    """The global step of checkpoint `prefix` (`.../model.ckpt-<step>`)."""
    return int(prefix.rsplit("-", 1)[1])


class Resume:
    """Restores a training's checkpoint and input position.

    Args:
        model: The model being fitted.
        directory: The checkpoint directory (the chief's).
        chief: Whether this process is the chief (which moves unreadable
            checkpoints aside and rewrites the state file).
        position: The run's `InputPosition`, or `None` (a plain model).
        positions: The `WorkerPositions` of a run whose workers save their
            own positions, or `None`.
        epochs: The `fit`'s `epochs`, or `None` if unknown.
        keep_hours: Whether `keep_checkpoint_every_n_hours` is set.

    Example:
    ```python
    path = Resume(model, directory, chief=True, position=position,
                  positions=None, epochs=4, keep_hours=False).newest()
    ```
    """

    def __init__(
        self,
        model,
        directory,
        *,
        chief,
        position,
        positions,
        epochs,
        keep_hours,
    ):
        self._model = model
        self._directory = directory
        self._chief = chief
        self._position = position
        self._positions = positions
        self._epochs = epochs
        self._keep_hours = keep_hours
        # Whether this worker's position is saved apart from `prefix`.
        self._apart = positions is not None and not chief

    def newest(self):
        """Restores the newest checkpoint every worker can, and goes on
        from its input position where it applies.

        The chief moves the files of newer checkpoints that cannot be read
        aside (never deletes them) and lists the rest in the state file.

        Returns:
            The path restored, or `None` when there is none.

        Raises:
            RuntimeError: if checkpoints exist and none can be read.
            ValueError: if the newest readable one is of another model.
        """
        found = dict(
            _checkpoint_dir.checkpoint_files(
                self._directory, training_state.CHECKPOINT_NAME
            )
        )
        failures, applied = [], {}

        def attempt(step, iterators=True):
            applied[step] = self._attempt(found[step], failures, iterators)
            return applied[step] is not None

        if self._positions is None:
            newest_first = sorted(found, reverse=True)
            step = next((s for s in newest_first if attempt(s)), None)
        else:
            step = self._agreed(found, attempt)
        if step is None:
            if failures:
                raise RuntimeError(
                    f"No checkpoint in {self._directory!r} can be restored:\n"
                    + "\n".join(failures)
                )
            return None
        prefix = found[step]
        if self._chief and failures:
            _checkpoint_dir.write_state(
                self._directory,
                [p for s, p in sorted(found.items()) if s <= step],
                preserve=self._keep_hours,
            )
        if applied[step] is Applies.YES:
            self._position.resume(self._model)
        elif applied[step] is Applies.WITHOUT_ITERATORS:
            self._position.resume_without_iterators(prefix, self._model)
        return prefix

    def _agreed(self, found, attempt):
        """The step all workers restored (`WorkerPositions.restore_agreed`);
        when none holds every worker's position, the newest checkpoint
        all can read, without positions (each worker's data then goes on
        from a new pass, skipping what the epoch had read)."""
        step = self._positions.restore_agreed(found, attempt)
        if step is not None or not found:
            return step
        logger.warning(
            "No checkpoint of %s has every worker's input position; the "
            "newest is restored without them.",
            self._directory,
        )
        return self._positions.restore_agreed(
            found,
            lambda s: attempt(s, iterators=False),
            with_positions=False,
        )

    def _attempt(self, prefix, failures, iterators):
        """Restores checkpoint `prefix`, and this worker's position of its
        step where it applies; returns `InputPosition.applies`'s answer,
        an `Applies` (never `YES` without `iterators`; `NO` without a
        position), or `None` when it cannot be read (then `failures` says
        why)."""
        position = self._position
        try:
            # Reading the file may fail too: inside the try.
            applies = (
                Applies.NO
                if position is None
                else position.applies(prefix, self._epochs)
            )
            if applies is Applies.YES and not iterators:
                applies = Applies.WITHOUT_ITERATORS
            apart = applies is Applies.YES and self._apart
            data = (
                position.state if applies is Applies.YES and not apart else None
            )
            training_state.restore_training_state(
                self._model, prefix, data=data
            )
            if apart:
                self._positions.restore(step_of(prefix))
        except ValueError:
            raise
        # A damaged file fails in many ways (OpError, IndexError, ...).
        except Exception as error:
            failures.append(f"{prefix}: {type(error).__name__}: {error}")
            moved = _checkpoint_dir.set_aside(prefix) if self._chief else []
            logger.warning(
                "Checkpoint %s cannot be restored (%s); trying an older one.%s",
                prefix,
                type(error).__name__,
                f" Its files were moved to {moved}." if moved else "",
            )
            return None
        return applies

    def with_position(self, path):
        """Restores checkpoint `path` with this worker's input position of
        its step (a rollback's restore: it applies).

        Args:
            path: A checkpoint the run wrote or restored.
        """
        data = None if self._apart else self._position.state
        training_state.restore_training_state(self._model, path, data=data)
        if self._apart:
            self._positions.restore(step_of(path))
