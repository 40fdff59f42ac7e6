"""WorkerPositions: which step every worker restores (two workers as two
threads, an all-gather as a barrier; the real one runs in
tests/_fit/test_multi_worker_resume.py)."""

import threading

import pytest

from keras_slim.callbacks._worker_positions import WorkerPositions


class Gather:
    """An all-gather of ints over `count` threads, one per worker."""

    def __init__(self, count):
        self._barrier = threading.Barrier(count, timeout=10)
        self._values = [None] * count
        self.rounds = 0

    def worker(self, index):
        def gather(value):
            self._values[index] = value
            self._barrier.wait()
            values = list(self._values)
            if index == 0:
                self.rounds += 1
            self._barrier.wait()
            return values

        return gather


def agree(steps, own, failing=((), ())):
    """Runs `restore_agreed` on a chief seeing the chief's `steps` and a
    worker whose positions are `own`; `failing[i]` are the steps worker `i`
    cannot restore. Returns each worker's `(result, attempted)`."""
    gather = Gather(2)
    results = [None, None]

    def run(index):
        positions = WorkerPositions(
            "/unused",
            None,
            chief=index == 0,
            data=None,
            gather=gather.worker(index),
        )
        positions.saved_steps = lambda: None if index == 0 else set(own)
        tried = []

        def attempt(step):
            tried.append(step)
            return step not in failing[index]

        results[index] = (positions.restore_agreed(steps, attempt), tried)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=20)
    return results


@pytest.mark.parametrize(
    "steps, own, expected",
    [
        ([5, 10, 15], [5, 10, 15], 15),
        # Killed after the chief's save of 15, before the worker's.
        ([5, 10, 15], [5, 10], 10),
        # Killed after the worker's save of 15, before the chief's.
        ([5, 10], [5, 10, 15], 10),
        ([5, 10, 15], [], None),
        ([], [5], None),
    ],
    ids=["same", "chief-ahead", "worker-ahead", "no-position", "no-checkpoint"],
)
def test_every_worker_restores_the_newest_step_all_hold(steps, own, expected):
    results = agree(steps, own)
    assert [r for r, _ in results] == [expected, expected]
    assert [t for _, t in results] == [[expected] * (expected is not None)] * 2


def test_a_step_one_worker_cannot_restore_makes_all_go_below_it():
    results = agree([5, 10, 15], [5, 10, 15], failing=((), (15,)))
    assert results == [(10, [15, 10]), (10, [15, 10])]
