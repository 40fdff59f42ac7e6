"""keras_slim.train: a port of TF-Slim's learning_test.py (TrainTest).

Same data as TF-Slim's test: np.random.seed(0), 16 rows of 4 one-hot
features whose position depends on the label; a 1-unit sigmoid Dense
(slim's LogisticClassifier), binary cross-entropy (slim's log_loss), SGD
with learning rate 1.0. The thresholds are TF-Slim's.
"""

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
import threading

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from tests.helpers import global_step
from tests.helpers import max_abs_diff
from tests.helpers import weights

pytestmark = pytest.mark.prestarted  # tests/zygote.py

# TF-Slim's tests wrote summaries too; these only check training.
NO_SUMMARIES = {"save_summaries_secs": None}


def slim_data():
    np.random.seed(0)
    inputs = np.zeros((16, 4), dtype=np.float32)
    labels = np.random.randint(0, 2, size=(16, 1)).astype(np.float32)
    for i in range(16):
        j = int(2 * labels[i, 0] + np.random.randint(0, 2))
        inputs[i, j] = 1
    return inputs, labels


def dataset(repeat=None):
    return tf.data.Dataset.from_tensors(slim_data()).repeat(repeat)


def logistic_classifier(policy=None, learning_rate=1.0, seed=0):
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((4,))
    outputs = keras.layers.Dense(1, activation="sigmoid", name="fc")(inputs)
    model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    model.compile(
        optimizer=keras.optimizers.SGD(learning_rate),
        loss="binary_crossentropy",
    )
    return model


def test_train_with_none_as_logdir():
    model = logistic_classifier()
    loss = keras_slim.train(model, dataset(), logdir=None, number_of_steps=300)
    assert loss < 0.015
    assert global_step(model) == 300


def test_returns_the_loss_of_the_last_step_not_the_mean():
    x, y = slim_data()
    model = logistic_classifier()
    loss = keras_slim.train(model, dataset(), logdir=None, number_of_steps=5)
    reference = logistic_classifier()
    keras_slim.train(reference, dataset(), logdir=None, number_of_steps=4)
    expected = float(reference.compute_loss(x, y, reference(x)).numpy())
    assert loss == pytest.approx(expected, abs=1e-6)


def test_logs_every_step_from_calls_of_several_steps(caplog):
    # TF-Slim's defaults (a line every step, the last step's loss) no
    # longer need one step per call: a SlimModel records each step's loss.
    x, y = slim_data()
    per_call = []
    spy = keras.callbacks.LambdaCallback(
        on_train_begin=lambda logs: per_call.append(model.steps_per_execution)
    )
    spy.step_multiples = lambda model: []  # a keras_slim-aware callback
    model = logistic_classifier()
    with caplog.at_level("INFO", logger="keras_slim"):
        loss = keras_slim.train(
            model, dataset(), logdir=None, number_of_steps=12, callbacks=[spy]
        )
    assert per_call == [12]
    lines = [r.getMessage() for r in caplog.records if r.name == "keras_slim"]
    assert [line.split(":")[0] for line in lines] == [
        f"global step {s}" for s in range(1, 13)
    ]
    reference = logistic_classifier()
    for s in range(1, 13):
        expected = float(reference.compute_loss(x, y, reference(x)).numpy())
        assert f"loss = {expected:.4f}" in lines[s - 1]
        keras_slim.train(reference, dataset(), logdir=None, number_of_steps=s)
    assert loss == pytest.approx(expected, abs=1e-6)


def test_resume_train_achieves_roughly_the_same_loss(tmp_path):
    for number_of_steps in (300, 301, 305):
        model = logistic_classifier()
        loss = keras_slim.train(
            model,
            dataset(),
            logdir=str(tmp_path),
            number_of_steps=number_of_steps,
            **NO_SUMMARIES,
        )
        assert loss < 0.015
        assert global_step(model) == number_of_steps
        assert tf.train.latest_checkpoint(str(tmp_path)).endswith(
            f"model.ckpt-{number_of_steps}"
        )


def test_train_all_vars_has_lower_loss_than_train_subset(tmp_path):
    def run(trainable, number_of_steps):
        policy = keras_slim.GradientPolicy(trainable=trainable)
        return keras_slim.train(
            logistic_classifier(policy),
            dataset(),
            logdir=str(tmp_path),
            number_of_steps=number_of_steps,
            **NO_SUMMARIES,
        )

    # Only the kernel, then only the bias: a rough fit.
    assert run(["fc/kernel"], 200) > 0.015
    loss = run(["fc/bias"], 300)
    assert 0.015 < loss < 0.05
    # All variables: a much better one.
    assert run(None, 400) < 0.015


