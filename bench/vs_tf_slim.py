"""Steps per second: Keras 3 fit, a raw tf.function loop, SlimModel.fit
and keras_slim.train, against TF-Slim 1.x itself in graph mode.

The table of issue 8, measured side by side: the MLP 32-64-64-10 and the
CNN 28x28x1 conv32-pool-conv64-dense10 of bench/_common.py, one in-memory
batch of 64 repeated, SGD with momentum. Each run times 300 steps after 30
warm-up steps. Variants:

- keras fit: `keras.Model.fit`, defaults (`steps_per_execution=1`);
- raw loop: a `tf.function` train step called from Python, no `fit`;
- SlimModel.fit: a full gradient policy (multipliers, freeze, clip_norm,
  the NaN check) and the training services at their default intervals
  (`LogEveryNSteps`, `NanLossGuard`, `Checkpoints`, `Summaries`, `Trace`,
  `StopAtStep`), no tuning;
- keras_slim.train: the same model, `keras_slim.train` with its defaults
  (TF-Slim's: a log line every step, summaries and checkpoints every
  600 s);
- TF-Slim: tf_slim 1.1.0 in graph mode, `create_train_op` with the same
  policy, `session.run(train_op)` in a loop, in its own process (tf_slim
  needs `ops.Tensor` / `ops.IndexedSlices` restored on TF 2.21; that shim
  lives in tests/tf_slim_peer.py and is used only here and in the tests);
- slim.learning.train: the same train op run by TF-Slim's own
  `slim.learning.train` with its defaults, INFO lines written: the peer of
  `keras_slim.train` doing the same work.

Log lines are formatted and written (to /dev/null here, to a pipe for
TF-Slim), as with a user's INFO handler. Steps are timed from the end of
the 30th to the end of the 330th; what runs when training ends (the final
checkpoint of both `train`s) is not a step and is left out.

Rounds alternate the in-process variants and the TF-Slim processes; the
table gives medians over rounds and the ratios of keras_slim's medians to
TF-Slim's. Target (issue 8): SlimModel.fit and keras_slim.train >= 1.0x
TF-Slim graph mode on both models.

`--feed dataset` feeds TF-Slim as Keras is fed: the batch repeated by
`tf.data`, read through an iterator in its graph (`get_next` per
`session.run`), instead of constant tensors.

Run: `python bench/vs_tf_slim.py [--rounds 5] [--feed dataset]
[--models CNN]`.
"""

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time

import _common
import keras
import tensorflow as tf

import keras_slim
from keras_slim import callbacks
from keras_slim.callbacks import StepCallback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests import tf_slim_peer  # noqa: E402

WARMUP, TIMED, BATCH = 30, 300, 64
POLICY = dict(
    multipliers={"logits/.*": 2.0, r".*/bias": 0.5},
    freeze=["layer1/bias"],
    clip_norm=1.0,
)


class Timer(StepCallback):
    """Times the steps after the warm-up ones.

    A keras_slim step callback, whose only exact step is the end of the
    warm-up, so it leaves `SlimModel`'s choice of steps per call free.
    Listed after the services, so what they do once at the first steps
    (a `Summaries` with a time interval creates its writer and writes the
    first step, as TF-Slim's summary thread did) is warm-up.
    """

    def step_multiples(self, model):
        return [WARMUP]

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if batch + 1 >= WARMUP and not hasattr(self, "start"):
            self.start = time.perf_counter()
            self.start_batch = batch
        # The end of the last batch: what ends training (the final
        # checkpoint of `train`) is not a step.
        self.end = time.perf_counter()


def model(name, slim_policy):
    input_shape, layers, _ = _common.MODELS[name]
    keras.utils.set_random_seed(0)
    inputs = keras.Input(input_shape)
    if slim_policy:
        m = keras_slim.SlimModel(
            inputs,
            layers(inputs),
            gradient_policy=keras_slim.GradientPolicy(**POLICY),
        )
    else:
        m = keras.Model(inputs, layers(inputs))
    m.compile(
        optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
    )
    return m


