"""keras_slim.cluster: local clusters of real processes, always cleaned up."""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import pytest

from keras_slim import cluster
from keras_slim import testing
from keras_slim.cluster import LocalCluster
from tests.helpers import run_module

pytestmark = pytest.mark.prestarted  # tests/zygote.py

PRINT_TASK = (
    "import json, os; t = json.loads(os.environ['TF_CONFIG']); "
    "print('task', t['task']['type'], t['task']['index'], "
    "len(t['cluster']['worker']))"
)


def launch(*args, timeout=120):
    return run_module("keras_slim.cluster", *args, timeout=timeout)


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def wait_dead(pids, timeout=10):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


# The launcher's `main` runs in this process where its output and code are
# the point (a launcher process costs a TensorFlow start: keras_slim's
# import); its exit, as a process, is the failing worker's test below.


def test_launcher_runs_the_command_once_per_worker(capfd):
    code = cluster.main(
        ["--workers", "2", "--", sys.executable, "-c", PRINT_TASK]
    )
    out, err = capfd.readouterr()
    assert code == 0, err
    # Each worker's lines, prefixed, whole.
    assert sorted(out.splitlines()) == [
        "[worker 0] task worker 0 2",
        "[worker 1] task worker 1 2",
    ]


def test_launcher_with_ps_runs_the_coordinator_once(capfd):
    code = (
        "import json, os; t = json.loads(os.environ['TF_CONFIG']); "
        "print(t['task'], sorted(t['cluster']), len(t['cluster']['ps']))"
    )
    exit_code = cluster.main(
        ["--workers", "2", "--ps", "2", "--", sys.executable, "-c", code]
    )
    out, err = capfd.readouterr()
    assert exit_code == 0, err
    assert out.strip() == (
        "{'type': 'chief', 'index': 0} ['chief', 'ps', 'worker'] 2"
    )


def test_launcher_returns_a_failing_worker_code_and_stops_the_others():
    code = (
        "import json, os, time; t = json.loads(os.environ['TF_CONFIG']); "
        "i = t['task']['index']; time.sleep(0 if i else 60); "
        "raise SystemExit(3)"
    )
    start = time.monotonic()
    result = launch("--workers", "2", "--", sys.executable, "-c", code)
    assert result.returncode == 3
    assert time.monotonic() - start < 30


@pytest.mark.parametrize(
    "args, message",
    [
        (["--workers", "0", "--", "true"], "Received: workers=0"),
        (["--ps", "-1", "--", "true"], "Received: ps=-1"),
        (["--workers", "2"], "no command given"),
    ],
)
def test_launcher_bad_flags(args, message, capsys):
    # In-process: argparse's exit 2 is SystemExit(2) from main().
    with pytest.raises(SystemExit) as exit_info:
        cluster.main(list(args))
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_the_console_script_is_the_launcher(capsys):
    """`keras-slim-cluster`, as pip installed it, is `main` under its
    own name (the help and the docs name it)."""
    from importlib import metadata

    (script,) = metadata.entry_points(
        group="console_scripts", name="keras-slim-cluster"
    )
    assert script.load() is cluster.console
    with pytest.raises(SystemExit) as exit_info:
        cluster.main(["--help"], prog="keras-slim-cluster")
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: keras-slim-cluster")
    with pytest.raises(SystemExit) as exit_info:
        cluster.main(["--workers", "2"], prog="keras-slim-cluster")
    assert exit_info.value.code == 2
    assert "keras-slim-cluster: error: no command given" in (
        capsys.readouterr().err
    )


CALLER = textwrap.dedent(
    """
    import json, sys, time
    from keras_slim import testing
    with testing.local_cluster(workers=1, ps=1) as cluster:
        pids = [p.pid for p in cluster._processes]
        print(json.dumps(pids), flush=True)
        sys.stdin.readline()  # the test has seen them alive
        if sys.argv[1] == "raise":
            raise RuntimeError("the caller fails")
        time.sleep(120)
    """
)