def test_train_with_init_from_checkpoint(tmp_path):
    """TF-Slim's testTrainWithInitFromCheckpoint."""
    logdir1 = str(tmp_path / "first")
    # One step: the loss is still high.
    loss = keras_slim.train(
        logistic_classifier(), dataset(), logdir=logdir1, number_of_steps=1
    )
    assert loss > 0.5
    # A fresh model in the same logdir resumes, then trains to convergence.
    loss = keras_slim.train(
        logistic_classifier(seed=1),
        dataset(),
        logdir=logdir1,
        number_of_steps=300,
        log_every_n_steps=10,
    )
    assert loss < 0.02
    # A third model, warm-started from that checkpoint: one step, low loss.
    model = logistic_classifier(seed=2)
    loss = keras_slim.train(
        model,
        dataset(),
        logdir=None,
        number_of_steps=1,
        warm_start=tf.train.latest_checkpoint(logdir1),
    )
    assert loss < 0.02
    # The optimizer state and global step are not restored.
    assert global_step(model) == 1


def test_train_with_init_from_fn_values():
    """TF-Slim's testTrainWithInitFromFn, with values instead of a session."""
    trained = logistic_classifier()
    keras_slim.train(trained, dataset(), logdir=None, number_of_steps=300)
    values = {v.path: v.numpy() for v in trained.weights}
    warm = keras_slim.callbacks.WarmStart(None, values=values)
    loss = keras_slim.train(
        logistic_classifier(seed=3),
        dataset(),
        logdir=None,
        number_of_steps=1,
        warm_start=warm,
    )
    assert loss < 0.02
    assert warm.report["restored"] == ["fc/bias", "fc/kernel"]


def test_resume_beats_warm_start(tmp_path):
    pretrained = tmp_path / "pretrained"
    keras_slim.train(
        logistic_classifier(),
        dataset(),
        logdir=str(pretrained),
        number_of_steps=300,
        **NO_SUMMARIES,
    )
    logdir = str(tmp_path / "run")
    # A first run of 1 step from the untrained model: high loss, saved.
    keras_slim.train(
        logistic_classifier(seed=4),
        dataset(),
        logdir=logdir,
        number_of_steps=1,
        **NO_SUMMARIES,
    )
    # The rerun resumes from that checkpoint; the warm start steps aside.
    warm = keras_slim.callbacks.WarmStart(str(pretrained))
    loss = keras_slim.train(
        logistic_classifier(seed=5),
        dataset(),
        logdir=logdir,
        number_of_steps=2,
        warm_start=warm,
        **NO_SUMMARIES,
    )
    assert loss > 0.5
    assert warm.resumed_from.endswith("model.ckpt-1")
    assert warm.report == {"restored": [], "missing": [], "mismatched": []}


def test_gradient_multipliers_act_as_a_larger_learning_rate():
    losses = []
    for multiplier in (1.0, 1000.0):
        policy = keras_slim.GradientPolicy(multipliers={"fc/.*": multiplier})
        model = logistic_classifier(policy, learning_rate=0.001)
        losses.append(
            keras_slim.train(model, dataset(), logdir=None, number_of_steps=10)
        )
    assert losses[0] > losses[1]


def test_train_with_epoch_limit_stops_when_data_runs_out(tmp_path):
    model = logistic_classifier()
    loss = keras_slim.train(
        model, dataset(repeat=300), logdir=str(tmp_path), **NO_SUMMARIES
    )
    assert loss < 0.015
    assert global_step(model) == 300
    assert os.path.exists(tmp_path / "model.ckpt-300.index")


def test_number_of_steps_beyond_finite_data():
    model = logistic_classifier()
    keras_slim.train(model, dataset(repeat=7), logdir=None, number_of_steps=100)
    assert global_step(model) == 7


