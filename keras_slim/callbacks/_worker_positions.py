"""Each worker's input position under MultiWorkerMirroredStrategy.
docs/how_it_works.md ("The input position") draws it.
"""

import logging
import os

from keras_slim import _checkpoint_dir
from keras_slim._backend import tensorflow as tf

logger = logging.getLogger("keras_slim")

#: The name of a worker's position checkpoints.
NAME = "input.ckpt"


def worker_directory(directory, task):
    """Where worker `task` saves its input position.

    Args:
        directory: The chief's checkpoint directory.
        task: The worker's task id.

    Returns:
        `<directory>/input_worker_<task>`.
    """
    return os.path.join(directory, f"input_worker_{task}")


class WorkerPositions:
    """One worker's input positions, and the step all workers restore.

    Args:
        directory: The chief's checkpoint directory.
        strategy: The `MultiWorkerMirroredStrategy` (over several workers).
        chief: Whether this worker is the chief (whose position is in its
            checkpoints).
        data: This worker's `DataState` (`InputPosition.state`).
        max_to_keep: As for `Checkpoints`.
        keep_checkpoint_every_n_hours: As for `Checkpoints`.
        gather: For tests: a function of an int returning every worker's
            value of it, in task order. Defaults to `None` (an
            all-gather under `strategy`).

    Example:
    ```python
    positions = WorkerPositions(directory, strategy, chief=False, data=state)
    positions.open()
    step = positions.restore_agreed(steps, attempt)  # at train begin
    positions.save(step)  # after each save of the chief's checkpoint
    ```
    """

    def __init__(
        self,
        directory,
        strategy,
        *,
        chief,
        data,
        max_to_keep=5,
        keep_checkpoint_every_n_hours=None,
        gather=None,
    ):
        task = strategy.cluster_resolver.task_id if strategy else 0
        self.chief = chief
        self.directory = None if chief else worker_directory(directory, task)
        self._checkpoint = None
        if data is not None:
            self._checkpoint = tf.train.Checkpoint(data=data)
            # Made on every worker, the chief too: under a strategy's scope
            # a variable's creation is a collective all must make.
            self._checkpoint.save_counter  # noqa: B018
        self._max_to_keep = max_to_keep
        self._keep_hours = keep_checkpoint_every_n_hours
        self._gather = gather or _all_gather(strategy)
        self._manager = None

    def open(self):
        """Makes this worker's directory (not the chief's), settles what
        an interrupted save left there, and its checkpoint manager."""
        if self.chief:
            return
        tf.io.gfile.makedirs(self.directory)
        _checkpoint_dir.repair(
            self.directory, NAME, keep_hours=self._keep_hours is not None
        )
        self._manager = tf.train.CheckpointManager(
            self._checkpoint,
            self.directory,
            max_to_keep=self._max_to_keep,
            keep_checkpoint_every_n_hours=self._keep_hours,
            checkpoint_name=NAME,
        )

    def save(self, step):
        """Saves this worker's position at `step` (the chief's is in its
        checkpoint: nothing to do).

        Args:
            step: The global step, the chief's checkpoint's number.

        Raises:
            keras_slim.CheckpointSaveError: when it cannot be written.
        """
        if self._manager is None:
            return
        _checkpoint_dir.save(
            self._manager,
            step,
            name=NAME,
            preserve=self._keep_hours is not None,
        )

    def saved_steps(self):
        """The steps of this worker's saved positions (the chief's: `None`,
        they are its checkpoints')."""
        if self.chief:
            return None
        found = _checkpoint_dir.checkpoint_files(self.directory, NAME)
        return {step for step, _ in found}

    def restore(self, step):
        """Restores this worker's position of `step` into its `DataState`
        (the iterators when the run makes them). Nothing for the chief.

        Args:
            step: A step of `saved_steps()`.

        Raises:
            Exception: what TensorFlow raises for a file it cannot read.
        """
        if self.chief:
            return
        prefix = os.path.join(self.directory, f"{NAME}-{step}")
        # `read`, unlike `restore`, makes no variable (see `__init__`).
        self._checkpoint.read(prefix).expect_partial()

    def restore_agreed(self, steps, attempt, *, with_positions=True):
        """Restores, on every worker, the newest step all of them can.

        Rounds of agreement: each worker proposes its newest step of
        `steps` (and, but on the chief, of its own positions) not above
        the round's bound; the lowest proposal is the next bound, until
        all propose the same. Each worker then `attempt`s it; if any
        fails, all go on below it. Every worker takes the same decisions,
        so they run the same collectives.

        Args:
            steps: The steps of the chief's checkpoints this worker sees.
            attempt: A function of a step restoring it on this worker,
                returning whether it succeeded.
            with_positions: Whether only steps with this worker's own
                position count. Defaults to `True`.

        Returns:
            The step restored, or `None` when no step is common to all,
            or none could be restored on every worker.
        """
        own = set(steps)
        mine = self.saved_steps()
        if mine is not None and with_positions:
            own &= mine
        bound = None
        # Ends: each round that does not return lowers the bound, the same
        # on every worker, down to -1, where all propose -1.
        while True:
            proposal = max(
                (s for s in own if bound is None or s <= bound), default=-1
            )
            proposals = self._gather(proposal)
            if min(proposals) != max(proposals):
                bound = min(proposals)
                continue
            if proposal < 0:
                return None
            succeeded = self._gather(1 if attempt(proposal) else 0)
            if min(succeeded) == 1:
                return proposal
            own.discard(proposal)
            bound = proposal - 1


def _all_gather(strategy):
    """A function of an int: every replica's value of it (an all-gather
    under `strategy`)."""

    @tf.function(autograph=False)
    def gather(value):
        per_replica = strategy.run(lambda: tf.identity(value))
        return strategy.gather(per_replica, axis=0)

    def values(value):
        gathered = gather(tf.constant([value], tf.int64))
        return [int(v) for v in gathered.numpy()]

    return values
