"""`keras_slim.callbacks.Summaries` and `Trace` on JAX (keras_slim/_jax/
callbacks/summaries.py, trace.py): the step's own loss and the learning
rate at the right steps, read back with TensorBoard's reader; TF1's
histograms; profiles that name their step; no state copied back per
batch; and all of it where TensorFlow cannot be imported."""

import bisect
import glob
import gzip
import json
import math
import os
import subprocess
import sys
import traceback

import keras
import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.compat.proto import summary_pb2
from tensorboard.util import tensor_util

import keras_slim
from keras_slim._jax.callbacks import _histogram
from tests_jax import helpers
from tests_jax import no_tensorflow

STEPS_PER_EPOCH = 8  # 64 examples, batches of 8


def _fit(model, callbacks, epochs=2, **kwargs):
    x, y = helpers.data(64)
    return model.fit(
        x, y, batch_size=8, epochs=epochs, shuffle=False, verbose=0,
        callbacks=callbacks, **kwargs,
    )  # fmt: skip


def read_events(logdir):
    """{tag: {step: value}} with TensorBoard's reader: a scalar's float,
    or a histogram's `HistogramValue`."""
    accumulator = event_accumulator.EventAccumulator(
        str(logdir),
        size_guidance={
            event_accumulator.TENSORS: 0,
            event_accumulator.HISTOGRAMS: 0,
        },
    )
    accumulator.Reload()
    events = {}
    for tag in accumulator.Tags()["tensors"]:
        events[tag] = {
            e.step: float(tensor_util.make_ndarray(e.tensor_proto))
            for e in accumulator.Tensors(tag)
        }
    for tag in accumulator.Tags()["histograms"]:
        events[tag] = {
            e.step: e.histogram_value for e in accumulator.Histograms(tag)
        }
    return events


class _Logs(keras.callbacks.Callback):
    """Keras's logs (running means of the epoch) after each batch."""

    def __init__(self):
        super().__init__()
        self.logs = []

    def on_train_batch_end(self, batch, logs=None):
        self.logs.append(dict(logs))


def _own_loss(means, step):
    """The loss of global step `step` (1-based) from Keras's running means
    of equal batches: n * mean_n - (n - 1) * mean_(n-1) in an epoch."""
    i = step - 1
    n = i % STEPS_PER_EPOCH + 1
    if n == 1:
        return means[i]
    return n * means[i] - (n - 1) * means[i - 1]


# Summaries: scalars.


@pytest.mark.parametrize("schedule", [False, True])
def test_summaries_write_the_steps_loss_and_learning_rate(tmp_path, schedule):
    rate = (
        keras.optimizers.schedules.ExponentialDecay(
            0.05, decay_steps=3, decay_rate=0.5
        )
        if schedule
        else 0.05
    )
    model = helpers.compile_model(
        helpers.mlp(),
        keras.optimizers.SGD(rate, momentum=0.9),
        metrics=["accuracy"],
    )
    logs = _Logs()
    summaries = keras_slim.callbacks.Summaries(
        tmp_path / "logs", every_n_steps=3, every_n_secs=None
    )
    _fit(model, [summaries, logs])
    events = read_events(tmp_path / "logs")
    assert set(events) == {
        "loss", "accuracy", "learning_rate", "global_step/sec",
        "losses/total_loss", "losses/regularization_loss",
        "losses/sparse_categorical_crossentropy",
    }  # fmt: skip
    steps = [3, 6, 9, 12, 15]
    means = [entry["loss"] for entry in logs.logs]
    assert sorted(events["loss"]) == steps
    for step in steps:
        expected = _own_loss(means, step)
        assert events["loss"][step] == pytest.approx(expected, abs=2e-4)
        # The other logs as Keras reports them: running means.
        assert events["accuracy"][step] == pytest.approx(
            logs.logs[step - 1]["accuracy"], abs=1e-6
        )
        # The learning rate at the step (`optimizer.learning_rate` after
        # it): 0.05 * 0.5 ** (step / 3) for the schedule.
        lr = 0.05 * 0.5 ** (step / 3) if schedule else 0.05
        assert events["learning_rate"][step] == pytest.approx(lr, rel=1e-6)
        assert events["global_step/sec"][step] > 0


