"""Summaries: exact tags and steps, values against independent references."""

import logging
import os

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard import data_compat
from tensorboard.backend.event_processing import event_accumulator

import keras_slim
from keras_slim.callbacks import Summaries
from tests.callbacks import common
from tests.helpers import compile_model
from tests.helpers import global_step
from tests.helpers import mlp


def read_events(logdir):
    """{tag: {step: value}} from the event files, with TensorBoard's reader:
    a scalar's array, or a histogram's `HistogramValue` (min, max, num,
    sum, ...)."""
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
            e.step: tf.make_ndarray(e.tensor_proto)
            for e in accumulator.Tensors(tag)
        }
    for tag in accumulator.Tags()["histograms"]:
        events[tag] = {
            e.step: e.histogram_value for e in accumulator.Histograms(tag)
        }
    return events


def scalars_only(**kwargs):
    return Summaries(every_n_secs=None, every_n_steps=4, **kwargs)


@pytest.mark.parametrize("steps_per_execution", [1, 2])
def test_scalar_tags_steps_and_the_loss_of_the_step(
    steps_per_execution, tmp_path
):
    # With 2 steps per call the loss of step 8 comes from the call's
    # per-step records, not from the tracker read around the call.
    x, y, data = common.full_batch()
    model = common.model(steps_per_execution=steps_per_execution)
    common.fit(model, data, 10, [scalars_only(logdir=tmp_path)])
    events = read_events(tmp_path)
    assert set(events) == {
        "loss",
        "accuracy",
        "learning_rate",
        "global_step/sec",
        "losses/total_loss",
        "losses/regularization_loss",
        "losses/sparse_categorical_crossentropy",
    }
    for tag in events:
        assert sorted(events[tag]) == [4, 8], tag
    reference = common.model()
    common.fit(reference, data, 3)
    assert float(events["loss"][4]) == pytest.approx(
        common.loss_on(reference, x, y), abs=1e-5
    )
    common.fit(reference, data, 4)
    assert float(events["loss"][8]) == pytest.approx(
        common.loss_on(reference, x, y), abs=1e-5
    )
    assert float(events["learning_rate"][8]) == pytest.approx(0.01)
    assert float(events["global_step/sec"][8]) > 0


def test_learning_rate_schedule_is_evaluated_at_the_step(tmp_path):
    _, _, data = common.full_batch()
    schedule = keras.optimizers.schedules.ExponentialDecay(
        0.1, decay_steps=1, decay_rate=0.5
    )
    model = common.model(optimizer=keras.optimizers.SGD(schedule))
    common.fit(model, data, 8, [scalars_only(logdir=tmp_path)])
    events = read_events(tmp_path)
    assert float(events["learning_rate"][4]) == pytest.approx(0.1 * 0.5**4)
    assert float(events["learning_rate"][8]) == pytest.approx(0.1 * 0.5**8)


def test_histograms_of_every_variable(tmp_path):
    _, _, data = common.full_batch()
    model = common.model("keras")
    common.fit(model, data, 4, [scalars_only(logdir=tmp_path, histograms=True)])
    events = read_events(tmp_path)
    paths = {v.path for v in model.variables}
    assert paths <= set(events)
    # TF1's HistogramSummary of the kernel after the 4th step.
    kernel = model.get_layer("fc1").kernel.numpy()
    histogram = events["fc1/kernel"][4]
    assert histogram.num == kernel.size
    assert (histogram.min, histogram.max) == (kernel.min(), kernel.max())
    assert histogram.sum == pytest.approx(kernel.sum(), rel=1e-5)
    assert sum(histogram.bucket) == kernel.size
    # They are TF1's `histo` values, as TF-Slim wrote them: no plugin
    # name in the file; TensorBoard's loader migrates them to its
    # histograms plugin (what its dashboard and data provider read).
    raw = [
        value
        for path in tmp_path.glob("events.out.tfevents*")
        for event in tf.compat.v1.train.summary_iterator(str(path))
        for value in event.summary.value
        if value.tag == "fc1/kernel"
    ]
    assert raw and all(v.HasField("histo") for v in raw)
    migrated = data_compat.migrate_value(raw[0])
    assert migrated.metadata.plugin_data.plugin_name == "histograms"