def test_unknown_length_data_returns_the_last_loss():
    x, y = slim_data()
    data = dataset(repeat=6).filter(lambda a, b: True)
    model = logistic_classifier()
    loss = keras_slim.train(model, data, logdir=None)
    reference = logistic_classifier()
    keras_slim.train(reference, dataset(), logdir=None, number_of_steps=5)
    expected = float(reference.compute_loss(x, y, reference(x)).numpy())
    assert global_step(model) == 6
    assert loss == pytest.approx(expected, abs=1e-6)


def test_arrays_with_a_batch_size():
    x, y = slim_data()
    model = logistic_classifier()
    keras_slim.train(
        model, (x, y), batch_size=8, logdir=None, number_of_steps=5
    )
    assert global_step(model) == 5
    once = logistic_classifier()
    keras_slim.train(once, (x, y), batch_size=8, logdir=None)
    assert global_step(once) == 2


class SlimBatches(keras.utils.PyDataset):
    """TF-Slim's rows, 4 per batch, by index: the same batch for an index
    each time; `weighted`: with a sample weight per row."""

    def __init__(self, rows=16, weighted=False):
        super().__init__()
        x, y = slim_data()
        self.x, self.y = x[:rows], y[:rows]
        self.w = np.linspace(0.5, 2.0, rows, dtype="float32")
        self.weighted = weighted

    def __len__(self):
        return math.ceil(len(self.x) / 4)

    def __getitem__(self, index):
        rows = slice(4 * index, 4 * index + 4)
        batch = (self.x[rows], self.y[rows])
        return (*batch, self.w[rows]) if self.weighted else batch


def test_a_py_dataset_is_read_pass_after_pass_as_arrays_are():
    x, y = slim_data()
    model = logistic_classifier()
    keras_slim.train(model, SlimBatches(), logdir=None, number_of_steps=10)
    assert global_step(model) == 10
    arrays = logistic_classifier()
    keras_slim.train(
        arrays, (x, y), batch_size=4, logdir=None, number_of_steps=10
    )
    assert max_abs_diff(weights(model), weights(arrays)) == 0.0
    once = logistic_classifier()
    keras_slim.train(once, SlimBatches(), logdir=None)
    assert global_step(once) == 4


def test_a_py_dataset_of_weighted_batches_weighs_them():
    data = SlimBatches(weighted=True)
    model = logistic_classifier()
    keras_slim.train(model, data, logdir=None, number_of_steps=6)
    same = tf.data.Dataset.from_tensor_slices((data.x, data.y, data.w))
    reference = logistic_classifier()
    keras_slim.train(
        reference, same.batch(4).repeat(), logdir=None, number_of_steps=6
    )
    assert max_abs_diff(weights(model), weights(reference)) == 0.0
    unweighted = logistic_classifier()
    keras_slim.train(unweighted, SlimBatches(), logdir=None, number_of_steps=6)
    assert max_abs_diff(weights(model), weights(unweighted)) > 0.0


def test_a_py_dataset_resumes_exactly_from_its_index(tmp_path, caplog):
    straight = logistic_classifier()
    keras_slim.train(straight, SlimBatches(), logdir=None, number_of_steps=10)
    caplog.set_level(logging.WARNING, logger="keras_slim")
    # Stopped inside a pass (3), at its end (4), then continued: each run
    # a new model, as a new process builds it.
    for target in (3, 4, 10):
        model = logistic_classifier()
        keras_slim.train(
            model,
            SlimBatches(),
            logdir=str(tmp_path),
            number_of_steps=target,
            **NO_SUMMARIES,
        )
        assert global_step(model) == target
    assert max_abs_diff(weights(model), weights(straight)) == 0.0
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 3
    assert "as Keras's epoch and the batch index in it" in warned[0]


def slim_batches(steps):
    """A generator of `SlimBatches`' batches, pass after pass."""
    data = SlimBatches()
    for step in range(steps):
        yield data[step % len(data)]


def test_a_generator_trains_and_its_resume_warns_what_it_reads(
    tmp_path, caplog
):
    straight = logistic_classifier()
    keras_slim.train(straight, slim_batches(6), logdir=None)
    assert global_step(straight) == 6
    iterated = logistic_classifier()
    keras_slim.train(iterated, iter(list(slim_batches(6))), logdir=None)
    assert max_abs_diff(weights(iterated), weights(straight)) == 0.0
    caplog.set_level(logging.WARNING, logger="keras_slim")
    first = logistic_classifier()
    keras_slim.train(
        first,
        slim_batches(100),
        logdir=str(tmp_path),
        number_of_steps=3,
        **NO_SUMMARIES,
    )
    (message,) = [r.getMessage() for r in caplog.records]
    assert "cannot be saved (the input is a generator" in message
    assert "reads as many from the input it is given, drops them" in message
    # The rerun restores step 3, reads the new generator's first 3
    # batches, drops them and trains on the ones after.
    rerun = logistic_classifier()
    keras_slim.train(
        rerun,
        slim_batches(100),
        logdir=str(tmp_path),
        number_of_steps=6,
        **NO_SUMMARIES,
    )
    assert global_step(rerun) == 6
    assert max_abs_diff(weights(rerun), weights(straight)) == 0.0