def test_a_time_interval_writes_the_first_step(tmp_path):
    model = helpers.compile_model(helpers.mlp())
    logs = _Logs()
    summaries = keras_slim.callbacks.Summaries(str(tmp_path), every_n_secs=3600)
    _fit(model, [summaries, logs], epochs=1)
    events = read_events(tmp_path)
    assert sorted(events["loss"]) == [1]
    assert events["loss"][1] == pytest.approx(logs.logs[0]["loss"], abs=1e-5)


def test_no_event_file_when_nothing_is_written(tmp_path):
    model = helpers.compile_model(helpers.mlp())
    logdir = tmp_path / "never"
    summaries = keras_slim.callbacks.Summaries(
        logdir, every_n_steps=1000, every_n_secs=None, histograms=True
    )
    _fit(model, [summaries])
    assert not logdir.exists()


# Summaries: histograms.


def test_summaries_write_each_variables_histogram(tmp_path):
    model = helpers.compile_model(helpers.mlp(batch_norm=True))
    summaries = keras_slim.callbacks.Summaries(
        tmp_path, every_n_steps=4, every_n_secs=None, histograms=True
    )
    _fit(model, [summaries], epochs=1)
    events = read_events(tmp_path)
    edges = set(_histogram.bucket_limits().tolist())
    for variable in model.variables:
        written = events[variable.path]
        assert sorted(written) == [4, 8], variable.path
        last = written[8]
        value = np.asarray(variable, dtype=np.float64)
        assert last.num == value.size == sum(last.bucket)
        assert set(last.bucket_limit) <= edges
        # The last write is of the values the fit ends with.
        assert (last.min, last.max) == (value.min(), value.max())
        assert last.sum == pytest.approx(value.sum(), abs=1e-9)
        assert last.sum_squares == pytest.approx(
            np.dot(value.ravel(), value.ravel()), rel=1e-12
        )


def test_the_bucket_edges_are_tf1s():
    limits = _histogram.bucket_limits()
    middle = limits.size // 2
    # Known values: 0 in the middle, DBL_MAX at the ends, 1e-12 first,
    # each edge 10% above the one before, the last below 1e20.
    assert limits.size == 1551
    assert limits[middle] == 0.0
    assert limits[-1] == sys.float_info.max == -limits[0]
    positive = limits[middle + 1 : -1]
    assert positive[0] == 1e-12
    assert positive[1] == pytest.approx(1.1e-12, rel=1e-15)
    assert positive[-1] < 1e20 <= positive[-1] * 1.1
    np.testing.assert_allclose(
        positive, 1e-12 * 1.1 ** np.arange(positive.size), rtol=1e-12
    )
    np.testing.assert_array_equal(limits[:middle], -limits[::-1][:middle])


def _reference_proto(values):
    """TF1's `Histogram::Add` and `EncodeToProto`, line by line."""
    limits = _histogram.bucket_limits().tolist()
    counts = [0.0] * len(limits)
    for v in values:
        counts[bisect.bisect_right(limits, v)] += 1.0
    ends, kept = [], []
    i = 0
    while i < len(counts):
        end, count = limits[i], counts[i]
        i += 1
        if count <= 0.0:
            while i < len(counts) and counts[i] <= 0.0:
                end, count = limits[i], counts[i]
                i += 1
        ends.append(end)
        kept.append(count)
    return ends, kept


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(0).normal(size=(40, 25)).astype("float32"),
        np.array([0.0, 1e-13, -1e-13, 1e-12, 3.0, 3.0, -7e25]),
        np.array([3, -1, 7, 0], "int64"),
        np.zeros((0,), "float32"),
    ],
)
def test_a_histogram_is_tf1s_kernels(values):
    proto = _histogram.histogram_proto(values)
    flat = values.astype(np.float64).ravel()
    assert (list(proto.bucket_limit), list(proto.bucket)) == (
        _reference_proto(flat)
    )
    assert proto.num == flat.size
    if flat.size:
        assert (proto.min, proto.max) == (flat.min(), flat.max())
        assert proto.sum == pytest.approx(math.fsum(flat), abs=1e-9)
    else:
        assert (proto.min, proto.max) == (
            sys.float_info.max, -sys.float_info.max,
        )  # fmt: skip


