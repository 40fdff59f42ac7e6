"""keras-slim-train then keras-slim-eval on a user's images: a folder of
class subfolders and TF-Slim's TFRecord shards, generated here; the flags'
help; the warm start from a TF-Slim checkpoint the command picks."""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_slim import checkpoints
from keras_slim import training_state
from keras_slim.image import datasets
from keras_slim.image import eval_image_classifier as eval_cli
from keras_slim.image import evaluation
from keras_slim.image import nets
from keras_slim.image import train_image_classifier as train_cli
from tests.callbacks.test_summaries import read_events
from tests.checkpoint_files import write_tf1
from tests.checkpoint_files import write_tf2

pytestmark = pytest.mark.prestarted  # tests/zygote.py

ENV = {"TF_CPP_MIN_LOG_LEVEL": "3"}
CLASSES = ["red", "green", "blue"]


def colored_images(per_class=30, size=24, seed=0):
    """Three classes told apart by color, with noise."""
    rng = np.random.default_rng(seed)
    colors = np.array([[200, 30, 30], [30, 200, 30], [30, 30, 200]])
    labels = np.repeat(np.arange(3), per_class)
    noise = rng.normal(0, 40, (len(labels), size, size, 3))
    images = np.clip(colors[labels][:, None, None, :] + noise, 0, 255)
    return images.astype("uint8"), labels