def test_gradients_after_the_policy(tmp_path):
    x, y, data = common.full_batch()
    policy = keras_slim.GradientPolicy(
        multipliers={"logits/.*": 3.0}, freeze=["fc1/bias"], clip_norm=0.5
    )
    model = common.model(policy=policy)
    common.fit(model, data, 4, [scalars_only(logdir=tmp_path, gradients=True)])
    events = read_events(tmp_path)
    grad_tags = {t for t in events if t.endswith("/gradient_norm")}
    assert grad_tags == {
        "fc1/kernel/gradient_norm",
        "logits/kernel/gradient_norm",
        "logits/bias/gradient_norm",
    }
    assert "fc1/kernel/gradient" in events
    # Reference: the gradient of step 4 (weights after 3 steps), x3, clipped.
    reference = common.model(policy=policy)
    common.fit(reference, data, 3)
    with tf.GradientTape() as tape:
        loss = reference.compute_loss(x, y, reference(x, training=True))
    variable = reference.get_layer("logits").kernel
    grad = tape.gradient(loss, variable) * 3.0
    expected = min(float(tf.norm(grad)), 0.5)
    assert float(events["logits/kernel/gradient_norm"][4]) == pytest.approx(
        expected, rel=1e-4
    )


def test_gradients_are_unscaled_under_loss_scaling(tmp_path):
    x, y, data = common.full_batch()

    def build():
        return common.model(
            optimizer=keras.optimizers.LossScaleOptimizer(
                keras.optimizers.SGD(0.1), initial_scale=1024.0
            )
        )

    model = build()
    common.fit(model, data, 4, [scalars_only(logdir=tmp_path, gradients=True)])
    events = read_events(tmp_path)
    reference = build()
    common.fit(reference, data, 3)
    with tf.GradientTape() as tape:
        loss = reference.compute_loss(x, y, reference(x, training=True))
    grad = tape.gradient(loss, reference.get_layer("logits").kernel)
    assert float(events["logits/kernel/gradient_norm"][4]) == pytest.approx(
        float(tf.norm(grad)), rel=1e-4
    )


