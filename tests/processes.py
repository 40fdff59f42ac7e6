"""Subprocesses that a test signals at a chosen point, always bounded.

The kill -9 chains (tests/test_resume.py, the parameter-server position
test, the command's resume chains) run a program, read what it prints and
signal it once a line says it reached a step. `watched` is that loop, once:
a watchdog kills the program (and anything it started) after `timeout`
seconds, every wait is bounded, and its output is kept to show on failure.
"""

import contextlib
import dataclasses
import os
import re
import signal
import subprocess
import tempfile
import threading

__all__ = ["Watched", "reaching", "steps", "watched"]


@dataclasses.dataclass
class Watched:
    """What `watched` saw of one run.

    Attributes:
        returncode: The exit status (negative: the signal that ended it).
        lines: The lines it printed on stdout (and stderr, if merged).
        errors: What it wrote on stderr, if not merged.
        signalled: Whether the signals were sent.
        timed_out: Whether the watchdog killed it.
    """

    returncode: int
    lines: list
    errors: str
    signalled: bool
    timed_out: bool

    @property
    def killed(self):
        """Ended by a SIGKILL, not the watchdog's."""
        return self.returncode == -signal.SIGKILL and not self.timed_out

    def steps(self, prefix="step "):
        """The steps of the lines `<prefix><step>...` printed, in order."""
        return steps(self.lines, prefix)

    def output(self, last=40):
        """The last `last` lines printed and the end of stderr, for a
        failure message."""
        return "\n".join([*self.lines[-last:], self.errors[-4000:]])

    def check(self, *codes):
        """Asserts that the run ended with one of `codes` (default 0), in
        time, showing its output if not.

        Returns:
            This `Watched`.
        """
        codes = codes or (0,)
        assert not self.timed_out, f"timed out:\n{self.output()}"
        assert self.returncode in codes, (
            f"exit code {self.returncode}, expected one of {codes}:\n"
            f"{self.output()}"
        )
        return self


def watched(
    command,
    *,
    env=None,
    timeout=120,
    signal_when=None,
    signals=(signal.SIGKILL,),
    merge_stderr=False,
):
    """Runs `command`, reading its lines; signals it once a line says so.

    Args:
        command: The argv list.
        env: The environment (`None`: this process's).
        timeout: Seconds before the watchdog kills the program and its
            process group; `wait` is bounded by the same.
        signal_when: A function of a line (stripped) that returns True
            when `signals` are to be sent, once; `None`: never.
        signals: The signal numbers sent, in order.
        merge_stderr: Read stderr's lines with stdout's (for programs that
            log there); else stderr goes to a file, read at the end.

    Returns:
        A `Watched`.

    Example:
    ```python
    run = watched(argv, signal_when=lambda line: line == "step 5")
    assert run.killed, run.output()
    ```
    """
    with tempfile.TemporaryFile("w+") as errors:
        stderr = subprocess.STDOUT if merge_stderr else errors
        result = _watch(command, env, stderr, timeout, signal_when, signals)
        errors.seek(0)
        result.errors = errors.read()
    return result


def _watch(command, env, stderr, timeout, signal_when, signals):
    process = subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
        start_new_session=True,
    )
    expired = threading.Event()

    def kill_all():
        expired.set()
        _kill_group(process)

    watchdog = threading.Timer(timeout, kill_all)
    watchdog.daemon = True
    watchdog.start()
    lines, sent = [], False
    try:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            if signal_when is None or sent or not signal_when(lines[-1]):
                continue
            for number in signals:
                process.send_signal(number)
            sent = True
        code = process.wait(timeout=timeout)
    finally:
        watchdog.cancel()
        if process.poll() is None:
            _kill_group(process)
            process.wait(timeout=30)
        process.stdout.close()
    return Watched(code, lines, "", sent, expired.is_set())


def _kill_group(process):
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def _step(line, prefix):
    match = re.match(re.escape(prefix) + r"(\d+)\b", line)
    return None if match is None else int(match.group(1))


def steps(lines, prefix="step "):
    """The steps of the `lines` that start `<prefix><step>`, in order."""
    found = (_step(line, prefix) for line in lines)
    return [step for step in found if step is not None]


def reaching(step, prefix="step "):
    """A `signal_when` for `watched`: true on the first line that reports
    a step of at least `step` (`None`: never, the run is left to finish).
    """
    if step is None:
        return None
    return lambda line: (_step(line, prefix) or -1) >= step
