"""tests/zygote.py: a forked program is a process as `python` makes it."""

import os
import signal
import subprocess
import sys

import pytest

from tests import zygote

pytestmark = pytest.mark.prestarted

SHOW = """
import json, os, sys
print(json.dumps({
    "argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("ZYG"),
    "ppid": os.getppid(), "pgid": os.getpgid(0), "pid": os.getpid(),
    "path0": sys.path[0], "main": __name__,
    "forked": "tensorflow" in sys.modules,
}))
print("to stderr", file=sys.stderr)
sys.exit(int(sys.stdin.read() or 0))
"""


def run(args, **kwargs):
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    kwargs.setdefault("timeout", 60)
    return subprocess.run([sys.executable, *args], **kwargs)


def shown(result):
    import json

    return json.loads(result.stdout.splitlines()[0])


def test_a_program_gets_its_argv_env_cwd_streams_and_status(tmp_path):
    result = run(
        ["-c", SHOW, "a", "b"],
        input="3",
        cwd=tmp_path,
        env={**os.environ, "ZYG": "yes"},
    )
    seen = shown(result)
    assert result.returncode == 3
    assert result.stderr == "to stderr\n"
    assert seen["forked"]  # from the zygote: TensorFlow already imported
    assert seen["argv"] == ["-c", "a", "b"]
    assert seen["cwd"] == str(tmp_path) and seen["env"] == "yes"
    assert seen["ppid"] == os.getpid()  # adopted: this process waits for it
    assert seen["main"] == "__main__"


def test_a_script_runs_as_main_with_its_directory_first(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(SHOW)
    seen = shown(run([str(script), "x"], input=""))
    assert seen["argv"] == [str(script), "x"]
    assert seen["path0"] == str(tmp_path)


def test_errors_signals_and_sessions(tmp_path):
    failed = run(["-c", "raise ValueError('boom')"])
    assert failed.returncode == 1 and "ValueError: boom" in failed.stderr
    interrupted = run(["-c", "raise KeyboardInterrupt"])
    assert interrupted.returncode == -signal.SIGINT
    sleeper = subprocess.Popen(
        [
            sys.executable,
            "-u",
            "-c",
            "import time; print('up'); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert sleeper.stdout.readline() == "up\n"  # unbuffered, line by line
    assert os.getpgid(sleeper.pid) == sleeper.pid  # its own session
    os.killpg(sleeper.pid, signal.SIGKILL)
    assert sleeper.wait(timeout=30) == -signal.SIGKILL
    sleeper.stdout.close()


def test_what_changes_imports_starts_a_new_interpreter(tmp_path):
    blocked = run(["-c", "import sys; sys.meta_path; " + SHOW], input="")
    assert not shown(blocked)["forked"]
    other = run(
        ["-c", SHOW],
        input="",
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "1"},
    )
    assert shown(other)["forked"]  # a zygote of its own environment
    keys = {
        key[zygote.IMPORT_ENV.index("TF_CPP_MIN_LOG_LEVEL")]
        for key in zygote._ZYGOTES
    }
    assert "1" in keys


def test_outside_a_marked_module_a_new_interpreter_starts():
    assert zygote._ENABLED[0]  # this module is marked
    zygote._ENABLED[0] = False
    try:
        assert not shown(run(["-c", SHOW], input=""))["forked"]
    finally:
        zygote._ENABLED[0] = True