@pytest.mark.parametrize("how", ["raise", "kill -9"])
def test_servers_are_cleaned_up_when_the_caller_fails(how):
    caller = subprocess.Popen(
        [sys.executable, "-c", CALLER, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    pids = json.loads(caller.stdout.readline())
    assert len(pids) == 2
    assert all(alive(p) for p in pids)
    if how == "kill -9":
        caller.send_signal(signal.SIGKILL)
    else:
        caller.stdin.write("go\n")
        caller.stdin.flush()
    caller.wait(timeout=60)
    assert caller.returncode != 0
    # On kill -9 nobody can clean up: each server watches its parent.
    assert wait_dead(pids) == []


FORKS = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    from keras_slim import _server_processes
    from keras_slim import cluster
    if sys.argv[1] == "devices listed":
        tf.config.list_physical_devices("CPU")
    elif sys.argv[1] == "an op ran":
        tf.constant(1.0) + 1.0
    kinds = []
    if _server_processes.can_fork_servers():
        with cluster.LocalCluster(workers=1, ps=1) as local:
            # start() returned: every server is listening.
            kinds = [type(p).__name__ for p in local._processes]
    print(json.dumps({"kinds": kinds}))
    """
)


@pytest.mark.parametrize(
    "before, forked",
    [("nothing", True), ("devices listed", False), ("an op ran", False)],
)
def test_servers_are_forked_before_tensorflow_starts(before, forked):
    """Where TensorFlow is imported and its runtime not started, the
    servers are forks of the caller (no interpreter's start); once a
    device was listed or an op ran, new interpreters (the runtime's
    threads do not survive a fork). The clusters the other tests start
    from programs (the coordinators of tests/scripts) are forks."""
    result = subprocess.run(
        [sys.executable, "-c", FORKS, before],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    assert out["kinds"] == (["_ForkedServer"] * 2 if forked else [])


def listening(address):
    host, port = address.rsplit(":", 1)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        return s.connect_ex((host, int(port))) == 0


def test_local_cluster_spec_and_resolver_with_servers_in_one_process():
    with testing.local_cluster(workers=2, ps=1, one_process=True) as cluster:
        assert sorted(cluster.spec) == ["chief", "ps", "worker"]
        addresses = [a for job in cluster.spec.values() for a in job]
        assert len(set(addresses)) == 4
        assert all(a.startswith("127.0.0.1:") for a in addresses)
        resolver = cluster.resolver()
        assert resolver.task_type == "chief"
        assert resolver.cluster_spec().as_dict() == cluster.spec
        config = json.loads(cluster.tf_config("worker", 1))
        assert config["task"] == {"type": "worker", "index": 1}
        # Three servers, each on its own port, in one process.
        pids = [p.pid for p in cluster._processes]
        assert len(pids) == 1 and alive(pids[0])
        servers = cluster.spec["ps"] + cluster.spec["worker"]
        assert all(listening(a) for a in servers), servers
        # No task of that process can be stopped alone.
        for stop in (cluster.kill, cluster.pause, cluster.resume):
            with pytest.raises(ValueError, match="task worker 1 alone"):
                stop("worker", 1)
        assert alive(pids[0])
    assert wait_dead(pids, timeout=1) == []


def test_bad_sizes():
    with pytest.raises(ValueError, match="Received: workers=0"):
        LocalCluster(workers=0)
    with pytest.raises(ValueError, match="Received: ps=True"):
        LocalCluster(ps=True)
    with pytest.raises(ValueError, match="Received: one_process='yes'"):
        LocalCluster(ps=1, one_process="yes")
    with pytest.raises(ValueError, match="one_process=True with ps=0"):
        LocalCluster(workers=2, one_process=True)
    for alone in ([("ps", 1)], ("ps", 0), [("chief", 0)], [("ps", "0")]):
        with pytest.raises(
            ValueError, match=r"Received: alone=(.|\n)*\('ps', 0\)"
        ):
            LocalCluster(ps=1, one_process=True, alone=alone)
    with pytest.raises(ValueError, match="with one_process=False"):
        LocalCluster(ps=1, alone=[("ps", 0)])