def test_data_of_another_kind_is_named_with_the_kinds_taken(tmp_path):
    model = logistic_classifier()
    logdir = str(tmp_path / "run")
    with pytest.raises(
        ValueError,
        match=r"Received: data={'x': 1} \(of type dict\)\. Expected a "
        r"tf\.data\.Dataset of \(x, y\) batches, a keras\.utils\.PyDataset "
        r"of them, a Python generator of them, or a tuple \(x, y\) of "
        r"arrays with `batch_size`\.",
    ):
        keras_slim.train(model, {"x": 1}, logdir, number_of_steps=2)
    with pytest.raises(ValueError, match=r"PyDataset is empty \(its length"):
        keras_slim.train(model, SlimBatches(rows=0), logdir, number_of_steps=2)
    with pytest.raises(
        ValueError,
        match="a keras.utils.PyDataset is already batched. Received: "
        "batch_size=4",
    ):
        keras_slim.train(model, SlimBatches(), logdir, batch_size=4)
    assert not (tmp_path / "run").exists()
    assert global_step(model) == 0


def test_already_at_number_of_steps_runs_nothing(tmp_path):
    keras_slim.train(
        logistic_classifier(),
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=3,
        **NO_SUMMARIES,
    )
    model = logistic_classifier()
    loss = keras_slim.train(
        model,
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=3,
        **NO_SUMMARIES,
    )
    assert loss is None
    assert global_step(model) == 3


def nan_dataset(bad_step, total):
    x, y = slim_data()
    bad = x.copy()
    bad[0, 0] = np.nan
    xs = np.stack([bad if s == bad_step else x for s in range(1, total + 1)])
    return tf.data.Dataset.from_tensor_slices((xs, np.stack([y] * total)))


def test_nan_raises_and_leaves_only_finite_checkpoints(tmp_path):
    model = logistic_classifier()
    with pytest.raises(keras_slim.NanLossDuringTrainingError, match="step 5"):
        keras_slim.train(
            model,
            nan_dataset(5, 10),
            logdir=str(tmp_path),
            save_interval_steps=1,
            **NO_SUMMARIES,
        )
    steps = sorted(
        int(f[len("model.ckpt-") : -len(".index")])
        for f in os.listdir(tmp_path)
        if f.endswith(".index")
    )
    assert steps == [1, 2, 3, 4]
    reader = tf.train.load_checkpoint(str(tmp_path / "model.ckpt-4"))
    for name, dtype in reader.get_variable_to_dtype_map().items():
        if dtype.is_floating:  # not the input iterator's variant state
            value = reader.get_tensor(name)
            assert np.all(np.isfinite(value)), name


def test_fail_on_nan_loss_false_goes_on(tmp_path):
    model = logistic_classifier()
    loss = keras_slim.train(
        model,
        nan_dataset(5, 10),
        logdir=str(tmp_path),
        fail_on_nan_loss=False,
        **NO_SUMMARIES,
    )
    assert np.isfinite(loss)
    # The skipped step 5 is a step: 10 batches, 10 steps.
    assert global_step(model) == 10
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("ckpt-10")


@pytest.mark.parametrize("is_chief", [True, False])
def test_startup_delay_without_parameter_servers_is_an_error(is_chief):
    # No other worker advances this process's global step: a wait for it
    # would never end (it did, for a non-chief).
    model = logistic_classifier()
    with pytest.raises(ValueError, match="staggers asynchronous workers"):
        keras_slim.train(
            model,
            dataset(),
            logdir=None,
            number_of_steps=10,
            startup_delay_steps=5,
            is_chief=is_chief,
        )
    assert global_step(model) == 0