def time_fit(m, data, extra=()):
    timer = Timer()
    m.fit(
        data,
        epochs=1,
        steps_per_epoch=WARMUP + TIMED,
        verbose=0,
        callbacks=[*extra, timer],
    )
    return TIMED / (timer.end - timer.start)


def keras_fit(name, data, logdir):
    return time_fit(model(name, False), data)


def raw_loop(name, data, logdir):
    m = model(name, False)
    loss_fn = m.loss
    optimizer = m.optimizer

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, m(x, training=True))
        grads = tape.gradient(loss, m.trainable_variables)
        optimizer.apply_gradients(zip(grads, m.trainable_variables))
        return loss

    x, y = next(iter(data))
    for _ in range(WARMUP):
        step(x, y)
    start = time.perf_counter()
    for _ in range(TIMED):
        loss = step(x, y)
    float(loss)
    return TIMED / (time.perf_counter() - start)


def services(logdir):
    """keras_slim's training services at their default intervals."""
    return [
        callbacks.StopAtStep(num_steps=WARMUP + TIMED),
        callbacks.LogEveryNSteps(),
        callbacks.NanLossGuard(),
        callbacks.Checkpoints(logdir),
        callbacks.Summaries(logdir),
        callbacks.Trace(logdir),
    ]


def slim_model_fit(name, data, logdir):
    return time_fit(model(name, True), data, services(logdir))


def slim_train(name, data, logdir):
    timer = Timer()
    keras_slim.train(
        model(name, True),
        data,
        logdir=logdir,
        number_of_steps=WARMUP + TIMED,
        callbacks=[timer],
    )
    return TIMED / (timer.end - timer.start)


# The peer's model, batch and policy, in the child's default graph (no
# format fields: bench/step_profile.py builds the same train op).
TF_SLIM_TRAIN_OP = """
def build_train_op(name, batch, feed="constant"):
    rng = np.random.default_rng(0)
    shape = (28, 28, 1) if name.startswith("CNN") else (32,)
    x = rng.normal(size=(batch,) + shape).astype("float32")
    y = rng.integers(0, 10, size=batch).astype("int32")
    if feed == "dataset":
        # The batch repeated by tf.data, read in the graph, as Keras is fed.
        data = tf.data.Dataset.from_tensors((x, y)).repeat()
        images, labels = tf1.data.make_one_shot_iterator(data).get_next()
    else:
        images, labels = tf.constant(x), tf.constant(y)
    if name.startswith("CNN"):
        net = slim.conv2d(images, 32, 3, padding="VALID", scope="layer1")
        net = slim.max_pool2d(net, 2)
        net = slim.conv2d(net, 64, 3, padding="VALID", scope="layer2")
        net = slim.flatten(net)
    else:
        net = slim.fully_connected(images, 64, scope="layer1")
        net = slim.fully_connected(net, 64, scope="layer2")
    logits = slim.fully_connected(net, 10, activation_fn=None, scope="logits")
    tf1.losses.sparse_softmax_cross_entropy(labels, logits)
    total = slim.losses.get_total_loss()
    variables = slim.get_trainable_variables()
    multipliers = {}
    for v in variables:
        m = 2.0 if v.op.name.startswith("logits/") else 1.0
        m *= 0.5 if v.op.name.endswith("/biases") else 1.0
        if m != 1.0:
            multipliers[v] = m
    return slim.learning.create_train_op(
        total,
        tf1.train.MomentumOptimizer(0.01, 0.9),
        variables_to_train=[v for v in variables
                            if v.op.name != "layer1/biases"],
        gradient_multipliers=multipliers,
        clip_gradient_norm=1.0,
        check_numerics=True,
    )
"""

