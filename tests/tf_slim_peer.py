"""Runs TF-Slim 1.1.0 itself, in graph mode, in a separate process.

tf_slim 1.1.0 needs `tensorflow.python.framework.ops.Tensor` and
`.IndexedSlices`, which TF 2.21 no longer has: the child process restores
them from `tf.Tensor` / `tf.IndexedSlices` before importing tf_slim. Its
`batch_norm` (a TF1 Keras layer) also needs tf_keras's legacy layers where
TensorFlow looks for them (`tf_keras.legacy_tf_layers`), and its data
providers' image decoder `control_flow_ops.case` / `.cond`, which TF 2.21
keeps under `tf.compat.v1`.

`run` sends the code to one child per test process, started on the first
call and kept (importing TensorFlow and tf_slim costs a few seconds of
CPU, once instead of once per reference): each code runs in its own
namespace and its own default graph, so the references stay independent
of each other, and prints one JSON document, which `run` returns.
`run(..., alone=True)` starts a child for the one code (bench/, whose
timings want a fresh process); `source` gives that child's whole
program, for a caller that reads its output as it comes (bench/).
"""

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import textwrap

_PRELUDE = """
import json, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import sys
import tensorflow as tf
import tf_keras.src.legacy_tf_layers as legacy
import tf_keras.src.legacy_tf_layers.normalization
from tensorflow.python.framework import ops
sys.modules["tf_keras.legacy_tf_layers"] = legacy
sys.modules["tf_keras.legacy_tf_layers.normalization"] = legacy.normalization
ops.Tensor = tf.Tensor
ops.IndexedSlices = tf.IndexedSlices
tf1 = tf.compat.v1
from tensorflow.python.ops import control_flow_ops
control_flow_ops.case = tf1.case
control_flow_ops.cond = tf1.cond
tf1.disable_v2_behavior()
import tf_slim as slim
"""

# The kept child: reads one JSON string of code a line, runs it in a copy
# of the prelude's names and a fresh default graph, answers one JSON line
# on the descriptor stdout had (stdout itself goes to stderr, so that
# nothing else writes between the answers).
_SERVE = """
import contextlib, io, traceback
_answers = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
_names = dict(globals())
for _line in sys.stdin:
    _out = io.StringIO()
    try:
        with tf.Graph().as_default(), contextlib.redirect_stdout(_out):
            exec(compile(json.loads(_line), "<tf_slim_peer>", "exec"),
                 dict(_names))
        _answer = {"out": _out.getvalue()}
    except BaseException:
        _answer = {"error": traceback.format_exc()[-3000:]}
    _answers.write(json.dumps(_answer) + "\\n")
    _answers.flush()
"""


def source(code):
    """The child's program: the TF-Slim prelude, then `code`."""
    return _PRELUDE + textwrap.dedent(code)


def _env():
    return dict(os.environ, CUDA_VISIBLE_DEVICES="")


def _last_json(output):
    return json.loads(output.strip().splitlines()[-1])


def _alone(code, timeout):
    result = subprocess.run(
        [sys.executable, "-c", source(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_env(),
    )
    if result.returncode != 0:
        raise RuntimeError(f"TF-Slim peer failed:\n{result.stderr[-3000:]}")
    return _last_json(result.stdout)


class _Kept:
    """The kept child, its stderr in a temporary file (a pipe nobody
    reads would fill and stop it)."""

    def __init__(self):
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, "-c", _PRELUDE + _SERVE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=_env(),
        )

    def ask(self, code, timeout):
        self.process.stdin.write((json.dumps(code) + "\n").encode())
        self.process.stdin.flush()
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        line = self.process.stdout.readline() if ready else b""
        if not line:
            said = self.stderr_tail()
            self.close()
            raise RuntimeError(
                f"TF-Slim peer gave no answer in {timeout} s:\n{said}"
            )
        return json.loads(line)

    def stderr_tail(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-3000:]

    def close(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.stderr.close()


_kept = None


def _child():
    global _kept
    if _kept is None or _kept.process.poll() is not None:
        _kept = _Kept()
        atexit.register(_kept.close)
    return _kept


def run(code, timeout=120, *, alone=False):
    """Runs `code` after the TF-Slim prelude; returns what it printed as JSON.

    Args:
        code: Python source that ends by printing `json.dumps(...)`.
        timeout: Seconds before the child is killed.
        alone: Whether to start a child for this code only, rather than
            run it in the child kept for the test process.

    Returns:
        The decoded JSON document of the last line printed.

    Raises:
        RuntimeError: The code failed (its traceback), or gave no answer
            in `timeout` seconds (the kept child is then killed; the next
            call starts another).
    """
    if alone:
        return _alone(code, timeout)
    answer = _child().ask(textwrap.dedent(code), timeout)
    if "error" in answer:
        raise RuntimeError(f"TF-Slim peer failed:\n{answer['error']}")
    return _last_json(answer["out"])