def test_non_chief_writes_no_checkpoint_summary_or_trace(tmp_path):
    keras_slim.train(
        logistic_classifier(),
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=3,
        is_chief=False,
        save_summaries_steps=1,
        trace_every_n_steps=1,
    )
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"number_of_steps": 0}, ValueError, "Received: number_of_steps=0"),
        ({"number_of_steps": -3}, ValueError, "Received: number_of_steps=-3"),
        (
            {"save_interval_steps": 10},
            ValueError,
            "Cannot provide `save_interval_steps` because logdir=None",
        ),
        (
            {"trace_every_n_steps": 10},
            ValueError,
            "Cannot provide `trace_every_n_steps` because logdir=None",
        ),
        (
            {"save_summaries_steps": 10},
            ValueError,
            "Cannot provide `save_summaries_steps` because logdir=None",
        ),
        (
            {"save_interval_secs": 60},
            ValueError,
            "Cannot provide `save_interval_secs` because logdir=None",
        ),
        (
            {"keep_checkpoint_max": 2},
            ValueError,
            "Cannot provide `keep_checkpoint_max` because logdir=None",
        ),
        (
            {"startup_delay_steps": -1},
            ValueError,
            "Received: startup_delay_steps=-1",
        ),
        (
            {"fail_on_nan_loss": 1},
            ValueError,
            "Received: fail_on_nan_loss=1",
        ),
        ({"callbacks": ["x"]}, ValueError, "Received: callbacks=\\['x'\\]"),
        (
            {"warm_start": "/no/such/checkpoint"},
            FileNotFoundError,
            "/no/such/checkpoint",
        ),
        ({"warm_start": 3}, ValueError, "Received: warm_start=3"),
    ],
)
def test_bad_arguments_fail_before_any_step(kwargs, error, message, tmp_path):
    kwargs.setdefault("logdir", None)
    model = logistic_classifier()
    with pytest.raises(error, match=message):
        keras_slim.train(model, dataset(), **kwargs)
    assert global_step(model) == 0


def test_arrays_need_a_batch_size():
    with pytest.raises(ValueError, match="`batch_size` is not set"):
        keras_slim.train(logistic_classifier(), slim_data(), logdir=None)


def test_uncompiled_model():
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match="not compiled"):
        keras_slim.train(model, dataset(), logdir=None, number_of_steps=1)


def test_startup_delay_under_sync_multi_worker_strategy(monkeypatch):
    from keras_slim import _strategy

    multi_worker = _strategy.Mode(
        kind=_strategy.MULTI_WORKER, replicas_in_sync=1, chief=True
    )
    monkeypatch.setattr(_strategy, "mode", lambda s: multi_worker)
    with pytest.raises(ValueError, match="startup_delay_steps. must be 0"):
        keras_slim.train(
            logistic_classifier(),
            dataset(),
            logdir=None,
            number_of_steps=1,
            startup_delay_steps=1,
        )


def test_threads_are_not_left_behind():
    before = threading.active_count()
    keras_slim.train(
        logistic_classifier(), dataset(), logdir=None, number_of_steps=2
    )
    assert threading.active_count() <= before + 1


def test_train_writes_summaries_on_steps(tmp_path):
    from tests.callbacks.test_summaries import read_events

    keras_slim.train(
        logistic_classifier(),
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=6,
        save_summaries_steps=2,
        save_summaries_secs=None,
    )
    events = read_events(tmp_path)
    assert sorted(events["loss"]) == [2, 4, 6]
    assert {"loss", "learning_rate", "global_step/sec"} <= set(events)


NAN_FOREVER = textwrap.dedent(
    """
    import json, os, sys
    import keras, numpy as np, tensorflow as tf
    import keras_slim

    logdir = sys.argv[1]
    x = np.ones((16, 4), "float32")
    good = (x, np.zeros((16, 1), "float32"))
    bad = (x * np.inf, np.zeros((16, 1), "float32"))
    # Three finite batches, then a loss that is inf for good.
    data = (
        tf.data.Dataset.from_tensors(good)
        .repeat(3)
        .concatenate(tf.data.Dataset.from_tensors(bad).repeat())
    )
    results = {"auto": {}, "1": {}}
    for steps_per_execution, target in [
        (s, t) for s in results for t in (20, 50, 100)
    ]:
        keras.utils.set_random_seed(0)
        inputs = keras.Input((4,))
        model = keras_slim.SlimModel(inputs, keras.layers.Dense(1)(inputs))
        model.compile(
            optimizer="sgd",
            loss="mse",
            steps_per_execution=(
                "auto" if steps_per_execution == "auto"
                else int(steps_per_execution)
            ),
        )
        directory = os.path.join(logdir, steps_per_execution, str(target))
        keras_slim.train(
            model,
            data,
            logdir=directory,
            number_of_steps=target,
            fail_on_nan_loss=False,
            save_interval_steps=5,
            log_every_n_steps=None,
            save_summaries_secs=None,
        )
        results[steps_per_execution][target] = {
            "step": int(model.optimizer.iterations.numpy()),
            "checkpoints": sorted(
                int(f[len("model.ckpt-"):-len(".index")])
                for f in os.listdir(directory) if f.endswith(".index")
            ),
        }
    print(json.dumps(results))
    """
)