def test_non_finite_values_count_at_the_dtypes_largest():
    values = np.array([1.0, np.nan, np.inf, -2.0, 5.0, -np.inf], "float32")
    proto = _histogram.histogram_proto(values)
    largest = float(np.finfo(np.float32).max)
    assert (proto.num, proto.min, proto.max) == (6, -largest, largest)
    half = _histogram.histogram_proto(values.astype("float16"))
    assert (half.min, half.max) == (-65504.0, 65504.0)
    double = _histogram.histogram_proto(values.astype("float64"))
    assert double.max == largest  # float32's, as on TensorFlow


def test_a_histogram_equals_tensorflows_kernel():
    """The strongest reference where TensorFlow is installed: its own
    `HistogramSummary` op."""
    tf = pytest.importorskip("tensorflow")
    values = np.random.default_rng(1).normal(scale=3.0, size=500)
    values = np.concatenate([values, [0.0, 0.0, 1e-15]]).astype("float32")
    serialized = tf.raw_ops.HistogramSummary(tag="h", values=values).numpy()
    expected = summary_pb2.Summary.FromString(serialized).value[0].histo
    proto = _histogram.histogram_proto(values)
    assert list(proto.bucket_limit) == list(expected.bucket_limit)
    assert list(proto.bucket) == list(expected.bucket)
    assert (proto.min, proto.max, proto.num) == (
        expected.min, expected.max, expected.num,
    )  # fmt: skip
    assert proto.sum == pytest.approx(expected.sum, rel=1e-12)
    assert proto.sum_squares == pytest.approx(expected.sum_squares, rel=1e-12)


# Summaries from inside the step: gradients, activations, loss terms.

_MULTIPLIER = 2.0  # the policy's on logits/kernel


def _two_layer(regularizer=None):
    """A `SlimModel` x(8) -> hidden (relu, 16) -> logits (3), its loss a
    mean squared error, SGD with momentum, a policy multiplier."""
    keras.utils.set_random_seed(3)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(
        16, activation="relu", name="hidden", kernel_regularizer=regularizer
    )(inputs)
    outputs = keras.layers.Dense(3, name="logits")(h)
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/kernel": _MULTIPLIER}
    )
    model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    model.compile(keras.optimizers.SGD(0.05, momentum=0.9), loss="mse")
    return model


def _regression(n=64):
    rng = np.random.default_rng(5)
    x = rng.normal(size=(n, 8)).astype("float32")
    return x, rng.normal(size=(n, 3)).astype("float32")


def _reference(weights, x, y):
    """The gradients (by variable path, the policy's multiplier applied)
    and the hidden layer's output of one step, in jax.numpy written out
    here (not Keras's layers)."""
    import jax
    import jax.numpy as jnp

    def loss(w):
        h = jax.nn.relu(x @ w["hidden/kernel"] + w["hidden/bias"])
        out = h @ w["logits/kernel"] + w["logits/bias"]
        return jnp.mean(jnp.square(out - y)), h

    grads, hidden = jax.grad(loss, has_aux=True)(weights)
    grads = {k: np.asarray(v) for k, v in grads.items()}
    grads["logits/kernel"] = grads["logits/kernel"] * _MULTIPLIER
    return grads, np.asarray(hidden)


