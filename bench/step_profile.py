"""Where one train step's time goes: SlimModel.fit against TF-Slim.

Traces steps of both systems with the TensorFlow profiler (the same
`tf.profiler.experimental` trace in both: TF-Slim in graph mode in its own
process, `SlimModel.fit` here) and sums the kernels' time by op type, per
step, from the `.xplane.pb` files (read with TensorFlow's own `XSpace`
protobuf). Also counts the ops of each system's step graph. The model,
batch and policy are bench/vs_tf_slim.py's.

Kernel times overlap (two cores, inter-op parallelism) and include the
profiler's own cost, so their sum is not the step time; the per-type
differences are what shows where one system spends more than the other.

Run: `python bench/step_profile.py [--model CNN] [--steps 200]`.
"""

import argparse
import collections
import glob
import json
import os
import sys
import tempfile

import _common
import keras
import tensorflow as tf
import vs_tf_slim
from tensorflow.tsl.profiler.protobuf import xplane_pb2

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests import tf_slim_peer  # noqa: E402

WARMUP = 60

TF_SLIM = """
import collections
name, steps, warmup, logdir = {name!r}, {steps}, {warmup}, {logdir!r}
with tf.Graph().as_default() as graph:
    train_op = build_train_op(name, 64)
    ops = collections.Counter(op.type for op in graph.get_operations())
    with tf1.Session() as session:
        session.run(tf1.global_variables_initializer())
        for _ in range(warmup):
            session.run(train_op)
        tf.profiler.experimental.start(logdir)
        for _ in range(steps):
            session.run(train_op)
        tf.profiler.experimental.stop()
print(json.dumps({{"ops": ops}}))
"""


def _is_op(op_type):
    """A TensorFlow op type, or oneDNN's rewrite of one (`_Mkl...`)."""
    return hasattr(tf.raw_ops, op_type) or op_type.startswith("_Mkl")


def kernel_times(logdir, steps):
    """Op type -> (us per step, kernels per step), from a profile."""
    path = sorted(glob.glob(f"{logdir}/**/*.xplane.pb", recursive=True))[-1]
    space = xplane_pb2.XSpace()
    with open(path, "rb") as f:
        space.ParseFromString(f.read())
    totals = collections.defaultdict(float)
    counts = collections.Counter()
    for plane in space.planes:
        if "host" not in plane.name.lower():
            continue
        for line in plane.lines:
            for event in line.events:
                name = plane.event_metadata[event.metadata_id].name
                # TF op events are named "op_name:OpType".
                op_name, _, op_type = name.rpartition(":")
                if not op_name or not _is_op(op_type):
                    continue
                totals[op_type] += event.duration_ps / 1e6 / steps
                counts[op_type] += 1
    return {t: (us, counts[t] / steps) for t, us in totals.items()}


def slim_model_profile(name, steps, logdir):
    """Profiles `steps` steps of SlimModel.fit; returns its op counts."""
    model = vs_tf_slim.model(name, True)
    data = _common.dataset(_common.MODELS[name][0])
    model.fit(data, steps_per_epoch=WARMUP, verbose=0)
    tf.profiler.experimental.start(logdir)
    model.fit(data, steps_per_epoch=steps, verbose=0)
    tf.profiler.experimental.stop()
    ops = collections.Counter()
    for compiled in model.train_function._compiled.values():
        for concrete in compiled.on_blocks._list_all_concrete_functions():
            graph_def = concrete.graph.as_graph_def()
            # The call's own ops, the loop's and the step's functions.
            for node in graph_def.node:
                ops[node.op] += 1
            for function in graph_def.library.function:
                for node in function.node_def:
                    ops[node.op] += 1
    return ops


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="CNN", help="MLP or CNN")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args(argv)
    name = next(n for n in _common.MODELS if n.startswith(args.model))
    with tempfile.TemporaryDirectory() as tmp:
        slim_dir = os.path.join(tmp, "tf_slim")
        code = TF_SLIM.format(
            name=name, steps=args.steps, warmup=WARMUP, logdir=slim_dir
        )
        slim_ops = tf_slim_peer.run(
            vs_tf_slim.TF_SLIM_TRAIN_OP + code, timeout=600, alone=True
        )["ops"]
        slim_times = kernel_times(slim_dir, args.steps)
        ours_dir = os.path.join(tmp, "keras_slim")
        our_ops = slim_model_profile(name, args.steps, ours_dir)
        our_times = kernel_times(ours_dir, args.steps)
    print(
        f"{name}: keras {keras.__version__}, tensorflow {tf.__version__}; "
        f"{args.steps} steps traced after {WARMUP}"
    )
    print()
    print("| op type | TF-Slim us/step | SlimModel.fit us/step | difference |")
    print("|---|---|---|---|")
    types = sorted(
        set(slim_times) | set(our_times),
        key=lambda t: (
            -max(slim_times.get(t, (0, 0))[0], our_times.get(t, (0, 0))[0])
        ),
    )
    for op_type in types[: args.top]:
        a = slim_times.get(op_type, (0.0, 0))[0]
        b = our_times.get(op_type, (0.0, 0))[0]
        print(f"| {op_type} | {a:.1f} | {b:.1f} | {b - a:+.1f} |")
    a = sum(us for us, _ in slim_times.values())
    b = sum(us for us, _ in our_times.values())
    print(f"| all kernels | {a:.1f} | {b:.1f} | {b - a:+.1f} |")
    print()
    print(
        f"Ops: TF-Slim's graph {sum(slim_ops.values())} (initializers "
        f"included); SlimModel.fit's calls {sum(our_ops.values())} "
        "(each traced call: its loop, and one step in the loop's body)"
    )
    print(json.dumps({"tf_slim": slim_ops, "keras_slim": our_ops}))


if __name__ == "__main__":
    main()