TF_SLIM = """
name, mode, logdir = {name!r}, {mode!r}, {logdir!r}
warmup, timed, batch = {warmup}, {timed}, {batch}
import time
with tf.Graph().as_default():
    train_op = build_train_op(name, batch, {feed!r})
    if mode == "session":
        with tf1.Session() as session:
            session.run(tf1.global_variables_initializer())
            for _ in range(warmup):
                session.run(train_op)
            start = time.perf_counter()
            for _ in range(timed):
                session.run(train_op)
            rate = timed / (time.perf_counter() - start)
    else:
        # slim.learning.train with its defaults (a line every step,
        # summaries and checkpoints every 600 s), lines written to stderr.
        tf1.logging.set_verbosity(tf1.logging.INFO)
        ends = []

        def train_step(*args):
            result = slim.learning.train_step(*args)
            ends.append(time.perf_counter())
            return result

        slim.learning.train(
            train_op,
            logdir,
            train_step_fn=train_step,
            number_of_steps=warmup + timed,
        )
        rate = timed / (ends[warmup + timed - 1] - ends[warmup - 1])
print(json.dumps({{"steps_per_sec": rate}}))
"""


def tf_slim(name, mode="session", logdir=None, feed="constant"):
    code = TF_SLIM.format(
        name=name,
        mode=mode,
        feed=feed,
        logdir=logdir,
        warmup=WARMUP,
        timed=TIMED,
        batch=BATCH,
    )
    return tf_slim_peer.run(TF_SLIM_TRAIN_OP + code, timeout=600, alone=True)[
        "steps_per_sec"
    ]


VARIANTS = {
    "keras fit": keras_fit,
    "raw loop": raw_loop,
    "SlimModel.fit": slim_model_fit,
    "keras_slim.train": slim_train,
}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--feed",
        choices=["constant", "dataset"],
        default="constant",
        help="TF-Slim's input: constant tensors (default), or the batch "
        "repeated by tf.data and read through an iterator, as Keras is fed",
    )
    parser.add_argument(
        "--models",
        default="MLP,CNN",
        help="comma-separated model name prefixes (default: both)",
    )
    args = parser.parse_args(argv)
    names = [
        n
        for n in _common.MODELS
        if any(n.startswith(p) for p in args.models.split(","))
    ]
    # Log lines are formatted and written, as a user's INFO handler would.
    log = logging.getLogger("keras_slim")
    log.addHandler(logging.StreamHandler(open(os.devnull, "w")))
    log.setLevel(logging.INFO)
    log.propagate = False
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    print(
        f"keras {keras.__version__}, tensorflow {tf.__version__}, "
        f"{os.cpu_count()} CPUs; {TIMED} steps after {WARMUP}, batch "
        f"{BATCH}; medians of {args.rounds} rounds; TF-Slim fed "
        f"{args.feed} tensors; per-round ratios of SlimModel.fit to "
        "TF-Slim in brackets (min-max)"
    )
    print()
    peers = ["TF-Slim", "slim.learning.train"]
    print(
        "| model | "
        + " | ".join([*VARIANTS, *peers])
        + " | SlimModel.fit / TF-Slim | train / TF-Slim"
        + " | train / slim.learning.train |"
    )
    print("|---" * (len(VARIANTS) + len(peers) + 4) + "|")
    for name in names:
        input_shape = _common.MODELS[name][0]
        data = _common.dataset(input_shape)
        results = {v: [] for v in [*VARIANTS, *peers]}
        for _ in range(args.rounds):
            for variant, function in VARIANTS.items():
                with tempfile.TemporaryDirectory(dir=shm) as logdir:
                    results[variant].append(function(name, data, logdir))
                keras.backend.clear_session()
            results["TF-Slim"].append(tf_slim(name, feed=args.feed))
            with tempfile.TemporaryDirectory(dir=shm) as logdir:
                results["slim.learning.train"].append(
                    tf_slim(name, "train", logdir, feed=args.feed)
                )
        m = {v: statistics.median(r) for v, r in results.items()}
        rounds = [
            a / b for a, b in zip(results["SlimModel.fit"], results["TF-Slim"])
        ]
        cells = " | ".join(f"{m[v]:.1f}" for v in [*VARIANTS, *peers])
        print(
            f"| {name} | {cells} | "
            f"{m['SlimModel.fit'] / m['TF-Slim']:.3f} "
            f"({min(rounds):.2f}-{max(rounds):.2f}) | "
            f"{m['keras_slim.train'] / m['TF-Slim']:.3f} | "
            f"{m['keras_slim.train'] / m['slim.learning.train']:.3f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