# The folder's train and eval run in docs/tutorials/your_images.md.
@pytest.fixture(scope="module", params=["tfrecord"])
def dataset(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(request.param)
    images, labels = colored_images()
    if request.param == "folder":
        datasets.write_image_folder(
            images, labels, root / "data", class_names=CLASSES
        )
    else:
        for split, keep in (("train", slice(None)), ("validation", slice(5))):
            datasets.write_tfrecords(
                images[keep],
                labels[keep],
                root / "data",
                name="colors",
                split=split,
                shards=2,
                class_names=CLASSES,
            )
    return request.param, root


def test_train_then_eval(dataset, capsys):
    """The commands' `main`s in this process (their exits are tested in
    subprocesses elsewhere: the demo, the kills, the TF-Slim checkpoint's
    fine-tuning below)."""
    kind, root = dataset
    data = str(root / "data")
    train_dir = root / "train"
    code = train_cli.main(
        [
            *["--train_dir", str(train_dir), "--dataset_dir", data],
            *["--dataset_name", "colors", "--train_image_size", "16"],
            *["--batch_size", "16", "--max_number_of_steps", "60"],
            *["--optimizer", "adam", "--learning_rate", "0.005"],
            *["--opt_epsilon", "1e-7", "--log_every_n_steps", "30"],
            *["--save_summaries_steps", "6", "--nosummarize_activations"],
        ]
    )
    trained = capsys.readouterr()
    assert code == 0, trained.err[-3000:]
    assert "global step 60: loss = " in trained.out
    held_out = next(
        line for line in trained.out.splitlines() if "held-out" in line
    )
    # The folder holds out 20% of each class; the shards, a split of 5.
    expected = 18 if kind == "folder" else 5
    assert f"on {expected} images (global step 60)" in held_out
    events = read_events(train_dir)
    assert len(events["loss"]) >= 10 and len(events["learning_rate"]) >= 10

    code = eval_cli.main(
        [
            *["--checkpoint_path", str(train_dir), "--dataset_dir", data],
            *["--eval_image_size", "16"],
        ]
    )
    evaluated = capsys.readouterr()
    assert code == 0, evaluated.err[-3000:]
    line, kept = evaluated.out.strip().splitlines()[-2:]
    assert line.startswith("global step 60: eval/Accuracy = ")
    assert kept.startswith("best | accuracy: ") and "global step: 60" in kept
    accuracy = float(line.split("eval/Accuracy = ")[1].split(",")[0])
    assert accuracy > 0.9  # chance is 1/3
    assert f"({expected} images)" in line
    assert "Recall_5" not in line  # 3 classes: no top-5
    eval_events = read_events(train_dir / "eval")
    assert float(eval_events["eval/Accuracy"][60]) == pytest.approx(accuracy)


#: TF-Slim's own inception_v2 (tf_slim.nets), 3 classes, for the commands
#: (tests/image/conftest.py runs it).
SPECS = [
    {
        "name": "inception_v2_3_classes",
        "module": "inception_v2",
        "function": "inception_v2",
        "arg_scope": "inception_v2_arg_scope",
        "num_classes": 3,
        "image_size": 32,
        "batch": 2,
        "features": "Mixed_5c",
        "checkpoint": True,
    }
]


def test_fine_tune_then_evaluate_a_tf_slim_checkpoint(slim, dataset, capsys):
    """TF-Slim README's fine-tuning command, its flags as written there,
    on TF-Slim's own inception_v2 checkpoint, in a subprocess (the
    command's exit); then keras-slim-eval on that checkpoint itself (the
    migration check), its `main` in this process (its exit is tested in a
    subprocess by test_eval_equals_tf_slim.py)."""
    _, root = dataset
    data = str(root / "data")
    checkpoint = str(slim / "inception_v2_3_classes" / "model.ckpt")
    train_dir = root / "fine_tuned"
    common = [
        f"--dataset_dir={data}",
        "--dataset_name=colors",
        "--model_name=inception_v2",
    ]
    training = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "keras_slim.image.train_image_classifier",
            f"--train_dir={train_dir}",
            *common,
            f"--checkpoint_path={checkpoint}",
            "--checkpoint_exclude_scopes=InceptionV2/Logits",
            "--trainable_scopes=InceptionV2/Logits",
            "--train_image_size=32",
            "--max_number_of_steps=4",
            "--batch_size=8",
            "--nosummarize_activations",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **ENV),
    )
    # The evaluation reads TF-Slim's checkpoint, not the fine-tuned one:
    # it runs while the fine-tuning does.
    try:
        code = eval_cli.main(
            [f"--checkpoint_path={checkpoint}", *common, "--eval_image_size=32"]
        )
    finally:
        _, trained = training.communicate(timeout=300)
    evaluated = capsys.readouterr()
    assert training.returncode == 0, trained[-3000:]
    reader = tf.train.load_checkpoint(checkpoint)
    name_map = nets.slim_name_map("inception_v2")
    model = nets.build("inception_v2", 3, image_size=32)
    training_state.restore_for_inference(
        model, tf.train.latest_checkpoint(str(train_dir))
    )
    for variable in model.trainable_variables:
        saved = reader.get_tensor(name_map(variable.path))
        if variable.path.startswith("Logits."):
            assert not np.array_equal(variable.numpy(), saved)  # trained
        else:
            np.testing.assert_array_equal(variable.numpy(), saved)

    assert code == 0, evaluated.err[-3000:]
    line, kept = evaluated.out.strip().splitlines()[-2:]
    assert line.startswith("global step 0: eval/Accuracy = "), line
    assert kept.startswith("best | accuracy: "), kept  # a TF-Slim checkpoint
    accuracy = float(line.split("eval/Accuracy = ")[1].split(",")[0])
    var_map = {
        name_map(v.path): v for v in checkpoints.variables_to_restore(model)
    }
    checkpoints.assign_from_checkpoint(var_map, checkpoint)
    images = datasets.load(
        data,
        "validation",
        image_size=32,
        batch_size=100,
        is_training=False,
        preprocessing_name="inception",
    )
    expected = evaluation.evaluate(model, images.dataset)["accuracy"]
    assert accuracy == pytest.approx(expected, abs=1e-6)


