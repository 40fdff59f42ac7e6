"""Runs TF-Slim 1.1.0 itself, in graph mode, in a separate process.

tf_slim 1.1.0 needs `tensorflow.python.framework.ops.Tensor` and
`.IndexedSlices`, which TF 2.21 no longer has: the child process restores
them from `tf.Tensor` / `tf.IndexedSlices` before importing tf_slim. Its
`batch_norm` (a TF1 Keras layer) also needs tf_keras's legacy layers where
TensorFlow looks for them (`tf_keras.legacy_tf_layers`), and its data
providers' image decoder `control_flow_ops.case` / `.cond`, which TF 2.21
keeps under `tf.compat.v1`. The child prints one JSON document, which
`run` returns; `source` gives the child's whole program, for a caller
that reads its output as it comes (bench/).
"""

import json
import os
import subprocess
import sys
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


def source(code):
    """The child's program: the TF-Slim prelude, then `code`."""
    return _PRELUDE + textwrap.dedent(code)


def run(code, timeout=120):
    """Runs `code` after the TF-Slim prelude; returns what it printed as JSON.

    Args:
        code: Python source that ends by printing `json.dumps(...)`.
        timeout: Seconds before the child is killed.

    Returns:
        The decoded JSON document of the last line printed.
    """
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    result = subprocess.run(
        [sys.executable, "-c", source(code)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    if result.returncode != 0:
        raise RuntimeError(f"TF-Slim peer failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])
