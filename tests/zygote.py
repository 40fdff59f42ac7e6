"""Processes started from an interpreter that has already imported
TensorFlow, for the suite's subprocesses whose start is not the point.

Half of the suite's CPU went to its subprocesses, and most of that to
each one importing Python, TensorFlow, Keras and keras_slim (about 3.5 s
of CPU each, some 150 processes). A test module marked
`pytestmark = pytest.mark.prestarted` gets its subprocesses (`python
script.py ...`, `python -m module ...`, `python -c code ...`, whether the
test starts them or keras_slim does, as `LocalCluster` starts its
servers) from a *zygote*: one process per test worker that imports those
once, then forks on request. Each program is a real process: its own pid,
the file descriptors, working directory, environment and session asked
for, signals and exit status as usual; its parent is the test worker,
which adopts it (the zygote double-forks; the worker is the children's
subreaper, `PR_SET_CHILD_SUBREAPER`), so `subprocess.Popen` waits for it
as for any child. The program starts only once adopted, and runs as
`python` would run it (`sys.argv`, `__main__`, `sys.path[0]`, `atexit`,
the exit status of an uncaught exception).

What differs from a new interpreter is what importing did: TensorFlow
read its environment (`TF_CPP_MIN_LOG_LEVEL`, ...) when the zygote
started, so a program is forked only when its import-time environment is
the zygote's (one zygote per such environment), and its modules are
already imported (a program that blocks an import, or tests what
importing prints, starts as usual: only marked modules use this, and
`python` options other than `-u` go to a new interpreter). TensorFlow's
runtime is not started in the zygote (no op ran, no device listed), so a
program still configures its devices.
"""

import array
import atexit
import contextlib
import ctypes
import inspect
import json
import os
import socket
import subprocess
import sys
import threading

#: The environment a program's imports read: a program is forked from a
#: zygote started with the same values.
IMPORT_ENV = (
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "PYTHONWARNINGS",
    "KERAS_BACKEND",
    "TF_USE_LEGACY_KERAS",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
)

_PR_SET_CHILD_SUBREAPER = 36

#: Code that changes how TensorFlow or Keras import (TF1's graph mode,
#: blocked imports): a new interpreter runs it.
_UNFORKABLE = ("disable_v2_behavior", "meta_path")

_ZYGOTE = r"""
import array, gc, json, os, socket, sys, time
gc.disable()
import numpy
import tensorflow
import keras
import keras_slim
import keras_slim.cluster
import keras_slim.image.train_image_classifier
import keras_slim.image.eval_image_classifier
gc.freeze()
gc.enable()
channel = socket.socket(fileno=int(sys.argv[1]))
channel.sendall(b"ready")


def run(request, fds):
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in {*fds, channel.fileno()}:
        if fd > 2:
            os.close(fd)
    if request["cwd"]:
        os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if request["new_session"]:
        os.setsid()
    # Started once the test worker adopted it, as its child.
    deadline = time.monotonic() + 30
    while os.getppid() != request["parent"]:
        if time.monotonic() > deadline:
            os._exit(70)
        time.sleep(0.001)
    import io, runpy, signal, atexit, threading, traceback
    for number in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1):
        signal.signal(number, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    unbuffered = request["unbuffered"] or os.environ.get("PYTHONUNBUFFERED")
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    for name, fd in (("stdout", 1), ("stderr", 2)):
        raw = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(
            raw if unbuffered else io.BufferedWriter(raw),
            line_buffering=name == "stderr" or raw.isatty(),
            write_through=bool(unbuffered),
            errors="backslashreplace" if name == "stderr" else "strict",
        )
        setattr(sys, name, stream)
        setattr(sys, "__" + name + "__", stream)
    numpy.random.seed()
    kind, target, args = request["kind"], request["target"], request["args"]
    sys.orig_argv = request["orig_argv"]
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # the zygote's own `-c`
    code = 0
    try:
        if kind == "-c":
            sys.argv = ["-c", *args]
            sys.path[0:0] = [""]
            module = type(sys)("__main__")
            sys.modules["__main__"] = module
            exec(compile(target, "<string>", "exec"), module.__dict__)
        elif kind == "-m":
            sys.argv = [target, *args]
            sys.path[0:0] = [os.getcwd()]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path[0:0] = [os.path.dirname(os.path.abspath(target))]
            runpy.run_path(target, run_name="__main__")
    except SystemExit as stop:
        if stop.code is None:
            code = 0
        elif isinstance(stop.code, int):
            code = stop.code
        else:
            print(stop.code, file=sys.stderr)
            code = 1
    except KeyboardInterrupt:
        traceback.print_exc()
        code = -signal.SIGINT  # as Python ends: killed by SIGINT
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        threading._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        if code < 0:
            signal.signal(-code, signal.SIG_DFL)
            os.kill(os.getpid(), -code)
        os._exit(code)


while True:
    fds = array.array("i")
    space = socket.CMSG_SPACE(8 * fds.itemsize)
    message, ancillary, _, _ = channel.recvmsg(1 << 20, space)
    if not message:
        os._exit(0)
    for level, kind, data in ancillary:
        fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    request = json.loads(message)
    reply_r, reply_w = os.pipe()
    middle = os.fork()
    if middle == 0:
        os.close(reply_r)
        child = os.fork()
        if child == 0:
            os.close(reply_w)
            run(request, list(fds))
        os.write(reply_w, str(child).encode())
        os._exit(0)
    os.close(reply_w)
    pid = int(os.read(reply_r, 64) or b"0")
    os.close(reply_r)
    os.waitpid(middle, 0)
    for fd in fds:
        os.close(fd)
    channel.sendall(json.dumps({"pid": pid}).encode())
"""