def test_a_loss_that_stays_inf_ends_at_number_of_steps(tmp_path):
    # In a subprocess (one for both variants): before skipped steps
    # counted, this hung (one step per call) or overshot (auto: 36, 68,
    # 113 for 20, 50, 100).
    run = subprocess.run(
        [sys.executable, "-c", NAN_FOREVER, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2"),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    results = json.loads(run.stdout.splitlines()[-1])
    assert sorted(results) == ["1", "auto"]
    for per_variant in results.values():
        for target, result in per_variant.items():
            target = int(target)
            assert result["step"] == target
            # The newest five multiples of 5 (max_to_keep=5).
            assert result["checkpoints"] == list(range(5, target + 1, 5))[-5:]
    assert "skipped so far" in run.stderr


def test_empty_data_is_an_error_before_any_file(tmp_path):
    model = logistic_classifier()
    empty = dataset().take(0)
    logdir = tmp_path / "run"
    with pytest.raises(ValueError, match="yields no batch: the dataset is"):
        keras_slim.train(model, empty, logdir=str(logdir), number_of_steps=5)
    x, y = slim_data()
    with pytest.raises(ValueError, match="x and y have 0 examples"):
        keras_slim.train(
            model, (x[:0], y[:0]), logdir=str(logdir), batch_size=4
        )
    assert not logdir.exists()
    # Of unknown length (a filter): found empty when it ends, with no
    # step and no checkpoint written.
    unknown = dataset(4).filter(lambda x, y: False)
    with pytest.raises(ValueError, match="yielded no batch, so no step ran"):
        keras_slim.train(model, unknown, logdir=str(logdir), **NO_SUMMARIES)
    assert not list(logdir.glob("model.ckpt*"))
    assert global_step(model) == 0


def test_x_and_y_of_different_lengths_name_both(tmp_path):
    x, y = np.zeros((64, 4), "float32"), np.zeros((60, 1), "float32")
    with pytest.raises(ValueError, match="x has 64 examples, y has 60"):
        keras_slim.train(
            logistic_classifier(), (x, y), logdir=str(tmp_path), batch_size=8
        )


def test_text_for_a_numeric_input_names_the_dtypes(tmp_path):
    x = np.array([["a", "b", "c", "d"]] * 8)
    y = np.zeros((8, 1), "float32")
    with pytest.raises(ValueError, match="x holds strings .dtype string.*"):
        keras_slim.train(
            logistic_classifier(), (x, y), logdir=str(tmp_path), batch_size=4
        )
    assert not list(tmp_path.glob("model.ckpt*"))


@pytest.mark.parametrize("rate", [float("inf"), float("nan"), 0.0, -0.5])
def test_a_bad_learning_rate_fails_before_the_first_step(tmp_path, rate):
    model = logistic_classifier(learning_rate=rate)
    with pytest.raises(ValueError, match=f"Received: learning_rate={rate}"):
        keras_slim.train(
            model, dataset(), logdir=str(tmp_path), number_of_steps=2
        )
    assert global_step(model) == 0
    assert not list(tmp_path.glob("model.ckpt*"))


def checkpoint_steps(directory):
    return sorted(
        int(f[len("model.ckpt-") : -len(".index")])
        for f in os.listdir(directory)
        if f.endswith(".index")
    )


def test_steps_is_relative_number_of_steps_absolute(tmp_path):
    # contrib.learn's fit(steps=...) and fit(max_steps=...).
    model = logistic_classifier()
    keras_slim.train(
        model, dataset(), logdir=str(tmp_path), steps=4, **NO_SUMMARIES
    )
    assert global_step(model) == 4
    keras_slim.train(
        model, dataset(), logdir=str(tmp_path), steps=3, **NO_SUMMARIES
    )
    assert global_step(model) == 7
    # A new process's model resumes at 7, then runs 3 more.
    rerun = logistic_classifier()
    keras_slim.train(
        rerun, dataset(), logdir=str(tmp_path), steps=3, **NO_SUMMARIES
    )
    assert global_step(rerun) == 10
    # number_of_steps is where to stop: a rerun past it runs nothing.
    keras_slim.train(
        rerun,
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=np.int64(10),
        **NO_SUMMARIES,
    )
    assert global_step(rerun) == 10
    with pytest.raises(ValueError, match="Cannot provide both `steps`"):
        keras_slim.train(
            rerun, dataset(), logdir=None, steps=2, number_of_steps=20
        )


def test_numpy_integers_are_accepted_and_errors_name_the_argument(tmp_path):
    model = logistic_classifier()
    keras_slim.train(
        model,
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=np.int64(3),
        log_every_n_steps=np.int32(1),
        save_interval_steps=np.int64(1),
        keep_checkpoint_max=np.int64(2),
        **NO_SUMMARIES,
    )
    assert global_step(model) == 3
    assert checkpoint_steps(tmp_path) == [2, 3]
    with pytest.raises(
        ValueError, match=r"Received: number_of_steps=np.int64\(-3\)"
    ):
        keras_slim.train(
            model, dataset(), logdir=None, number_of_steps=np.int64(-3)
        )
    with pytest.raises(ValueError, match="Received: steps=0"):
        keras_slim.train(model, dataset(), logdir=None, steps=0)


@pytest.mark.parametrize("keep", [0, None])
def test_keep_checkpoint_max_0_or_none_keeps_all(tmp_path, keep):
    keras_slim.train(
        logistic_classifier(),
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=7,
        save_interval_steps=1,
        keep_checkpoint_max=keep,
        **NO_SUMMARIES,
    )
    assert checkpoint_steps(tmp_path) == [1, 2, 3, 4, 5, 6, 7]


def test_keep_checkpoint_every_n_hours_keeps_more_than_max(tmp_path):
    # Every 3.6 microseconds: each checkpoint is kept as an hourly one.
    for logdir, hours in (("hourly", 1e-9), ("recent", None)):
        keras_slim.train(
            logistic_classifier(),
            dataset(),
            logdir=str(tmp_path / logdir),
            number_of_steps=5,
            save_interval_steps=1,
            keep_checkpoint_max=1,
            keep_checkpoint_every_n_hours=hours,
            **NO_SUMMARIES,
        )
    assert checkpoint_steps(tmp_path / "hourly") == [1, 2, 3, 4, 5]
    assert checkpoint_steps(tmp_path / "recent") == [5]
    with pytest.raises(ValueError, match="keep_checkpoint_every_n_hours"):
        keras_slim.train(
            logistic_classifier(),
            dataset(),
            logdir=None,
            keep_checkpoint_every_n_hours=1.0,
        )


def test_train_writes_train_image_classifier_summaries(tmp_path):
    from tests.callbacks.test_summaries import read_events

    keras_slim.train(
        logistic_classifier(),
        dataset(),
        logdir=str(tmp_path),
        number_of_steps=4,
        save_summaries_steps=2,
        save_summaries_secs=None,
        summarize_variables=True,
        summarize_activations=True,
        summarize_gradients=True,
    )
    events = read_events(tmp_path)
    expected = {
        "loss",
        "learning_rate",
        "global_step/sec",
        "losses/total_loss",
        "losses/regularization_loss",
        "losses/binary_crossentropy",
        "fc/kernel",  # variable histograms
        "fc/bias",
        "activations/fc",  # activation histogram and sparsity
        "sparsity/fc",
        "fc/kernel/gradient",  # gradients after the policy
        "fc/kernel/gradient_norm",
    }
    assert expected <= set(events)
    for tag in expected:
        assert sorted(events[tag]) == [2, 4], tag
    with pytest.raises(ValueError, match="Received: summarize_gradients=1"):
        keras_slim.train(
            logistic_classifier(),
            dataset(),
            logdir=str(tmp_path),
            summarize_gradients=1,
        )
