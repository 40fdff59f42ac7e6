"""One trigger for `every_n_steps` / `every_n_secs` / `at_steps`."""

import time

from keras_slim import checks


def _check_steps(at_steps):
    if not isinstance(at_steps, (list, tuple, set, frozenset)) or any(
        not checks.is_int(s) or s < 0 for s in at_steps
    ):
        raise checks.invalid(
            "at_steps", at_steps, "a list of non-negative integers"
        )
    return frozenset(int(s) for s in at_steps)


class IntervalTrigger:
    """Fires when `every_n_steps` steps or `every_n_secs` seconds passed,
    or at one of `at_steps`.

    Args:
        every_n_steps: Positive integer or `None`. Fires at the first step
            at or past each multiple of `every_n_steps`. Defaults to
            `None`.
        every_n_secs: Positive number or `None`. Fires when that many
            seconds passed since the trigger last fired (or was reset).
            Defaults to `None`.
        at_steps: Non-negative integers: fires at the first step at or
            past each of them. Defaults to `()`.
        clock: A function returning seconds. Defaults to `time.monotonic`.

    Raises:
        ValueError: if `every_n_steps` or `every_n_secs` is not positive,
            or `at_steps` holds anything but non-negative integers.

    Example:
    ```python
    trigger = IntervalTrigger(every_n_steps=100)
    trigger.reset(step=0)
    trigger(step=100)  # True
    ```
    """

    def __init__(
        self, every_n_steps=None, every_n_secs=None, *, at_steps=(), clock=None
    ):
        self.every_n_steps = checks.positive_int_or_none(
            "every_n_steps", every_n_steps
        )
        self.every_n_secs = checks.positive_number_or_none(
            "every_n_secs", every_n_secs
        )
        self.at_steps = _check_steps(at_steps)
        self._clock = clock or time.monotonic
        self._last_step = None
        self._last_time = None

    @property
    def enabled(self):
        """Whether the trigger can fire at all."""
        return (
            self.every_n_steps is not None
            or self.every_n_secs is not None
            or bool(self.at_steps)
        )

    def first_due(self, first, last):
        """The first step in `[first, last]` that is one of `at_steps` or a
        multiple of `every_n_steps`, or `None`; stateless.

        Args:
            first: The first global step of the range.
            last: The last global step of the range.

        Returns:
            An int or `None`.

        Example:
        ```python
        IntervalTrigger(every_n_steps=10).first_due(3, 12)  # 10
        ```
        """
        due = [s for s in self.at_steps if first <= s <= last]
        n = self.every_n_steps
        if n is not None:
            step = -(-first // n) * n
            if step <= last:
                due.append(step)
        return min(due) if due else None

    def reset(self, step, t=None):
        """Starts counting both intervals from `step` and now (or `t`)."""
        self._last_step = int(step)
        self._last_time = self._clock() if t is None else t

    def would_fire(self, step, t=None):
        """Whether `__call__(step, t)` would fire, without firing.

        Args:
            step: The global step.
            t: The time, in the clock's seconds; now when `None`.

        Returns:
            A boolean.
        """
        if self._last_step is None:
            raise RuntimeError("IntervalTrigger used before `reset()`.")
        n = self.every_n_steps
        if n is not None and step // n > self._last_step // n:
            return True
        if self.at_steps and any(
            self._last_step < s <= step for s in self.at_steps
        ):
            return True
        if self.every_n_secs is not None:
            t = self._clock() if t is None else t
            return t - self._last_time >= self.every_n_secs
        return False

    def __call__(self, step, t=None):
        """Returns whether the interval elapsed at `step`, and if so restarts.

        Args:
            step: The global step.
            t: The time, in the clock's seconds; now when `None`.

        Returns:
            A boolean: `True` when the trigger fired.
        """
        t = self._clock() if (t is None and self.every_n_secs) else t
        if not self.would_fire(step, t):
            return False
        self.reset(step, t)
        return True