def _assert_histogram_of(histogram, values, atol):
    values = np.asarray(values, dtype=np.float64)
    assert histogram.num == values.size == sum(histogram.bucket)
    assert histogram.min == pytest.approx(values.min(), abs=atol)
    assert histogram.max == pytest.approx(values.max(), abs=atol)
    assert histogram.sum == pytest.approx(values.sum(), abs=atol * values.size)


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_gradient_and_activation_summaries_are_the_steps_own(
    tmp_path, steps_per_execution
):
    x, y = _regression()
    model = _two_layer()
    model.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
        loss="mse",
        steps_per_execution=steps_per_execution,
    )
    summaries = keras_slim.callbacks.Summaries(
        tmp_path, every_n_steps=6, every_n_secs=None, gradients=True,
        activations=["hidden"],
    )  # fmt: skip
    model.fit(
        x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
        callbacks=[summaries],
    )  # fmt: skip
    events = read_events(tmp_path)
    # The reference: a twin trained on the first 5 batches without
    # summaries gives the weights step 6 starts from.
    twin = _two_layer()
    twin.fit(x[:40], y[:40], batch_size=8, shuffle=False, verbose=0)
    before = {v.path: np.asarray(v) for v in twin.trainable_variables}
    grads, hidden = _reference(before, x[40:48], y[40:48])
    for path, grad in grads.items():
        assert sorted(events[f"{path}/gradient"]) == [6], path
        _assert_histogram_of(events[f"{path}/gradient"][6], grad, 1e-5)
        assert events[f"{path}/gradient_norm"][6] == pytest.approx(
            float(np.linalg.norm(grad)), rel=1e-5
        )
    _assert_histogram_of(events["activations/hidden"][6], hidden, 1e-5)
    assert events["sparsity/hidden"][6] == pytest.approx(
        float(np.mean(hidden == 0)), abs=1e-6
    )
    assert "activations/logits" not in events
    # Summaries change no weight: the run equals one without them.
    plain = _two_layer()
    plain.compile(
        optimizer=keras.optimizers.SGD(0.05, momentum=0.9),
        loss="mse",
        steps_per_execution=steps_per_execution,
    )
    plain.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    helpers.assert_close(helpers.weights(plain), helpers.weights(model), 1e-6)


def test_in_step_summaries_with_dropout_and_batch_norm_on_every_layer(
    tmp_path,
):
    model = helpers.compile_model(
        helpers.mlp({"freeze": ["fc2/.*"]}, batch_norm=True, dropout=True)
    )
    summaries = keras_slim.callbacks.Summaries(
        tmp_path, every_n_steps=3, every_n_secs=None, gradients=True,
        activations=True,
    )  # fmt: skip
    _fit(model, [summaries], epochs=1)
    events = read_events(tmp_path)
    for layer in ("fc1", "bn", "dropout", "fc2", "logits"):
        layer = next(n for n in (x.name for x in model.layers) if layer in n)
        assert sorted(events[f"activations/{layer}"]) == [3, 6], layer
        assert events[f"activations/{layer}"][6].num == 8 * (
            3 if layer == "logits" else 16
        )
    # Dropout zeroes about 30% of its output in the step's own pass.
    dropout = next(x.name for x in model.layers if "dropout" in x.name)
    assert 0.1 < events[f"sparsity/{dropout}"][6] < 0.6
    trained = {v.path for v in model.trainable_variables} - {
        "fc2/kernel", "fc2/bias",
    }  # fmt: skip
    written = {t[:-9] for t in events if t.endswith("/gradient")}
    assert written == trained  # a frozen variable has none
    # The same run without summaries ends with the same weights.
    plain = helpers.compile_model(
        helpers.mlp({"freeze": ["fc2/.*"]}, batch_norm=True, dropout=True)
    )
    _fit(plain, [], epochs=1)
    for a, b in zip(plain.variables, model.variables):
        np.testing.assert_allclose(a, b, atol=1e-6, err_msg=a.path)


def test_loss_terms_split_the_regularization_off(tmp_path):
    x, y = _regression()
    model = _two_layer(keras.regularizers.L2(0.01))
    summaries = keras_slim.callbacks.Summaries(
        tmp_path, every_n_steps=8, every_n_secs=None
    )
    logs = _Logs()
    model.fit(
        x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
        callbacks=[summaries, logs],
    )  # fmt: skip
    events = read_events(tmp_path)
    kernel = np.asarray(model.get_layer("hidden").kernel, dtype=np.float64)
    regularization = 0.01 * float(np.sum(kernel**2))  # after step 8
    total = events["losses/total_loss"][8]
    assert total == events["loss"][8]
    assert events["losses/regularization_loss"][8] == pytest.approx(
        regularization, rel=1e-5
    )
    assert events["losses/mse"][8] == pytest.approx(
        total - regularization, rel=1e-5
    )


