"""The best checkpoint kept in `best/`: keras-slim-train --keep_best and
keras-slim-eval (on by default), against an independent evaluation of
every checkpoint; reruns; a swap that fails or a crash in it."""

import functools
import json
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import checkpoints
from keras_slim import training_state
from keras_slim.image import _best_checkpoint
from keras_slim.image import eval_image_classifier as eval_cli
from keras_slim.image import evaluation
from keras_slim.image import nets
from keras_slim.image import train_image_classifier as train_cli
from tests.checkpoint_files import slim_values
from tests.checkpoint_files import write_tf1

STEPS = ("2", "4", "6")
TRAIN = [
    *["--max_number_of_steps", STEPS[-1], "--batch_size", "16"],
    *["--moving_average_decay", "0.9", "--keep_checkpoint_max", "0"],
    # No activation histograms, summaries at the first step only: what
    # is compared is the checkpoints (and KeepBest writes no summary).
    *["--nosummarize_activations", "--save_summaries_secs", "3600"],
]


def _not_evaluated(model, flags, task):
    return math.nan, 0


def _train(directory, *extra):
    """keras-slim-train in this process, saving every 2 steps (the
    command saves on time only). The evaluation after the last step (its
    printed accuracy, after the last checkpoint) is skipped in both runs:
    no test here reads it, KeepBest's at each save are kept."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            keras_slim,
            "train",
            functools.partial(keras_slim.train, save_interval_steps=2),
        )
        patch.setattr(train_cli, "_held_out", _not_evaluated)
        code = train_cli.main(["--train_dir", str(directory), *TRAIN, *extra])
    assert code == 0
    return directory


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The same training with and without --keep_best."""
    root = tmp_path_factory.mktemp("best")
    return _train(root / "keep", "--keep_best"), _train(root / "plain")


@pytest.fixture(scope="module")
def held_out():
    return train_cli._held_out_task(train_cli.parser().parse_args([]))


def _reference(prefix, task):
    """A checkpoint restored into a network of its own and evaluated."""
    net = nets.build("digits_cnn", 10)
    step, averaged = training_state.restore_for_inference(net, prefix)
    assert averaged  # --moving_average_decay: the averages are evaluated
    return step, evaluation.evaluate(net, task.make_dataset(None))["accuracy"]


@pytest.fixture(scope="module")
def accuracies(runs, held_out):
    """`{prefix: (step, accuracy)}` of every checkpoint of the run."""
    found = checkpoints_of(runs[0])
    assert [step for step, _ in found] == [int(s) for s in STEPS]
    return {prefix: _reference(prefix, held_out) for _, prefix in found}


def checkpoints_of(directory):
    from keras_slim import _checkpoint_dir

    return _checkpoint_dir.checkpoint_files(
        str(directory), training_state.CHECKPOINT_NAME
    )


def _info(directory):
    with open(os.path.join(directory, "best", "best.json")) as file:
        return json.load(file)


def test_train_keeps_the_checkpoint_of_the_best_held_out_accuracy(
    runs, accuracies, held_out
):
    info = _info(runs[0])
    values = [accuracy for _, accuracy in accuracies.values()]
    first_max = list(accuracies)[values.index(max(values))]
    assert info["metric"] == "accuracy" and info["higher_is_better"]
    assert info["value"] == max(values)
    assert info["source"] == first_max
    assert info["global_step"] == accuracies[first_max][0]
    assert info["checkpoint"] == os.path.basename(first_max)
    # A checkpoint directory of its own, restorable.
    best = str(runs[0] / "best")
    assert tf.train.latest_checkpoint(best) == os.path.join(
        best, info["checkpoint"]
    )
    assert checkpoints.checkpoint_format(best) == "tf2"
    step, accuracy = _reference(tf.train.latest_checkpoint(best), held_out)
    assert (step, accuracy) == (info["global_step"], info["value"])
    assert not (runs[1] / "best").exists()  # off by default


def test_keep_best_leaves_training_bitwise_the_same(runs):
    """With moving averages: every saved variable (weights, averages,
    slots, the step, the input position's counters) of every checkpoint
    equal to the bit."""
    keep, plain = checkpoints_of(runs[0]), checkpoints_of(runs[1])
    assert [s for s, _ in keep] == [s for s, _ in plain]
    for (_, a), (_, b) in zip(keep, plain):
        first, second = tf.train.load_checkpoint(a), tf.train.load_checkpoint(b)
        dtypes = first.get_variable_to_dtype_map()
        assert dtypes == second.get_variable_to_dtype_map()
        # The data iterator's state (a variant) is not read back as values.
        names = [n for n, dtype in dtypes.items() if dtype != tf.variant]
        assert len(names) > 20
        for name in names:
            np.testing.assert_array_equal(
                first.get_tensor(name), second.get_tensor(name), err_msg=name
            )


