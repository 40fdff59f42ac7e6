"""The processes that serve a `LocalCluster`'s tasks."""

import gc
import json
import os
import signal
import subprocess
import sys
import threading
import time

__all__ = ["can_fork_servers", "start"]


def start(tasks, spec, env):
    """Starts one process serving `tasks`: forked from this one where that
    is safe (`can_fork_servers`), else a new interpreter.

    Args:
        tasks: A list of `(job, index)`, the tasks it serves.
        spec: The cluster's spec, a dict of job names to address lists.
        env: The process's environment.

    Returns:
        The process: a `_ForkedServer` or a `subprocess.Popen`, in a new
        session, its standard streams on `/dev/null`.
    """
    args = [json.dumps(tasks), json.dumps(spec), str(os.getpid())]
    if can_fork_servers():
        return _ForkedServer(args, env)
    return subprocess.Popen(
        [sys.executable, "-c", _SERVE, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def can_fork_servers():
    """Whether this process can fork its servers instead of starting an
    interpreter for them: it has imported TensorFlow (else a fork saves
    nothing) and not started TensorFlow's runtime (no op run, no device
    listed: a fork of a started runtime copies its thread pools' locks
    but not their threads), and runs no other thread. A fork then starts
    in about 0.05 s of CPU instead of 2.6 (an interpreter's import of
    TensorFlow).

    The runtime's state is TensorFlow's private
    (`_keras.tensorflow_runtime_started`); tests/test_cluster.py checks
    both ways it starts.

    Returns:
        `True` where forking is safe and saves the import.
    """
    if "tensorflow" not in sys.modules or threading.active_count() > 1:
        return False
    from keras_slim import _keras

    return not _keras.tensorflow_runtime_started()


class _ForkedServer:
    """A server process forked from this one, running `_SERVE` with
    `args` in `env`: in a new session, with its standard streams on
    `/dev/null` and the default signal handlers, as `subprocess.Popen`
    starts the interpreter otherwise. It has the `Popen` methods
    `LocalCluster` uses.

    Args:
        args: `_SERVE`'s arguments: the tasks, the spec, the parent's pid.
        env: The server's environment.
    """

    def __init__(self, args, env):
        self.returncode = None
        self.pid = os.fork()
        if self.pid == 0:  # the server
            code = 1
            try:
                # The parent's Python objects stay as they are: no
                # collection closes a descriptor a server then reuses.
                gc.disable()
                for number in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(number, signal.SIG_DFL)
                os.setsid()
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.environ.clear()
                os.environ.update(env)
                sys.argv = ["-c", *args]
                exec(compile(_SERVE, "<keras_slim server>", "exec"), {})
                code = 0
            finally:
                os._exit(code)

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone
                pid, status = self.pid, 0
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(["server"], timeout)
            time.sleep(0.01)
        return self.returncode

    def send_signal(self, sig):
        if self.poll() is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)


# The servers' program: one `tf.distribute.Server` per task given (a
# JSON list of [job, index]), each on its own port, serving until the
# process that started it is gone. It runs without keras_slim and without
# Keras (which TensorFlow imports eagerly, and Keras scikit-learn): a
# server needs neither, and starts in about half the time (2.6 s of CPU
# instead of 4.5).
_SERVE = """
import json, os, sys, time
sys.modules["keras"] = None
import tensorflow as tf
tasks, spec, parent = sys.argv[1:]
tasks = json.loads(tasks)
config = tf.compat.v1.ConfigProto()
if len(tasks) > 1:
    # Servers in one process hang with fewer inter-op threads than tasks
    # (TensorFlow's in-process test clusters give workers + 1).
    config.inter_op_parallelism_threads = max(len(tasks) + 1, os.cpu_count())
servers = [
    tf.distribute.Server(
        tf.train.ClusterSpec(json.loads(spec)),
        job_name=job,
        task_index=index,
        protocol="grpc",
        config=config,
        start=True,
    )
    for job, index in tasks
]
while os.getppid() == int(parent):
    time.sleep(0.5)
os._exit(0)
"""