def test_a_bad_dataset_dir_is_exit_2_naming_it(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code = train_cli.main(
        [
            *["--train_dir", str(tmp_path / "t"), "--dataset_dir"],
            str(tmp_path / "empty"),
        ]
    )
    assert code == 2
    assert str(tmp_path / "empty") in capsys.readouterr().err
    assert not (tmp_path / "t").exists() or not list(
        (tmp_path / "t").glob("model.ckpt*")
    )


@pytest.mark.parametrize(
    "main, args, message",
    [
        (
            train_cli.main,
            ["--model_name", "inception_v3", "--train_image_size", "16"],
            "flag --train_image_size: inception_v3 takes images of at "
            "least 107 pixels, got 16",
        ),
        (
            train_cli.main,
            ["--dataset_name", "flowers"],
            "flag --dataset_name: 'flowers' needs --dataset_dir",
        ),
        (
            train_cli.main,
            ["--model_name", "nasnet_large"],
            "flag --model_name=nasnet_large: value should be one of "
            "<digits_cnn|",
        ),
        (
            eval_cli.main,
            ["--checkpoint_path", "/no/such/dir"],
            "flag --checkpoint_path: '/no/such/dir' is neither",
        ),
        (
            eval_cli.main,
            ["--preprocessing_name", "resnet"],
            "flag --preprocessing_name=resnet: value should be one of",
        ),
    ],
)
def test_bad_flags(main, args, message, tmp_path, capsys):
    if main is train_cli.main:
        args = ["--train_dir", str(tmp_path), *args]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_eval_with_no_checkpoint_is_exit_2(tmp_path, capsys):
    assert eval_cli.main(["--checkpoint_path", str(tmp_path)]) == 2
    assert f"No checkpoint in --checkpoint_path={str(tmp_path)!r}" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("parser", [train_cli.parser, eval_cli.parser])
def test_every_flag_has_help(parser):
    p = parser()
    assert len(p.flags()) > 20
    assert [flag.name for flag in p.flags() if not flag.help] == []


def test_the_warm_start_reads_tf_slim_names_and_scopes(tmp_path, source):
    """A TF1 checkpoint is read through the net's TF-Slim name map, and
    scopes as TF-Slim's README writes them select the same variables; a
    keras_slim (TF2) checkpoint keeps the Keras paths."""
    prefix = write_tf1(
        tmp_path / "mobilenet_v1.ckpt",
        {"MobilenetV1/Conv2d_0/weights": np.ones((3, 3, 3, 8), "float32")},
    )
    flags = train_cli.parser().parse_args(
        [
            "--train_dir",
            str(tmp_path / "t"),
            "--model_name",
            "mobilenet_v1_025",
            "--checkpoint_path",
            prefix,
            "--checkpoint_exclude_scopes",
            "MobilenetV1/Logits,MobilenetV1/Conv2d_13_pointwise",
        ]
    )
    warm = train_cli._warm_start(flags)
    assert warm._name_map("Conv2d_0/kernel") == "MobilenetV1/Conv2d_0/weights"
    assert warm.exclude == ["Logits.*", "Conv2d_13_pointwise.*"]
    tf2 = tmp_path / "model.ckpt-3"
    source_prefix = write_tf2(tf2, source)
    flags.checkpoint_path = source_prefix
    assert train_cli._warm_start(flags)._name_map is None


def _digits_checkpoint(directory, step):
    """A training checkpoint of the default network, as training writes."""
    import keras
    import tensorflow as tf

    from keras_slim import training_state

    model = nets.build("digits_cnn", 10)
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    model.optimizer.build(model.trainable_variables)
    model.optimizer.iterations.assign(step)
    manager = tf.train.CheckpointManager(
        training_state.training_checkpoint(model),
        str(directory),
        5,
        checkpoint_name=training_state.CHECKPOINT_NAME,
    )
    return manager.save(checkpoint_number=step)


def test_the_eval_loop_stops_when_no_checkpoint_comes(tmp_path, capsys):
    import time

    _digits_checkpoint(tmp_path, 7)
    began = time.monotonic()
    code = eval_cli.main(
        [
            "--checkpoint_path",
            str(tmp_path),
            "--eval_interval_secs",
            "0.2",
            "--timeout",
            "1",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert out.count("global step 7: eval/Accuracy = ") == 1
    assert "no new checkpoint in" in out and "for 1 s (--timeout)" in out
    assert time.monotonic() - began < 60
    # --max_number_of_steps reached: no wait for another checkpoint.
    began = time.monotonic()
    eval_cli.main(
        [
            "--checkpoint_path",
            str(tmp_path),
            "--eval_interval_secs",
            "0.2",
            "--timeout",
            "30",
            "--max_number_of_steps",
            "7",
        ]
    )
    assert time.monotonic() - began < 25
    assert "no new checkpoint" not in capsys.readouterr().out


def test_eval_uses_the_moving_averages_a_checkpoint_holds(tmp_path):
    """--moving_average_decay: every checkpoint holds the averages by
    path, and the evaluation restores them over the trained weights."""
    import keras
    import tensorflow as tf

    from keras_slim import _keras_optimizer
    from keras_slim import checkpoints
    from keras_slim import training_state

    model = nets.build("digits_cnn", 10)
    model.compile(
        optimizer=keras.optimizers.Adam(use_ema=True, ema_momentum=0.9),
        loss="mse",
    )
    saved = training_state.training_checkpoint(model)  # builds the averages
    averages = _keras_optimizer.moving_averages(model.optimizer)
    assert len(averages) == len(model.trainable_variables) > 0
    for i, (variable, average) in enumerate(averages):
        variable.assign(tf.zeros_like(variable))
        average.assign(tf.fill(average.shape, float(i + 1)))
    prefix = saved.save(str(tmp_path / "model.ckpt"))
    names = {v.name for v in checkpoints.list_variables(prefix)}
    assert "averages/logits/kernel" in names

    fresh = nets.build("digits_cnn", 10)
    step, used = training_state.restore_for_inference(fresh, prefix)
    assert (step, used) == (0, True)
    for i, variable in enumerate(fresh.trainable_variables):
        np.testing.assert_array_equal(variable.numpy(), float(i + 1))
    # Batch-norm statistics (not trainable) come from the model's values.
    moving = [v for v in fresh.variables if "moving_mean" in v.path]
    assert moving and all(np.all(v.numpy() == 0) for v in moving)


def test_a_checkpoint_path_that_is_not_a_checkpoint_is_refused(
    bad_checkpoint, tmp_path, capsys
):
    """Refused before evaluating, naming it (tests/image/conftest.py)."""
    path, said = bad_checkpoint
    eval_dir = tmp_path / "eval"
    try:
        code = eval_cli.main(
            ["--checkpoint_path", path, "--eval_dir", str(eval_dir)]
        )
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2
    captured = capsys.readouterr()
    assert said["eval"] in captured.err
    assert "Traceback" not in captured.err
    assert "eval/Accuracy" not in captured.out


def test_a_checkpoint_unreadable_at_the_restore_is_named(
    tmp_path, capsys, monkeypatch
):
    """A checkpoint whose index reads but whose data does not (TensorFlow
    raises at the restore): exit 2 naming it, nothing evaluated."""
    import tensorflow as tf

    from keras_slim import training_state

    prefix = _digits_checkpoint(tmp_path, 3)

    def unreadable(model, path):
        raise tf.errors.DataLossError(None, None, "Read less bytes")

    monkeypatch.setattr(training_state, "restore_for_inference", unreadable)
    assert eval_cli.main(["--checkpoint_path", prefix]) == 2
    captured = capsys.readouterr()
    assert (
        f"keras-slim-eval: error: The checkpoint {prefix!r} could not be "
        "read (Read less bytes): it is not a checkpoint, or a truncated"
    ) in captured.err
    assert "eval/Accuracy" not in captured.out


def test_a_keras_weights_file_is_refused(tmp_path, capsys):
    path = str(tmp_path / "digits.weights.h5")
    nets.build("digits_cnn", 10).save_weights(path)
    with pytest.raises(SystemExit) as exit_info:
        eval_cli.main(["--checkpoint_path", path])
    assert exit_info.value.code == 2
    assert (
        f"flag --checkpoint_path: {path!r} is a Keras weights file; "
        "keras-slim-eval evaluates checkpoints"
    ) in capsys.readouterr().err


def test_an_image_that_does_not_decode_is_named_by_both_commands(
    tmp_path, capsys
):
    """Deeper than the first image of its class, it fails at the read;
    the command names the file and exits 2, without a traceback."""
    data = tmp_path / "data"
    for split, seed in (("train", 0), ("validation", 1)):
        images, labels = colored_images(per_class=4, size=16, seed=seed)
        datasets.write_image_folder(
            images, labels, data / split, class_names=CLASSES
        )
    common = ["--dataset_dir", str(data), "--batch_size", "4"]
    train_dir = str(tmp_path / "train")
    train = [
        *["--train_dir", train_dir, "--train_image_size", "16", *common],
        *["--nosummarize_activations", "--max_number_of_steps"],
    ]
    assert train_cli.main([*train, "2"]) == 0
    damaged = {}
    for split in ("train", "validation"):
        damaged[split] = sorted((data / split / "green").iterdir())[-1]
        damaged[split].write_bytes(damaged[split].read_bytes()[:40])
    capsys.readouterr()

    evaluate = ["--checkpoint_path", train_dir, "--eval_image_size", "16"]
    assert eval_cli.main([*evaluate, *common]) == 2
    captured = capsys.readouterr()
    assert (
        "keras-slim-eval: error: 1 image does not decode:\n  "
        f"{str(damaged['validation'])!r}: Invalid PNG"
    ) in captured.err
    assert "\nRemove or replace each file" in captured.err
    assert "Traceback" not in captured.err
    assert "eval/Accuracy" not in captured.out

    # A fresh run: one resumed from train_dir goes on from its saved
    # input position, whose iterator state holds the batches read ahead
    # before the damage (a resumed run with 9 of the 12 images damaged
    # trained its 10 steps on them, as the uninterrupted run would have),
    # and the held-out evaluation then named the validation image.
    fresh = ["--train_dir", str(tmp_path / "fresh"), *train[2:]]
    assert train_cli.main([*fresh, "12"]) == 2
    err = capsys.readouterr().err
    assert (
        "keras-slim-train: error: 1 image does not decode:\n  "
        f"{str(damaged['train'])!r}: Invalid PNG"
    ) in err
    assert "Traceback" not in err


def test_an_evaluator_reuses_its_step_and_starts_afresh():
    """Each checkpoint a following eval or `--keep_best` evaluates reuses
    the evaluator's traced step (no retracing per checkpoint), each call
    counts only its own batches (the results equal numpy's count), and
    nothing but the evaluator keeps the model alive."""
    import gc
    import weakref

    import keras

    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6)])
    rng = np.random.default_rng(0)
    first, second = (
        (
            rng.normal(size=(n, 4)).astype("float32"),
            np.eye(6, dtype="float32")[rng.integers(0, 6, n)],
        )
        for n in (10, 7)
    )

    def expected(net, images, labels):
        logits = net.predict(images, verbose=0)
        return np.mean(logits.argmax(1) == labels.argmax(1))

    evaluator = evaluation.Evaluator(model)
    for images, labels in (first, second, first):
        data = tf.data.Dataset.from_tensor_slices((images, labels)).batch(4)
        results = evaluator(data)
        assert results["count"] == len(images)
        accuracy = expected(model, images, labels)
        assert results["accuracy"] == pytest.approx(accuracy)
        assert results == evaluation.evaluate(model, data)
    # One trace per batch shape: 4, then the last batches of 2 and 3.
    assert evaluator.step.experimental_get_tracing_count() == 3
    gone = weakref.ref(model)
    del model, evaluator
    gc.collect()
    assert gone() is None
