"""tests/processes.py: the kill chains' runner signals on cue and never
waits unbounded. Plain Python programs, no TensorFlow: milliseconds each."""

import signal
import sys

import pytest

from tests.processes import reaching
from tests.processes import steps
from tests.processes import watched

# Prints steps 0, 1, 2, ... and a line on stderr, then hangs at step 5.
COUNT = (
    "import sys, time\n"
    "print('starting', file=sys.stderr, flush=True)\n"
    "for i in range(6):\n"
    "    print('step', i, flush=True)\n"
    "    time.sleep(0.05)\n"
    "time.sleep(600)\n"
)


def test_signals_once_the_step_is_reached():
    result = watched(
        [sys.executable, "-c", COUNT], signal_when=reaching(2), timeout=60
    )
    assert result.killed and result.signalled and not result.timed_out
    assert result.steps()[:3] == [0, 1, 2]
    assert result.errors == "starting\n"  # stderr apart, unless merged
    with pytest.raises(AssertionError, match="exit code -9"):
        result.check(0)


def test_a_hang_is_killed_by_the_watchdog_and_shows_the_output():
    result = watched([sys.executable, "-c", COUNT], timeout=1)
    assert result.timed_out and not result.killed
    assert result.returncode == -signal.SIGKILL
    with pytest.raises(AssertionError, match=r"timed out:\n(.|\n)*step 5"):
        result.check(0)


def test_merged_stderr_and_other_prefixes():
    program = "import sys; print('global step 7: loss', file=sys.stderr)"
    result = watched([sys.executable, "-c", program], merge_stderr=True)
    assert result.check(0).steps("global step ") == [7]
    assert steps(["step 3", "stepper 4", "step x", "step 10 of"]) == [3, 10]
    assert reaching(None) is None