# Arguments and models.


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"logdir": ""}, "logdir"),
        ({"every_n_steps": 0}, "every_n_steps"),
        ({"every_n_secs": -1}, "every_n_secs"),
        ({"histograms": "yes"}, "histograms"),
        ({"gradients": 1}, "gradients"),
        ({"activations": "fc1"}, "activations"),
    ],
)
def test_summaries_refuse_bad_arguments(tmp_path, kwargs, name):
    kwargs = {"logdir": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=f"`{name}`"):
        keras_slim.callbacks.Summaries(**kwargs)


def test_an_activation_layer_the_model_lacks_is_refused_before_a_step(
    tmp_path,
):
    model = helpers.compile_model(helpers.mlp())
    before = helpers.weights(model)
    summaries = keras_slim.callbacks.Summaries(
        tmp_path, every_n_steps=1, activations=["fc1", "fc9"]
    )
    with pytest.raises(ValueError, match=r"no layer named \['fc9'\]"):
        _fit(model, [summaries], epochs=1)
    helpers.assert_close(before, helpers.weights(model), atol=0)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"logdir": ""}, "logdir"),
        ({"every_n_steps": -1}, "every_n_steps"),
        ({"at_steps": [-1]}, "at_steps"),
        ({"at_steps": 3}, "at_steps"),
    ],
)
def test_trace_refuses_bad_arguments(tmp_path, kwargs, name):
    kwargs = {"logdir": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=f"`{name}`"):
        keras_slim.callbacks.Trace(**kwargs)


@pytest.mark.parametrize("callback", ["Summaries", "Trace"])
def test_a_plain_keras_model_is_refused(tmp_path, callback):
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(3)])
    model.compile("sgd", "mse")
    made = getattr(keras_slim.callbacks, callback)(str(tmp_path))
    x, y = helpers.data(16)
    with pytest.raises(ValueError, match="keras_slim.SlimModel"):
        model.fit(x, np.eye(3)[y], epochs=1, verbose=0, callbacks=[made])


# Trace.


def _events_of(trace):
    return trace["traceEvents"] if isinstance(trace, dict) else trace


def _step_events(events):
    """The profiler's events of `StepTraceAnnotation("train", step_num)`:
    {step_num}."""
    steps = set()
    for event in events:
        if event.get("name", "").startswith("train"):
            number = event.get("args", {}).get("step_num")
            if number is not None:
                steps.add(int(number))
    return steps


def test_trace_writes_a_profile_that_names_the_step(tmp_path):
    model = helpers.compile_model(helpers.mlp())
    trace = keras_slim.callbacks.Trace(str(tmp_path), at_steps=[2])
    _fit(model, [trace], epochs=1)
    assert trace.traces == [str(tmp_path / "tf_trace-2.json")]
    with open(trace.traces[0]) as f:
        chrome = json.load(f)
    assert _step_events(_events_of(chrome)) == {2}
    profile = tmp_path / "plugins" / "profile"
    assert glob.glob(str(profile / "*" / "*.xplane.pb"))
    (packed,) = glob.glob(str(profile / "*" / "*.trace.json.gz"))
    with gzip.open(packed) as f:
        assert _step_events(_events_of(json.load(f))) == {2}
    # The profiler was stopped: another one starts.
    import jax

    jax.profiler.start_trace(str(tmp_path / "again"))
    jax.profiler.stop_trace()


# The state stays outside the model.