def test_activations_and_sparsity(tmp_path):
    x, y, data = common.full_batch()

    def build():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((8,))
        h = keras.layers.Dense(16, activation="relu", name="fc1")(inputs)
        out = keras.layers.Dense(3, name="logits")(h)
        model = keras_slim.SlimModel(inputs, out)
        return common.compile_model(model, keras.optimizers.SGD(0.1))

    model = build()
    common.fit(
        model, data, 4, [scalars_only(logdir=tmp_path, activations=True)]
    )
    events = read_events(tmp_path)
    assert {"activations/fc1", "sparsity/fc1", "activations/logits"} <= set(
        events
    )
    reference = build()
    common.fit(reference, data, 3)
    hidden = keras.ops.convert_to_numpy(reference.get_layer("fc1")(x))
    expected = float(np.mean(hidden == 0))
    assert float(events["sparsity/fc1"][4]) == pytest.approx(expected)
    histogram = events["activations/fc1"][4]
    assert histogram.num == hidden.size
    assert histogram.max == pytest.approx(hidden.max(), rel=1e-6)
    # The summaries' forward pass is the step's own: the same training.
    common.fit(reference, data, 1)
    for a, b in zip(model.get_weights(), reference.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_activations_are_those_of_the_training_forward_pass(tmp_path):
    """As TF-Slim summarized its training graph's end_points: a dropout
    layer's output has the dropped units zeroed (training=True), more
    zeros than the ReLU output it drops from."""
    _, _, data = common.full_batch()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu", name="fc1")(inputs)
    h = keras.layers.Dropout(0.5, name="drop")(h)
    model = keras_slim.SlimModel(inputs, keras.layers.Dense(3)(h))
    common.compile_model(model, keras.optimizers.SGD(0.1))
    common.fit(
        model, data, 8, [scalars_only(logdir=tmp_path, activations=True)]
    )
    events = read_events(tmp_path)
    assert sorted(events["sparsity/drop"]) == [4, 8]
    for step in events["sparsity/drop"]:
        relu, dropped = (
            float(events[f"sparsity/{n}"][step]) for n in ("fc1", "drop")
        )
        assert dropped > relu + 0.2, (step, relu, dropped)


def test_activations_of_named_layers_only(tmp_path):
    """`activations=[names]` writes those layers' outputs only (a net's
    end_points, as train_image_classifier); an unknown name is an error
    before the first step."""
    x, y, data = common.full_batch()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu", name="fc1")(inputs)
    h = keras.layers.Dense(16, activation="relu", name="fc2")(h)
    out = keras.layers.Dense(3, name="logits")(h)
    model = keras_slim.SlimModel(inputs, out)
    model = common.compile_model(model, keras.optimizers.SGD(0.1))
    common.fit(
        model, data, 4, [scalars_only(logdir=tmp_path, activations=["fc2"])]
    )
    written = {t for t in read_events(tmp_path) if "activations/" in t}
    assert written == {"activations/fc2"}
    with pytest.raises(ValueError, match=r"has no layer named \['fc9'\]"):
        common.fit(
            model,
            data,
            1,
            [scalars_only(logdir=tmp_path / "b", activations=["fc9"])],
        )
    with pytest.raises(ValueError, match="True, False, or a list of layer"):
        Summaries(tmp_path, activations="fc1")


class CountCalls(keras.layers.Layer):
    """Counts forward passes in a variable (no host sync)."""

    def build(self, input_shape):
        self.calls = self.add_weight(
            shape=(), initializer="zeros", trainable=False, name="calls"
        )

    def call(self, inputs):
        self.calls.assign_add(1.0)
        return inputs


def test_activation_summaries_run_no_extra_forward_pass(tmp_path):
    _, _, data = common.full_batch()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    counted = CountCalls(name="count")(inputs)
    out = keras.layers.Dense(3, name="logits")(counted)
    model = common.compile_model(keras_slim.SlimModel(inputs, out))
    summaries = Summaries(
        tmp_path, every_n_steps=5, every_n_secs=None, activations=True
    )
    common.fit(model, data, 10, [summaries])
    # 10 training forwards, the 2 writes included: the activations are
    # those of the step's own forward pass.
    assert float(model.get_layer("count").calls.numpy()) == 10.0


class TickingClock:
    """A clock that advances `tick` seconds at each read."""

    def __init__(self, tick):
        self.now, self.tick = 0.0, tick

    def __call__(self):
        self.now += self.tick
        return self.now


def test_time_trigger_writes_the_first_step_then_each_interval(tmp_path):
    # About 1 s per step: an interval of 4.5 s fires every few steps, and
    # the first step writes too, as TF-Slim's summary thread did.
    _, _, data = common.full_batch()
    summaries = Summaries(tmp_path, every_n_secs=4.5, clock=TickingClock(0.5))
    common.fit(common.model(), data, 12, [summaries])
    steps = sorted(read_events(tmp_path)["loss"])
    assert steps[0] == 1
    assert 3 <= len(steps) < 12
    gaps = np.diff(steps)
    assert np.all(gaps > 1), steps


def test_no_event_file_when_nothing_is_written(tmp_path):
    _, _, data = common.full_batch()
    logdir = tmp_path / "run"
    common.fit(
        common.model(),
        data,
        5,
        [Summaries(logdir, every_n_steps=100, every_n_secs=None)],
    )
    assert not os.path.exists(logdir)


@pytest.mark.filterwarnings("ignore:Gradients do not exist for variables")
def test_variable_without_gradient_is_logged_once(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="keras_slim")

    class WithUnused(keras_slim.SlimModel):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.used = keras.layers.Dense(3, name="used")
            self.unused = keras.layers.Dense(3, name="unused")

        def build(self, input_shape):
            self.used.build(input_shape)
            self.unused.build(input_shape)

        def call(self, x):
            return self.used(x)

    _, _, data = common.full_batch()
    model = common.compile_model(WithUnused(name="m"))
    common.fit(model, data, 6, [scalars_only(logdir=tmp_path, gradients=True)])
    events = read_events(tmp_path)
    assert "m/used/kernel/gradient_norm" in events
    assert "m/unused/kernel/gradient_norm" not in events
    messages = [r.getMessage() for r in caplog.records]
    assert (
        messages.count("Variable m/unused/kernel has no gradient to summarize.")
        == 1
    )


def test_the_model_trains_the_same_with_summaries(tmp_path):
    _, _, data = common.full_batch()
    with_summaries = common.model()
    common.fit(
        with_summaries,
        data,
        9,
        [
            scalars_only(
                logdir=tmp_path,
                gradients=True,
                activations=True,
                histograms=True,
            )
        ],
    )
    plain = common.model()
    common.fit(plain, data, 9)
    for a, b in zip(with_summaries.get_weights(), plain.get_weights()):
        np.testing.assert_array_equal(a, b)
    # The hook left with the run.
    assert "_keras_slim_run" not in vars(with_summaries)


def test_unwritable_logdir_fails_before_the_first_step(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    _, _, data = common.full_batch()
    model = common.model()
    with pytest.raises(ValueError, match="summaries cannot be written"):
        common.fit(model, data, 3, [Summaries(blocker / "run")])
    assert global_step(model) == 0


def test_gradients_need_a_slim_model(tmp_path):
    _, _, data = common.full_batch()
    model = common.model("keras")
    with pytest.raises(ValueError, match="needs a keras_slim.SlimModel"):
        common.fit(model, data, 2, [Summaries(tmp_path, gradients=True)])
    assert global_step(model) == 0


def test_under_mirrored_strategy_one_replica_writes(mirrored, tmp_path):
    x, y, data = common.full_batch()
    with mirrored.scope():
        model = common.model()
    common.fit(model, data, 4, [scalars_only(logdir=tmp_path, gradients=True)])
    events = read_events(tmp_path)
    assert sorted(events["logits/kernel/gradient_norm"]) == [4]
    reference = common.model()
    common.fit(reference, data, 3)
    assert float(events["loss"][4]) == pytest.approx(
        common.loss_on(reference, x, y), abs=1e-5
    )


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"logdir": ""}, "Received: logdir=''"),
        ({"every_n_steps": 0}, "Received: every_n_steps=0"),
        ({"every_n_secs": -2}, "Received: every_n_secs=-2"),
        ({"histograms": 1}, "Received: histograms=1"),
        ({"gradients": "yes"}, "Received: gradients='yes'"),
    ],
)
def test_bad_arguments(kwargs, message, tmp_path):
    kwargs = {"logdir": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=message):
        Summaries(**kwargs)


