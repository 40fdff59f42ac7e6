"""The commands' exit: output out, no teardown after a success."""

import subprocess
import sys
import textwrap

import pytest

from keras_slim.image import _console

CHILD = textwrap.dedent(
    """
    import logging, sys, threading, time
    from keras_slim.image import _console

    _console.configure(0)
    logging.getLogger("keras_slim").info("a logged line")
    print("a printed line")  # block-buffered: stdout is a pipe
    sys.stderr.write("an error line")
    # Teardown that would hang: a non-daemon thread that never ends.
    threading.Thread(target=time.sleep, args=(3600,)).start()
    _console.exit_now({code})
    """
)


def test_exit_now_flushes_and_skips_the_teardown_after_a_success():
    result = subprocess.run(
        [sys.executable, "-c", CHILD.format(code=0)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0
    assert result.stdout.splitlines() == ["a logged line", "a printed line"]
    assert result.stderr.endswith("an error line")


def test_an_error_exits_as_sys_exit_with_the_teardown():
    with pytest.raises(SystemExit) as raised:
        _console.exit_now(3)
    assert raised.value.code == 3