def _eval(prefix, eval_dir, *extra):
    return eval_cli.main(
        ["--checkpoint_path", prefix, "--eval_dir", str(eval_dir), *extra]
    )


def test_eval_keeps_the_best_across_reruns(accuracies, tmp_path, capsys):
    """Evaluated one by one, in the order middle, worst, best: the worse
    one keeps the best so far, the better one replaces it."""
    by_accuracy = sorted(accuracies, key=lambda p: accuracies[p][1])
    assert len({accuracies[p][1] for p in by_accuracy}) == len(STEPS)
    worst, middle, best = by_accuracy[0], by_accuracy[1], by_accuracy[-1]
    kept = []
    for prefix in (middle, worst, best):
        assert _eval(prefix, tmp_path) == 0
        step, accuracy = accuracies[prefix]
        out = capsys.readouterr().out
        assert f"global step {step}: eval/Accuracy = {accuracy:.4f}" in out
        kept.append((_info(tmp_path)["source"], _info(tmp_path)["value"]))
    assert kept == [
        (middle, accuracies[middle][1]),
        (middle, accuracies[middle][1]),
        (best, accuracies[best][1]),
    ]
    assert sorted(os.listdir(tmp_path / "best")) == [
        "best.json",
        "checkpoint",
        *sorted(os.path.basename(p) for p in tf.io.gfile.glob(best + ".*")),
    ]
    # The same again (a tie): the earlier stays, its time unchanged.
    before = _info(tmp_path)
    assert _eval(best, tmp_path) == 0
    assert _info(tmp_path) == before
    # The best directory evaluates, and keeps nothing of its own.
    other = tmp_path / "of_best"
    assert _eval(str(tmp_path / "best"), other) == 0
    step, accuracy = accuracies[best]
    out = capsys.readouterr().out
    assert f"global step {step}: eval/Accuracy = {accuracy:.4f}" in out
    assert not (other / "best").exists()
    # --nokeep_best keeps nothing.
    assert _eval(best, tmp_path / "off", "--nokeep_best") == 0
    assert not (tmp_path / "off" / "best").exists()


def test_a_best_of_another_metric_is_an_error_naming_both(
    accuracies, tmp_path, capsys
):
    prefix = next(iter(accuracies))
    assert _eval(prefix, tmp_path) == 0
    capsys.readouterr()
    assert _eval(prefix, tmp_path, "--best_metric", "loss") == 2
    err = capsys.readouterr().err
    assert (
        f"{str(tmp_path / 'best')!r} holds the best checkpoint by 'accuracy'"
    ) in err
    assert "not by --best_metric='loss'" in err
    assert _info(tmp_path)["metric"] == "accuracy"


def test_loss_is_kept_lower_better(accuracies, held_out, tmp_path):
    results = {}
    keeper = _best_checkpoint.BestCheckpoint.open(tmp_path, metric="loss")
    net = nets.build("digits_cnn", 10)
    evaluate = evaluation.Evaluator(net)  # traced once, for each restore
    for prefix in accuracies:
        step, _ = training_state.restore_for_inference(net, prefix)
        results[prefix] = evaluate(held_out.make_dataset(None))
        keeper.consider(prefix, step=step, results=results[prefix])
    lowest = min(results, key=lambda p: results[p]["loss"])
    assert _info(tmp_path)["source"] == lowest
    assert _info(tmp_path)["higher_is_better"] is False


@pytest.mark.parametrize(
    "metric, best, value, better",
    [
        ("accuracy", None, 0.0, True),
        ("accuracy", 0.5, 0.6, True),
        ("accuracy", 0.5, 0.5, False),  # a tie keeps the earlier
        ("accuracy", 0.5, 0.4, False),
        ("accuracy", None, math.nan, False),
        ("loss", 1.0, 0.9, True),
        ("loss", 1.0, 1.0, False),
        ("loss", 1.0, 1.1, False),
        ("loss", 1.0, math.inf, False),
    ],
)
def test_is_better(metric, best, value, better, tmp_path):
    keeper = _best_checkpoint.BestCheckpoint(tmp_path, metric=metric)
    keeper.info = None if best is None else {"value": best}
    assert keeper.is_better(value) is better