class _Zygote:
    """One zygote process, started with the test worker's environment."""

    def __init__(self, env):
        # Packets keep each request and answer whole.
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._channel = parent
        self._lock = threading.Lock()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _ZYGOTE, str(child.fileno())],
            env=env,
            pass_fds=[child.fileno()],
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        child.close()
        self._channel.settimeout(120)  # no wait without a bound
        if self._channel.recv(64) != b"ready":
            raise RuntimeError("the zygote did not start")

    def fork(self, request, fds):
        """Forks a process for `request`; returns its pid (adopted by this
        process)."""
        with self._lock:
            self._channel.sendmsg(
                [json.dumps(request).encode()],
                [
                    (
                        socket.SOL_SOCKET,
                        socket.SCM_RIGHTS,
                        array.array("i", fds).tobytes(),
                    )
                ],
            )
            answer = json.loads(self._channel.recv(4096))
        return answer["pid"]

    def close(self):
        with contextlib.suppress(OSError):
            self._channel.close()
        with contextlib.suppress(Exception):
            self.process.wait(timeout=10)
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)


_ZYGOTES = {}
_ENABLED = [False]
_ORIGINAL = subprocess.Popen._execute_child
#: Its parameters after `self`, in order (`args` ... `process_group` on
#: Python 3.11), read from this Python's `subprocess`.
_PARAMETERS = tuple(inspect.signature(_ORIGINAL).parameters)[1:]


def _program(args):
    """`(kind, target, args, unbuffered)` of a `python` command line the
    zygote runs, or `None`."""
    if not isinstance(args, (list, tuple)) or not args:
        return None
    args = [os.fspath(a) for a in args]
    if os.path.realpath(args[0]) != os.path.realpath(sys.executable):
        return None
    rest, unbuffered = args[1:], False
    while rest and rest[0] == "-u":
        rest, unbuffered = rest[1:], True
    if not rest:
        return None
    if rest[0] in ("-c", "-m"):
        if len(rest) < 2:
            return None
        if rest[0] == "-c" and any(m in rest[1] for m in _UNFORKABLE):
            return None
        return rest[0], rest[1], rest[2:], unbuffered
    if rest[0].startswith("-"):
        return None  # another option: a new interpreter
    return "script", rest[0], rest[1:], unbuffered


def _zygote(env):
    """The zygote whose imports read `env`'s `IMPORT_ENV`, started once."""
    key = tuple(env.get(name) for name in IMPORT_ENV)
    if key not in _ZYGOTES:
        start = dict(os.environ)
        for name, value in zip(IMPORT_ENV, key):
            if value is None:
                start.pop(name, None)
            else:
                start[name] = value
        _ZYGOTES[key] = _Zygote(start)
    return _ZYGOTES[key]


def _execute_child(self, *params):
    """`Popen._execute_child`, its parameters by the names this Python's
    `subprocess` gives them: forks from a zygote where it can, else
    starts the program as `subprocess` would."""
    p = dict(zip(_PARAMETERS, params))
    program = _program(p["args"]) if _ENABLED[0] else None
    if (
        program is None
        or p["pass_fds"]
        or p["shell"]
        or p["executable"] is not None
        or p["preexec_fn"] is not None
        or any(p[k] not in (None, -1, False) for k in ("gid", "gids", "uid"))
        or p["umask"] != -1
    ):
        return _ORIGINAL(self, *params)
    kind, target, rest, unbuffered = program
    args, cwd, env = p["args"], p["cwd"], p["env"]
    p2cread, p2cwrite = p["p2cread"], p["p2cwrite"]
    c2pread, c2pwrite = p["c2pread"], p["c2pwrite"]
    errread, errwrite = p["errread"], p["errwrite"]
    start_new_session = p["start_new_session"]
    env = dict(os.environ if env is None else env)
    env = {os.fsdecode(k): os.fsdecode(v) for k, v in env.items()}
    # The child's standard streams: what Popen made, or this process's.
    stdio = [
        fd if fd != -1 else i
        for i, fd in enumerate((p2cread, c2pwrite, errwrite))
    ]
    request = {
        "kind": kind,
        "target": target,
        "args": rest,
        "unbuffered": unbuffered,
        "orig_argv": [os.fspath(a) for a in args],
        "env": env,
        "cwd": os.fspath(cwd) if cwd is not None else None,
        "new_session": bool(start_new_session or p.get("process_group") == 0),
        "parent": os.getpid(),
    }
    self.pid = _zygote(env).fork(request, stdio)
    self._child_created = True
    # What `_execute_child` closes in the parent once the child started.
    self._close_pipe_fds(
        p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite
    )


@contextlib.contextmanager
def prestarted():
    """Within the block, `python` subprocesses fork from a zygote."""
    _ENABLED[0] = True
    try:
        yield
    finally:
        _ENABLED[0] = False


def install():
    """Makes this process the subreaper of its descendants and routes
    `subprocess.Popen` through the zygote where `prestarted` is on."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        return False
    subprocess.Popen._execute_child = _execute_child
    atexit.register(close)
    return True


def close():
    """Stops the zygotes."""
    for zygote in _ZYGOTES.values():
        zygote.close()
    _ZYGOTES.clear()
