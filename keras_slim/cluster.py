"""Real multi-process clusters on loopback, for tests, docs and demos."""

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from keras_slim import _backend
from keras_slim import _server_processes
from keras_slim.errors import PREEMPTED_EXIT_CODE

__all__ = ["LocalCluster"]

# How long the other workers have to stop after one exits preempted.
_PREEMPTION_GRACE_SECS = 120


def free_ports(count):
    """`count` distinct free TCP ports on 127.0.0.1."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def _wait_for_port(port, process, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(
                f"The server for port {port} exited with code "
                f"{process.returncode} before listening."
            )
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(
        f"No server listening on 127.0.0.1:{port} after {timeout} s."
    )


class LocalCluster:
    """A cluster of local processes: `workers` workers, `ps` parameter servers.

    Args:
        workers: Positive integer: worker tasks.
            Defaults to `2`.
        ps: Non-negative integer: parameter-server tasks. Above 0, the
            cluster also has a `chief` task, the coordinator, which is the
            calling process (or the command `run` starts).
            Defaults to `0`.
        env: Extra environment variables for every process started.
            Defaults to `None`.
        one_process: With `ps > 0`: start every worker and ps server in one
            process (one `tf.distribute.Server` per task, each on its own
            port), which costs one process start instead of one per task.
            A task then cannot be stopped alone (`kill`, `pause` and
            `resume` raise `ValueError`) unless it is in `alone`. Keep the
            default, one process per task, to stop any task.
            Defaults to `False`.
        alone: With `one_process=True`: the tasks, as `(job, index)`
            pairs, that still get a process each, to be killed, paused or
            resumed; the others share one.
            Defaults to `()`.

    Attributes:
        spec: The cluster spec, a dict {job: ["127.0.0.1:port", ...]}.

    Example:
    ```python
    with LocalCluster(workers=2, ps=2) as cluster:
        config = keras_slim.DeploymentConfig(
            num_ps_tasks=2, cluster_resolver=cluster.resolver()
        )
    ```

    Raises:
        ValueError: for a bad `workers`, `ps`, `one_process` or `alone`.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.
    """

    def __init__(
        self, workers=2, ps=0, *, env=None, one_process=False, alone=()
    ):
        _backend.require_tensorflow(
            "keras_slim.cluster.LocalCluster",
            "keras.distribution (one process)",
            why="tf.distribute servers",
        )
        if (
            isinstance(workers, bool)
            or not isinstance(workers, int)
            or workers < 1
        ):
            raise ValueError(
                f"Invalid value for argument `workers`. Received: "
                f"workers={workers!r}. Expected a positive integer."
            )
        if isinstance(ps, bool) or not isinstance(ps, int) or ps < 0:
            raise ValueError(
                f"Invalid value for argument `ps`. Received: ps={ps!r}. "
                "Expected a non-negative integer."
            )
        if not isinstance(one_process, bool):
            raise ValueError(
                "Invalid value for argument `one_process`. Received: "
                f"one_process={one_process!r}. Expected True or False."
            )
        if one_process and not ps:
            raise ValueError(
                "Invalid value for argument `one_process`. Received: "
                "one_process=True with ps=0. Without parameter servers each "
                "worker runs the training program, in its own process: "
                "pass ps > 0 or one_process=False."
            )
        self.workers = workers
        self.ps = ps
        self.env = dict(env or {})
        self.one_process = one_process
        ports = free_ports(workers + ps + (1 if ps else 0))
        address = [f"127.0.0.1:{p}" for p in ports]
        self.spec = {"worker": address[:workers]}
        if ps:
            self.spec["ps"] = address[workers : workers + ps]
            self.spec["chief"] = address[workers + ps :]
        self.alone = self._alone(alone)
        self._servers = {}
        self._processes = []

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc_info):
        self.close()

    def _alone(self, alone):
        """`alone` checked: a set of server tasks `(job, index)`."""
        servers = [
            (job, index)
            for job in ("ps", "worker")
            for index in range(len(self.spec.get(job, ())))
        ]
        try:
            tasks = {(job, index) for job, index in alone}
        except (TypeError, ValueError):
            tasks = None
        if tasks is None or not tasks <= set(servers):
            raise ValueError(
                f"Invalid value for argument `alone`. Received: "
                f"alone={alone!r}. Expected (job, index) pairs of this "
                f"cluster's servers: {servers}."
            )
        if tasks and not self.one_process:
            raise ValueError(
                f"Invalid value for argument `alone`. Received: "
                f"alone={alone!r} with one_process=False, where every task "
                "has its own process already."
            )
        return tasks

    def tf_config(self, task_type, index=0):
        """The `TF_CONFIG` value of one task, as a JSON string."""
        return json.dumps(
            {"cluster": self.spec, "task": {"type": task_type, "index": index}}
        )

    def resolver(self, task_type=None, index=0):
        """A `SimpleClusterResolver` for the coordinator (or another task)."""
        import tensorflow as tf

        task_type = task_type or ("chief" if self.ps else "worker")
        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.spec),
            task_type=task_type,
            task_id=index,
            rpc_layer="grpc",
        )

    def _environment(self, extra=None):
        env = dict(os.environ)
        env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        env.update(self.env)
        env.update(extra or {})
        return env

    def start(self):
        """Starts the worker and ps servers (with `ps > 0`); waits for them."""
        if not self.ps:
            return
        # A coordinator must see a lost worker as unavailable at once, so
        # that its steps go to the others (TF's parameter-server tutorial).
        os.environ.setdefault("GRPC_FAIL_FAST", "use_caller")
        tasks = [
            (job, index)
            for job in ("ps", "worker")
            for index in range(len(self.spec[job]))
        ]
        try:
            shared = [t for t in tasks if t not in self.alone]
            if self.one_process and shared:
                process = self._start_servers(shared)
                self._servers = dict.fromkeys(shared, process)
            for task in tasks:
                if task not in self._servers:
                    self._servers[task] = self._start_servers([task])
            for (job, index), process in self._servers.items():
                port = int(self.spec[job][index].rsplit(":", 1)[1])
                _wait_for_port(port, process, timeout=60)
        except BaseException:
            self.close()
            raise

    def _start_servers(self, tasks):
        """One process serving `tasks`, a list of `(job, index)`
        (`_server_processes.start`)."""
        env = self._environment({"CUDA_VISIBLE_DEVICES": ""})
        process = _server_processes.start(tasks, self.spec, env)
        self._processes.append(process)
        return process

    def _own_process(self, job, index, action):
        """The process of one task, which serves that task alone."""
        if self.one_process and (job, index) not in self.alone:
            raise ValueError(
                f"Cannot {action} task {job} {index} alone: this cluster "
                "serves it in one process with others (one_process=True). "
                f"Name it in `alone` (alone=[({job!r}, {index})]) or make "
                "the cluster with one_process=False to stop it."
            )
        return self._servers[(job, index)]

    def kill(self, job, index):
        """Kills one server task with SIGKILL (a machine lost).

        Raises:
            ValueError: for a task that shares its process
                (`one_process=True`, the task not in `alone`).
        """
        process = self._own_process(job, index, "kill")
        process.kill()
        process.wait()

    def pause(self, job, index):
        """Stops one server task with SIGSTOP: a straggler, until `resume`.

        Its connections stay open, so the coordinator waits for it (no
        error, no rescheduling): what backup workers
        (`DeploymentConfig(replicas_to_aggregate=...)`) are for.

        Raises:
            ValueError: for a task that shares its process
                (`one_process=True`, the task not in `alone`).
        """
        self._own_process(job, index, "pause").send_signal(signal.SIGSTOP)

    def resume(self, job, index):
        """Lets a task stopped by `pause` go on (SIGCONT).

        Raises:
            ValueError: for a task that shares its process
                (`one_process=True`, the task not in `alone`).
        """
        self._own_process(job, index, "resume").send_signal(signal.SIGCONT)

    def run(self, command, timeout=None, capture=True):
        """Runs the training program: once as the coordinator (`ps > 0`), or
        once per worker with its `TF_CONFIG`.

        Args:
            command: The argv list.
            timeout: Seconds before every task is killed (`None`: no limit).
            capture: Capture output (returned), else print it as it comes,
                each line of a worker prefixed by `[worker i]`.

        Returns:
            A list of `subprocess.CompletedProcess`, one per process run.
            When one worker fails, the others are stopped (a synchronous
            cluster would wait for it forever); when one exits preempted
            (`keras_slim.errors.PREEMPTED_EXIT_CODE`), the others have two
            minutes to save and exit too.
        """
        tasks = (
            [("chief", 0)]
            if self.ps
            else [("worker", i) for i in range(self.workers)]
        )
        processes = []
        for job, index in tasks:
            env = self._environment({"TF_CONFIG": self.tf_config(job, index)})
            if self.ps:
                env.setdefault("GRPC_FAIL_FAST", "use_caller")
            prefixed = not capture and len(tasks) > 1
            process = subprocess.Popen(
                command,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if capture or prefixed else None,
                stderr=(
                    subprocess.PIPE
                    if capture
                    else subprocess.STDOUT
                    if prefixed
                    else None
                ),
                text=True,
                start_new_session=True,
            )
            process.prefix = f"[{job} {index}] " if prefixed else None
            processes.append(process)
            self._processes.append(process)
        return _wait_all(command, processes, timeout)

    def close(self):
        """Kills every process this cluster started and waits for them."""
        for process in self._processes:
            if process.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
        for process in self._processes:
            with contextlib.suppress(Exception):
                process.wait(timeout=30)
        self._processes = []
        self._servers = {}


def _wait_all(command, processes, timeout):
    outputs = [None] * len(processes)

    def collect(i, process):
        if process.prefix is None:
            outputs[i] = process.communicate()
            return
        for line in process.stdout:
            sys.stdout.write(process.prefix + line)
            sys.stdout.flush()
        process.wait()

    threads = [
        threading.Thread(target=collect, args=(i, p), daemon=True)
        for i, p in enumerate(processes)
    ]
    for thread in threads:
        thread.start()
    deadline = None if timeout is None else time.monotonic() + timeout
    preempted = None
    while True:
        codes = [p.poll() for p in processes]  # every one, each round
        if all(code is not None for code in codes):
            break
        # Preempted workers all stop at the same step, after a save: the
        # others get a bounded time to do so too.
        if preempted is None and PREEMPTED_EXIT_CODE in codes:
            preempted = time.monotonic() + _PREEMPTION_GRACE_SECS
        failed = any(
            code not in (None, 0, PREEMPTED_EXIT_CODE) for code in codes
        ) or (preempted is not None and time.monotonic() > preempted)
        late = deadline is not None and time.monotonic() > deadline
        if failed or late:
            for p in processes:
                if p.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(p.pid, signal.SIGKILL)
        time.sleep(0.05)
    for thread in threads:
        thread.join()
    return [
        subprocess.CompletedProcess(
            command, p.returncode, *(outputs[i] or (None, None))
        )
        for i, p in enumerate(processes)
    ]


def command_parser(prog="keras-slim-cluster"):
    """The arguments of `keras-slim-cluster` (argparse's).

    Args:
        prog: The program's name in the help and errors.

    Returns:
        An `argparse.ArgumentParser`.

    Example:
    ```python
    args = command_parser().parse_args(["--ps", "1", "--", "python", "t.py"])
    args.workers, args.ps  # (2, 1)
    ```
    """
    parser = argparse.ArgumentParser(
        prog=prog,
        description=(
            "Run a training command on a local cluster of real gRPC "
            "servers on 127.0.0.1."
        ),
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="The number of worker tasks. (default: %(default)s)",
    )
    parser.add_argument(
        "--ps",
        type=int,
        default=0,
        help="The number of parameter-server tasks; above 0 the command "
        "runs once, as the coordinator (task chief 0). (default: "
        "%(default)s)",
    )
    parser.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        help="The training command, after --: run once per worker with "
        "its TF_CONFIG, or once as the coordinator with --ps.",
    )
    return parser


def main(argv=None, *, prog="python -m keras_slim.cluster"):
    """`keras-slim-cluster --workers N [--ps M] -- command ...`.

    The same as `python -m keras_slim.cluster ...`.

    Args:
        argv: The arguments, `None` for `sys.argv[1:]`.
        prog: The program's name in the help and errors.

    Returns:
        The exit code: the first failed task's, else 0.

    Raises:
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.
    """
    _backend.require_tensorflow(
        "keras-slim-cluster (keras_slim.cluster.main)",
        "keras.distribution (one process)",
        why="tf.distribute servers",
    )
    parser = command_parser(prog)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given: ... -- python train.py [flags]")
    try:
        cluster = LocalCluster(args.workers, args.ps)
    except ValueError as error:
        parser.error(str(error))
    with cluster:
        results = cluster.run(command, capture=False)
    # A task that failed by itself, before the ones stopped because of it.
    codes = [r.returncode for r in results]
    failed = [c for c in codes if c > 0] or [128 - c for c in codes if c < 0]
    return failed[0] if failed else 0


def console():
    """The console script `keras-slim-cluster`."""
    sys.exit(main(prog="keras-slim-cluster"))


if __name__ == "__main__":
    sys.exit(main())