def test_summaries_and_trace_never_copy_the_state_back(tmp_path):
    model = helpers.compile_model(helpers.mlp())
    syncs = []
    original = type(model).jax_state_sync

    def counting(self):
        syncs.append("".join(traceback.format_stack()))
        return original(self)

    type(model).jax_state_sync = counting
    try:
        _fit(
            model,
            [
                keras_slim.callbacks.Summaries(
                    tmp_path / "s", every_n_steps=2, histograms=True
                ),
                keras_slim.callbacks.Trace(tmp_path / "t", at_steps=[3]),
            ],
            epochs=3,
        )
    finally:
        type(model).jax_state_sync = original
    # Keras's own: two at each epoch's end (the loop's, and History's
    # `self.model`), one in fit's `finally`; none in a batch.
    assert len(syncs) == 2 * 3 + 1
    assert not [s for s in syncs if "on_train_batch" in s]
    assert len(read_events(tmp_path / "s")["loss"]) == 12 + 1


def test_summaries_on_four_devices(tmp_path):
    config = keras_slim.DeploymentConfig(num_clones=4, clone_on_cpu=True)
    with config.strategy().scope():
        model = helpers.compile_model(helpers.mlp())
        summaries = keras_slim.callbacks.Summaries(
            tmp_path, every_n_steps=4, every_n_secs=None, histograms=True,
            gradients=True, activations=["fc1"],
        )  # fmt: skip
        _fit(model, [summaries], epochs=1)
    events = read_events(tmp_path)
    assert sorted(events["loss"]) == [4, 8]
    kernel = model.get_layer("fc1").kernel
    assert events[kernel.path][8].num == 8 * 16
    assert events[kernel.path][8].max == float(np.max(kernel))
    # The global batch's gradient and every example's activation.
    assert events["fc1/kernel/gradient"][8].num == 8 * 16
    assert events["activations/fc1"][8].num == 8 * 16
    single = helpers.compile_model(helpers.mlp())
    single_logs = tmp_path / "one"
    _fit(
        single,
        [keras_slim.callbacks.Summaries(
            single_logs, every_n_steps=4, every_n_secs=None, gradients=True,
            activations=["fc1"],
        )],
        epochs=1,
    )  # fmt: skip
    one = read_events(single_logs)
    for tag in ("fc1/kernel/gradient_norm", "sparsity/fc1"):
        assert events[tag][8] == pytest.approx(one[tag][8], abs=1e-5), tag


# Without TensorFlow.

_WITHOUT_TENSORFLOW = """
import glob, json, os, sys
os.environ["KERAS_BACKEND"] = "jax"
import keras_slim
from tests_jax import helpers

logdir = sys.argv[1]
x, y = helpers.data(64)
model = helpers.compile_model(helpers.mlp())
summaries = keras_slim.callbacks.Summaries(
    logdir, every_n_steps=4, every_n_secs=None, histograms=True,
    gradients=True, activations=True,
)
trace = keras_slim.callbacks.Trace(logdir, at_steps=[5])
model.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0,
          callbacks=[summaries, trace])
print(json.dumps({
    "tensorflow": sorted(m for m in sys.modules if m.startswith("tensorflow")
                         and not m.startswith("tensorflow_")),
    "events": len(glob.glob(os.path.join(logdir, "events.out.tfevents.*"))),
    "traces": [os.path.basename(p) for p in trace.traces],
    "classes": [type(summaries).__module__, type(trace).__module__],
}))
"""


def test_summaries_and_trace_run_without_tensorflow(tmp_path):
    env = {**os.environ, "KERAS_BACKEND": "jax"}
    result = subprocess.run(
        [sys.executable, "-c", no_tensorflow.prelude() + _WITHOUT_TENSORFLOW,
         str(tmp_path)],
        cwd=no_tensorflow.ROOT, env=env, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {
        "tensorflow": [],
        "events": 1,
        "traces": ["tf_trace-5.json"],
        "classes": [
            "keras_slim._jax.callbacks.summaries",
            "keras_slim._jax.callbacks.trace",
        ],
    }
    events = read_events(tmp_path)
    assert sorted(events["loss"]) == [4, 8]
    assert events["fc1/kernel"][8].num == 8 * 16
    assert sorted(events["fc1/kernel/gradient"]) == [4, 8]
    assert sorted(events["activations/fc2"]) == [4, 8]
