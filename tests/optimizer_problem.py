"""A fixed least-squares problem, trained by a Keras optimizer here and by
TF1's `tf.compat.v1.train` optimizers in graph mode in one child process.

The problem has a kernel (3, 2), a bias (2,) and a scalar scale:
`loss = mean(((x @ kernel + bias) * scale - y) ** 2)`; its `dense`
variant drops the scale (a Keras `Dense` layer under the MSE loss), its
`sparse` variant is an embedding table (6, 2) read through `tf.gather`
with a repeated index, whose gradient is a `tf.IndexedSlices` in both
worlds. A case names the
TF1 class, its keyword arguments (the same names in
`keras_slim.optimizers`) and the learning rate: a constant, or TF1's
`exponential_decay` (staircase) / `polynomial_decay` (power 1, no cycle).
"""

import numpy as np
import tensorflow as tf

from tests import tf_slim_peer

STEPS = 100

_rng = np.random.default_rng(7)
X = _rng.normal(size=(8, 3)).astype("float32")
Y = _rng.normal(size=(8, 2)).astype("float32")
INITIAL = {
    "kernel": _rng.normal(size=(3, 2)).astype("float32"),
    "bias": np.array([0.5, -0.25], "float32"),
    "scale": np.array(1.5, "float32"),
}
TABLE = _rng.normal(size=(6, 2)).astype("float32")
IDS = np.array([0, 2, 2, 5], "int32")  # 2 twice; rows 1 and 3 untouched
TARGET = _rng.normal(size=(4, 2)).astype("float32")

#: TF1's class of each keras_slim.optimizers class.
TF1_CLASSES = {
    "GradientDescent": "GradientDescentOptimizer",
    "Momentum": "MomentumOptimizer",
    "RMSProp": "RMSPropOptimizer",
    "Adam": "AdamOptimizer",
    "Adagrad": "AdagradOptimizer",
    "Adadelta": "AdadeltaOptimizer",
    "Ftrl": "FtrlOptimizer",
}


def case(name, kwargs, rate, sparse=False, dense=False, steps=STEPS):
    """A case: keras_slim's class `name` and TF1's with `kwargs`.

    Args:
        name: A `keras_slim.optimizers` class name.
        kwargs: Keyword arguments, TF1's names (the rate excluded).
        rate: `("constant", lr)`, `("exponential", lr, decay_steps,
            factor)` or `("polynomial", lr, decay_steps, end)`.
        sparse: Whether the case trains the embedding table.
        dense: Whether the case trains the kernel and bias only.
        steps: The steps TF1 runs.
    """
    return {
        "tf1": TF1_CLASSES[name],
        "kwargs": kwargs,
        "rate": list(rate),
        "sparse": sparse,
        "dense": dense,
        "steps": steps,
    }


def keras_variables(sparse):
    import keras

    if sparse:
        return [keras.Variable(TABLE, name="table")]
    return [keras.Variable(v, name=k) for k, v in INITIAL.items()]


def loss_fn(variables, sparse):
    """The problem's loss, the same ops as the TF1 child's."""
    if sparse:
        (table,) = variables
        rows = tf.gather(table.value, IDS)
        return tf.reduce_mean(tf.square(rows - TARGET))
    kernel, bias, scale = variables
    pred = (tf.matmul(X, kernel.value) + bias.value) * scale.value
    return tf.reduce_mean(tf.square(pred - Y))


def train(optimizer, variables, sparse, steps):
    """Runs `steps` steps of `optimizer` on the problem, in a tf.function."""

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = loss_fn(variables, sparse)
        grads = tape.gradient(loss, [v.value for v in variables])
        optimizer.apply(grads, variables)

    for _ in range(steps):
        step()
    return [np.asarray(v.numpy()) for v in variables]


_CHILD = """
cases = json.loads({cases!r})
X = np.array({x!r}, "float32")
Y = np.array({y!r}, "float32")
INITIAL = {initial!r}
TABLE = np.array({table!r}, "float32")
IDS = np.array({ids!r}, "int32")
TARGET = np.array({target!r}, "float32")


def rate(spec, step):
    kind = spec[0]
    if kind == "constant":
        return spec[1]
    if kind == "exponential":
        return tf1.train.exponential_decay(
            spec[1], step, spec[2], spec[3], staircase=True)
    return tf1.train.polynomial_decay(
        spec[1], step, spec[2], spec[3], power=1.0, cycle=False)


def make_optimizer(spec, step):
    cls = getattr(tf1.train, spec["tf1"])
    return cls(rate(spec["rate"], step), **spec["kwargs"])


{prelude}


def run(spec):
    with tf.Graph().as_default():
        step = tf1.train.get_or_create_global_step()
        if spec["sparse"]:
            table = tf1.get_variable(
                "table", initializer=TABLE, use_resource=True)
            variables = [table]
            loss = tf.reduce_mean(
                tf.square(tf.gather(table, IDS) - TARGET))
        else:
            names = ["kernel", "bias"] if spec["dense"] else list(INITIAL)
            variables = [
                tf1.get_variable(k, initializer=np.array(INITIAL[k], "float32"),
                                 use_resource=True)
                for k in names]
            pred = tf.matmul(X, variables[0]) + variables[1]
            if not spec["dense"]:
                pred = pred * variables[2]
            loss = tf.reduce_mean(tf.square(pred - Y))
        optimizer = make_optimizer(spec, step)
        train_op = optimizer.minimize(loss, step, var_list=variables)
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            for _ in range(spec["steps"]):
                sess.run(train_op)
            return [sess.run(v).tolist() for v in variables]


results = {{key: run(spec) for key, spec in cases.items()}}
{extra}
print(json.dumps(results))
"""


def tf1_results(cases, prelude="", extra=""):
    """Runs every case with TF1's optimizers in one graph-mode child.

    Args:
        cases: `{key: case(...)}`, or specs that `prelude`'s
            `make_optimizer` reads.
        prelude: TF1 code run before the cases; it may redefine
            `make_optimizer(spec, global_step)`, which returns the TF1
            optimizer of a case.
        extra: More TF1 code for the child, run after the cases at top
            level; it may add JSON values to the dict `results`.

    Returns:
        `{key: [final value of each variable]}`, plus `extra`'s keys.
    """
    import json

    code = _CHILD.format(
        cases=json.dumps(cases),
        x=X.tolist(),
        y=Y.tolist(),
        initial={k: v.tolist() for k, v in INITIAL.items()},
        table=TABLE.tolist(),
        ids=IDS.tolist(),
        target=TARGET.tolist(),
        prelude=prelude,
        extra=extra,
    )
    return tf_slim_peer.run(code, timeout=600)


def relative_difference(actual, expected):
    """The largest `|actual - expected|` over the largest `|expected|`,
    across the variables."""
    worst = 0.0
    for a, e in zip(actual, expected):
        a, e = np.asarray(a, "float64"), np.asarray(e, "float64")
        worst = max(worst, float(np.max(np.abs(a - e)) / np.max(np.abs(e))))
    return worst