def test_an_activity_regularizer_stays_in_the_data_term(tmp_path):
    """Its term is made per batch inside the step; the regularization tag
    holds the weight regularizers' terms, evaluated on the host."""
    _, _, data = common.full_batch()
    keras.utils.set_random_seed(0)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(
        16,
        name="fc1",
        kernel_regularizer=keras.regularizers.L2(0.1),
        activity_regularizer=keras.regularizers.L1(0.01),
    )(inputs)
    model = keras_slim.SlimModel(inputs, keras.layers.Dense(3)(h))
    common.compile_model(model, keras.optimizers.SGD(0.1))
    common.fit(model, data, 4, [scalars_only(logdir=str(tmp_path))])
    events = read_events(tmp_path)
    kernel = model.get_layer("fc1").kernel.numpy()
    assert float(events["losses/regularization_loss"][4]) == pytest.approx(
        0.1 * float(np.sum(kernel**2)), rel=1e-5
    )


def test_loss_tags_as_train_image_classifier(tmp_path):
    # The total loss of the step, the regularization, the data term.
    _, _, data = common.full_batch()
    model = compile_model(
        mlp(regularizer=keras.regularizers.L2(0.01)),
        keras.optimizers.SGD(0.1),
    )
    common.fit(model, data, 4, [scalars_only(logdir=str(tmp_path))])
    events = read_events(tmp_path)
    total = float(events["losses/total_loss"][4])
    assert total == pytest.approx(float(events["loss"][4]))
    regularization = float(events["losses/regularization_loss"][4])
    expected = sum(float(t) for t in model.losses)
    assert regularization == pytest.approx(expected, rel=1e-5)
    assert regularization > 0
    (data_tag,) = [
        t
        for t in events
        if t.startswith("losses/")
        and t
        not in (
            "losses/total_loss",
            "losses/regularization_loss",
        )
    ]
    assert float(events[data_tag][4]) == pytest.approx(
        total - regularization, rel=1e-5
    )