def _keep(tmp_path, prefix, value):
    keeper = _best_checkpoint.BestCheckpoint.open(tmp_path)
    results = {"accuracy": value, "loss": 1.0, "recall_5": None}
    return keeper.consider(prefix, step=1, results=results)


@pytest.mark.parametrize("fail", ["copyfile", "replace"])
def test_a_failed_swap_leaves_the_previous_best(
    accuracies, tmp_path, monkeypatch, fail
):
    """A copy that fails part way (a full disk), or the rename of the new
    copy: the best before stays whole and restorable, no temp is left."""
    first, second = list(accuracies)[:2]
    assert _keep(tmp_path, first, 0.5)
    real = getattr(_best_checkpoint.shutil, fail, None) or os.replace
    calls = []

    def failing(source, target, *args, **kwargs):
        calls.append(target)
        if fail == "copyfile" and len(calls) == 2:
            raise OSError(28, "No space left on device")
        if fail == "replace" and os.path.basename(source).startswith(
            "best.tmp-"
        ):
            raise OSError(5, "Input/output error")
        return real(source, target, *args, **kwargs)

    if fail == "copyfile":
        monkeypatch.setattr(_best_checkpoint.shutil, "copyfile", failing)
    else:
        monkeypatch.setattr(_best_checkpoint.os, "replace", failing)
    with pytest.raises(OSError):
        _keep(tmp_path, second, 0.9)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == ["best"]
    assert _info(tmp_path)["source"] == first
    best = tf.train.latest_checkpoint(str(tmp_path / "best"))
    assert training_state.restore_for_inference(
        nets.build("digits_cnn", 10), best
    ) == (accuracies[first][0], True)


def test_a_crash_in_the_swap_is_recovered_at_the_next_start(
    accuracies, tmp_path
):
    """Killed between renaming the old best aside and the new one in:
    the next start renames the old one back and removes the temp copy;
    killed after both renames: it deletes the old one."""
    first, second = list(accuracies)[:2]
    assert _keep(tmp_path, first, 0.5)
    os.replace(tmp_path / "best", tmp_path / "best.old")
    (tmp_path / "best.tmp-999999").mkdir()
    keeper = _best_checkpoint.BestCheckpoint.open(tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["best"]
    assert keeper.info["source"] == first
    shutil.copytree(tmp_path / "best", tmp_path / "best.old")
    assert _keep(tmp_path, second, 0.9)
    assert sorted(os.listdir(tmp_path)) == ["best"]
    assert _info(tmp_path)["source"] == second


def test_a_tf_slim_checkpoint_is_kept_as_one(tmp_path):
    prefix = write_tf1(tmp_path / "slim" / "model.ckpt", slim_values())
    assert _keep(tmp_path, prefix, 0.5)
    best = str(tmp_path / "best")
    assert tf.train.latest_checkpoint(best) == os.path.join(best, "model.ckpt")
    assert checkpoints.checkpoint_format(best) == "tf1"
    source = dict(tf.train.list_variables(prefix))
    assert dict(tf.train.list_variables(best)) == source


@pytest.mark.parametrize(
    "main, args, message",
    [
        (
            eval_cli.main,
            ["--best_metric", "top1"],
            "value should be one of <accuracy|recall_5|loss>",
        ),
        (
            train_cli.main,
            ["--best_metric", "top1"],
            "value should be one of <accuracy|recall_5|loss>",
        ),
        (
            train_cli.main,
            ["--train_dir", "TMP", "--keep_best", "--num_ps_tasks", "1"],
            "flag --keep_best: not with parameter servers",
        ),
    ],
)
def test_bad_flags(main, args, message, tmp_path, capsys):
    args = [str(tmp_path) if a == "TMP" else a for a in args]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_recall_5_needs_more_than_5_classes(tmp_path, capsys):
    code = train_cli.main(
        [
            *["--train_dir", str(tmp_path), "--labels", "0-4"],
            *["--keep_best", "--best_metric", "recall_5"],
        ]
    )
    assert code == 2
    assert (
        "flag --best_metric: recall_5 (top-5) needs more than 5 classes; "
        "the dataset has 5. Valid: accuracy, loss"
    ) in capsys.readouterr().err
    assert not list(tmp_path.glob("model.ckpt*"))
