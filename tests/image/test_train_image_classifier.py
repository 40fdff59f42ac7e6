"""keras-slim-train: TF-Slim's train_image_classifier flags on keras_slim."""

import os
import pathlib
import re
import resource
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import checkpoints
from keras_slim.image import _task
from keras_slim.image import train_image_classifier as cli
from keras_slim.image.datasets import digits
from keras_slim.image.nets import digits_cnn
from tests.callbacks.test_summaries import read_events
from tests.helpers import run_module

pytestmark = pytest.mark.prestarted  # tests/zygote.py

FAST = [
    "--optimizer",
    "adam",
    "--learning_rate",
    "0.005",
    "--opt_epsilon",
    "1e-7",
    "--log_every_n_steps",
    "50",
]


def run_cli(*args, timeout=300):
    return run_module(
        "keras_slim.image.train_image_classifier",
        *args,
        timeout=timeout,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
    )


def accuracy(output):
    line = next(
        line for line in output.splitlines() if line.startswith("held-out")
    )
    return float(line.split()[2])


def test_defaults_are_tf_slims():
    flags = cli.parser().parse_args([])
    assert flags.train_dir == "/tmp/tfmodel/"
    assert (flags.num_clones, flags.clone_on_cpu) == (1, False)
    assert (flags.worker_replicas, flags.num_ps_tasks) == (1, 0)
    assert flags.task is None  # TF_CONFIG's index, else 0
    assert flags.max_number_of_steps is None
    assert flags.batch_size == 32
    assert flags.log_every_n_steps == 10
    assert flags.save_summaries_secs == flags.save_interval_secs == 600
    assert flags.optimizer == "rmsprop"
    assert flags.learning_rate == 0.01
    assert flags.learning_rate_decay_type == "exponential"
    assert flags.num_epochs_per_decay == 2.0
    assert flags.learning_rate_decay_factor == 0.94
    assert flags.end_learning_rate == 0.0001
    assert flags.opt_epsilon == 1.0
    assert flags.label_smoothing == 0.0
    assert flags.moving_average_decay is None
    assert flags.weight_decay == 0.00004
    assert flags.checkpoint_exclude_scopes == []
    assert flags.trainable_scopes is None
    assert not flags.ignore_missing_vars


def test_policy_and_scope_flags_parse():
    flags = cli.parser().parse_args(
        [
            "--gradient_multipliers",
            "logits/.*=2.5,conv1/kernel=0.5",
            "--freeze",
            "conv1,conv2",
            "--trainable_scopes",
            "logits",
            "--checkpoint_exclude_scopes",
            "logits,conv2_bn",
            "--labels",
            "0-2,7",
        ]
    )
    assert flags.gradient_multipliers == {"logits/.*": 2.5, "conv1/kernel": 0.5}
    assert flags.freeze == ["conv1", "conv2"]
    assert flags.trainable_scopes == ["logits"]
    assert flags.checkpoint_exclude_scopes == ["logits", "conv2_bn"]
    assert flags.labels == [0, 1, 2, 7]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch_size", "0"], "flag --batch_size=0: must be a positive"),
        (
            ["--optimizer", "lbfgs"],
            "flag --optimizer=lbfgs: value should be one of",
        ),
        (["--gradient_multipliers", "logits"], "flag --gradient_mult"),
        (["--labels", "3-11"], "flag --labels=3-11: digits must be 0-9"),
        (["--momentum", "1.5"], "flag --momentum=1.5: must be in [0, 1)"),
        (["--keep_checkpoint_max", "-1"], "flag --keep_checkpoint_max"),
        (["--rollback_on_nan", "-1"], "flag --rollback_on_nan"),
        (
            ["--worker_replicas", "3", "--replicas_to_aggregate", "2"],
            "flag --replicas_to_aggregate: backup workers (fewer",
        ),
        (
            ["--num_ps_tasks", "1", "--replicas_to_aggregate", "2"],
            "need parameter servers and --sync_replicas",
        ),
        (
            [
                "--num_ps_tasks",
                "1",
                "--sync_replicas",
                "--worker_replicas",
                "3",
                "--summarize_activations",
            ],
            "flag --summarize_activations: synchronous steps over",
        ),
        (
            ["--keep_checkpoint_every_n_hours", "0"],
            "flag --keep_checkpoint_every_n_hours=0: must be a positive",
        ),
        (
            ["--learning_rate", "inf"],
            "flag --learning_rate=inf: must be a finite number: inf",
        ),
        (
            ["--learning_rate", "nan"],
            "flag --learning_rate=nan: must be a finite number: nan",
        ),
        (
            ["--learning_rate", "-0.1"],
            "flag --learning_rate=-0.1: must be a positive number: -0.1",
        ),
        (
            ["--gradient_multipliers", "logits/.*=nan"],
            "the multiplier of 'logits/.*' must be a finite number",
        ),
        (
            ["--gradient_multipliers", "conv1/.*=inf"],
            "the multiplier of 'conv1/.*' must be a finite number",
        ),
        (["--task", "1"], "flag --task: 1 is not below"),
        (
            ["--checkpoint_path", "/no/such/ckpt"],
            "flag --checkpoint_path: No checkpoint at '/no/such/ckpt'",
        ),
        (
            ["--num_ps_tasks", "1", "--worker_replicas", "2", "--task", "0"],
            "flag --num_ps_tasks",
        ),
    ],
)
def test_bad_flags_exit_2_naming_the_flag(args, message, tmp_path, capsys):
    # In-process: the parser's exit 2 is SystemExit(2) from main().
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--train_dir", str(tmp_path), *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("model.ckpt*"))


def demo_flags():
    """`make demo`'s flags, read from the Makefile."""
    makefile = pathlib.Path(__file__).resolve().parents[2] / "Makefile"
    text = makefile.read_text().replace("\\\n", " ")
    line = next(
        line for line in text.splitlines() if line.startswith("DEMO_FLAGS")
    )
    return line.split(":=", 1)[1].split()


def as_a_user(command, *args, cwd):
    """The console script `command` in `cwd`, with the environment a
    user has: no `TF_CPP_MIN_LOG_LEVEL` (the test process sets one)."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    script = pathlib.Path(sys.executable).parent / command
    return subprocess.run(
        [str(script), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=cwd,
    )


def assert_quiet(result):
    """The command's own lines and TensorFlow's warnings: no info line,
    deprecation notice or restore warning."""
    stderr = result.stderr.lower()
    for noise in (
        "i0000",
        "cpu_feature_guard",
        "port.cc",
        "profiler_session",
        "deprecat",
        "could not be found in the restored object",
    ):
        assert noise not in stderr, (noise, result.stderr[-3000:])


def assert_home_page_sample(printed):
    """Each line of what the docs' Home page shows `make demo` printing
    is a line it printed, numbers aside (losses and speeds vary by CPU)."""
    home = (
        pathlib.Path(__file__).resolve().parents[2] / "docs" / "index.md"
    ).read_text()
    sample = home.split("```text\n", 1)[1].split("```", 1)[0]
    lines = [line for line in sample.splitlines() if line.strip() != "..."]
    assert len(lines) > 5
    printed_lines = printed.splitlines()
    for line in lines:
        pattern = re.sub(r"[0-9]+(\\\.[0-9]+)?", "[0-9.]+", re.escape(line))
        assert any(re.fullmatch(pattern, p) for p in printed_lines), line


def test_make_demo_trains_with_two_clones_then_resumes(tmp_path):
    """`make demo` as a user runs it: the console scripts, a train_dir
    relative to the working directory, TensorFlow's default logging."""
    flags = demo_flags()
    relative = flags[flags.index("--train_dir") + 1]
    train_dir = tmp_path / relative
    assert "--num_clones" in flags and "--clone_on_cpu" in flags
    first = as_a_user("keras-slim-train", *flags, cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    assert_quiet(first)
    assert "MirroredStrategy" in first.stdout
    # Not a terminal: plain lines, slim's format.
    assert "global step 600: loss = " in first.stdout
    assert accuracy(first.stdout) >= 0.95
    assert f"tensorboard --logdir {relative}" in first.stdout
    names = sorted(os.listdir(train_dir))
    assert "model.ckpt-600.index" in names
    assert "tf_trace-0.json" in names
    assert any(n.startswith("events.out.tfevents") for n in names)
    # train_image_classifier's summaries, read with TensorBoard's reader:
    # curves, every 20 steps (--save_summaries_steps).
    events = read_events(train_dir)
    tags = set(events)
    assert {
        "losses/total_loss",
        "losses/regularization_loss",
        "learning_rate",
        "conv1/kernel",
        "logits/kernel",
    } <= tags
    for tag in ("loss", "losses/total_loss", "learning_rate", "accuracy"):
        assert len(events[tag]) >= 10, (tag, sorted(events[tag]))
    assert len(events["global_step/sec"]) >= 10
    assert len(events["logits/kernel"]) >= 10  # histograms too
    # `make demo` then evaluates the checkpoint into train_dir/eval.
    evaluated = as_a_user(
        "keras-slim-eval", "--checkpoint_path", relative, cwd=tmp_path
    )
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    assert_quiet(evaluated)
    assert "global step 600: eval/Accuracy = " in evaluated.stdout
    eval_events = read_events(train_dir / "eval")
    assert list(eval_events["eval/Accuracy"]) == [600]
    assert float(eval_events["eval/Accuracy"][600]) == pytest.approx(
        accuracy(first.stdout), abs=1e-4
    )
    assert 600 in eval_events["eval/Recall_5"]
    assert_home_page_sample(first.stdout + evaluated.stdout)
    assert any(t.startswith("sparsity/") for t in tags)
    assert any(t.startswith("activations/") for t in tags)
    assert not any(t.endswith("/gradient_norm") for t in tags)  # off
    # The second run resumes: no step, nothing new written, same accuracy.
    second = as_a_user("keras-slim-train", *flags, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert_quiet(second)
    resumed = [line for line in second.stdout.splitlines() if "esumed" in line]
    assert resumed == [
        f"Resumed from {relative}/model.ckpt-600 (global step 600)."
    ], second.stdout
    assert "loss = " not in second.stdout
    assert sorted(os.listdir(train_dir)) == sorted(names + ["eval"])
    assert accuracy(second.stdout) == accuracy(first.stdout)


def test_nan_loss_exits_1(tmp_path, capsys):
    """`main`'s code is the exit code (`console` exits with it; the
    commands' exits are in the subprocess tests here): in this process."""
    code = cli.main(
        [
            *["--train_dir", str(tmp_path), "--optimizer", "sgd"],
            *["--learning_rate", "1e30", "--learning_rate_decay_type"],
            *["fixed", "--max_number_of_steps", "50"],
        ]
    )
    stderr = capsys.readouterr().err
    assert code == 1, stderr[-3000:]
    assert "NaN loss" in stderr or "not finite" in stderr


def test_a_full_disk_exits_1_naming_the_train_dir_then_resumes(
    tmp_path, capsys
):
    """A run saves model.ckpt-2; a rerun to step 4 under a file-size limit
    its checkpoint exceeds (a subprocess: the console script's exit; writes
    past the limit fail with EFBIG, Python ignores SIGXFSZ) says so and
    exits 1, leaving model.ckpt-2 whole; a rerun with room resumes from
    it. The runs around it are in this process (no TensorFlow import)."""
    flags = ["--train_dir", str(tmp_path), "--save_summaries_secs", "3600"]
    assert cli.main([*flags, "--max_number_of_steps", "2"]) == 0
    before = {p.name: p.read_bytes() for p in tmp_path.glob("*ckpt*")}
    data = tmp_path / "model.ckpt-2.data-00000-of-00001"
    limit = os.path.getsize(data) // 2
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    result = subprocess.run(
        [
            sys.executable,
            *["-m", "keras_slim.image.train_image_classifier"],
            *[*flags, "--max_number_of_steps", "4"],
        ],
        preexec_fn=lambda: resource.setrlimit(
            resource.RLIMIT_FSIZE, (limit, hard)
        ),
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert (
        "keras-slim-train: Cannot save the checkpoint of global step 4 in "
        f"'{tmp_path}': a file is too large" in result.stderr
    )
    assert f"the last one is '{tmp_path}/model.ckpt-2'" in result.stderr
    assert "Traceback" not in result.stderr
    after = {p.name: p.read_bytes() for p in tmp_path.glob("*ckpt*")}
    assert after == before
    assert (
        (tmp_path / "checkpoint")
        .read_text()
        .startswith('model_checkpoint_path: "model.ckpt-2"')
    )
    capsys.readouterr()
    assert cli.main([*flags, "--max_number_of_steps", "4"]) == 0
    out = capsys.readouterr().out
    assert f"Resumed from {tmp_path}/model.ckpt-2 (global step 2)." in out
    assert "(global step 4)" in out
    assert tf.train.latest_checkpoint(str(tmp_path)) == str(
        tmp_path / "model.ckpt-4"
    )


def test_fine_tune_from_digits_0_4_to_5_9(tmp_path, capsys):
    """`main` in this process: the flags are the point, not the exit."""
    pretrain, finetune = tmp_path / "pretrain", tmp_path / "finetune"
    code = cli.main(
        [
            *["--train_dir", str(pretrain), "--labels", "0-4"],
            *["--max_number_of_steps", "200", *FAST],
        ]
    )
    assert code == 0, capsys.readouterr().err[-3000:]
    capsys.readouterr()
    code = cli.main(
        [
            *["--train_dir", str(finetune), "--labels", "5-9"],
            *["--max_number_of_steps", "200"],
            *["--checkpoint_path", str(pretrain)],
            *["--checkpoint_exclude_scopes", "logits"],
            *["--freeze", "conv1,conv2", *FAST],
        ]
    )
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    assert "Warm start from" in out.out
    assert accuracy(out.out) >= 0.9
    # The frozen convolutions are the pretrained ones; the head is new.
    kernel = "model/conv1.Skernel/.ATTRIBUTES/VARIABLE_VALUE"
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(str(finetune)).get_tensor(kernel),
        tf.train.load_checkpoint(str(pretrain)).get_tensor(kernel),
    )
    listed = {v.name for v in checkpoints.list_variables(str(finetune))}
    assert "model/logits/kernel" in listed


def test_console_script_is_installed():
    script = pathlib.Path(sys.executable).parent / "keras-slim-train"
    assert script.exists()
    result = subprocess.run(
        [str(script), "--help"], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0
    assert "--checkpoint_exclude_scopes" in result.stdout


def _built_optimizer(monkeypatch, tmp_path, *args):
    """The optimizer `_build` compiles from the command's flags, on a task
    of 1000 examples."""

    def tiny(name, num_classes, **kwargs):
        images = keras.Input((4, 4, 3))
        logits = keras.layers.Dense(num_classes)(keras.layers.Flatten()(images))
        return keras_slim.SlimModel(images, logits)

    monkeypatch.setattr(cli.nets, "build", tiny)
    p = cli.parser()
    flags = p.parse_args(["--train_dir", str(tmp_path), "--task", "0", *args])
    cli._check(p, flags)
    task = _task.Task("inception_v3", 4, "inception", 3, 1000, None, 3)
    return cli._build(flags, task).optimizer


@pytest.mark.parametrize(
    "args, cls, attrs",
    [
        ([], keras_slim.optimizers.RMSProp, {"decay": 0.9, "epsilon": 1.0}),
        (
            ["--optimizer=adam", "--adam_beta1=0.8", "--opt_epsilon=0.5"],
            keras_slim.optimizers.Adam,
            {"beta1": 0.8, "beta2": 0.999, "epsilon": 0.5},
        ),
        (
            ["--optimizer=momentum", "--momentum=0.5"],
            keras_slim.optimizers.Momentum,
            {"momentum": 0.5},
        ),
    ],
)
def test_the_optimizer_is_tf_slims_from_the_flags(
    monkeypatch, tmp_path, args, cls, attrs
):
    optimizer = _built_optimizer(monkeypatch, tmp_path, *args)
    assert type(optimizer) is cls
    assert {k: getattr(optimizer, k) for k in attrs} == attrs
    assert not optimizer.use_ema


@pytest.mark.parametrize(
    "args, decay_steps",
    [
        # int(1000 * 2.0 / 32) = 62, TF-Slim's on one worker.
        ([], 62),
        # Multi-worker replicas are synchronous: 62 / 4, as TF-Slim's
        # --sync_replicas divides it.
        (["--worker_replicas=4"], 15.5),
        (
            ["--num_ps_tasks=1", "--sync_replicas", "--worker_replicas=4"]
            + ["--replicas_to_aggregate=3"],
            62 / 3,
        ),
        # Asynchronous parameter servers: each step is one batch.
        (["--num_ps_tasks=1"], 62),
    ],
)
def test_decay_steps_are_divided_on_synchronous_replicas(
    monkeypatch, tmp_path, args, decay_steps
):
    optimizer = _built_optimizer(monkeypatch, tmp_path, *args)
    schedule = optimizer.get_config()["learning_rate"]["config"]
    assert schedule["decay_steps"] == decay_steps


def test_moving_average_decay_is_tf1s_warmed_up_average(monkeypatch, tmp_path):
    # Keras's averages with TF1's rule (tests/test_moving_averages.py
    # compares that rule with TF1's ExponentialMovingAverage).
    optimizer = _built_optimizer(
        monkeypatch, tmp_path, "--moving_average_decay=0.99"
    )
    assert optimizer.use_ema and optimizer.ema_momentum == 0.99
    update = vars(optimizer)["_update_model_variables_moving_average"]
    assert update.__qualname__.startswith("replace_moving_averages")


def test_replicas_to_aggregate_defaults_to_the_workers(tmp_path):
    flags = cli.parser().parse_args(
        ["--train_dir", str(tmp_path), "--worker_replicas", "2", "--task", "0"]
    )
    cli._check(cli.parser(), flags)
    assert flags.replicas_to_aggregate == 2


def test_sync_replicas_flags_make_backup_workers(tmp_path):
    """TF-Slim's --sync_replicas with parameter servers: the first
    --replicas_to_aggregate of --worker_replicas gradients per step."""
    p = cli.parser()
    flags = p.parse_args(
        [
            "--train_dir",
            str(tmp_path),
            "--num_ps_tasks",
            "1",
            "--sync_replicas",
            "--worker_replicas",
            "3",
            "--replicas_to_aggregate",
            "2",
        ]
    )
    cli._check(p, flags)
    config = cli._deployment(flags)
    assert (config.replicas_to_aggregate, config.total_num_replicas) == (2, 3)
    assert config.kind == "parameter_server"
    # The batches stay on the workers: activation summaries default off.
    assert flags.summarize_activations is False
    plain = p.parse_args(["--train_dir", str(tmp_path)])
    cli._check(p, plain)
    assert plain.summarize_activations is True
    assert cli._deployment(plain).replicas_to_aggregate is None


def test_worker_replicas_flags_make_multi_worker_replicas(tmp_path):
    p = cli.parser()
    flags = p.parse_args(
        ["--train_dir", str(tmp_path), "--worker_replicas", "2", "--task", "1"]
    )
    cli._check(p, flags)
    config = cli._deployment(flags)
    assert config.kind == "multi_worker"
    assert (config.num_replicas, config.replica_id) == (2, 1)
    assert config.num_ps_tasks == 0


def test_digits_split_is_stratified_and_relabelled():
    (x, y), (x_test, y_test) = digits.load([5, 6, 7, 8, 9])
    assert x.shape[1:] == (8, 8, 1) and x.dtype == np.float32
    assert set(y) == set(y_test) == {0, 1, 2, 3, 4}
    fraction = len(y_test) / (len(y) + len(y_test))
    assert 0.18 < fraction < 0.21
    assert 0.0 <= x.min() and x.max() <= 1.0


def test_progress_bar_for_a_terminal(capsys):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    data = tf.data.Dataset.from_tensors((np.ones((4, 2)), np.ones((4, 1))))
    model.fit(data.repeat(5), verbose=0, callbacks=[cli._Progress(5)])
    out = capsys.readouterr().out
    assert "5/5" in out and "loss" in out


@pytest.mark.parametrize(
    "cluster_flags, train_flags, strategy",
    [
        # Multi-worker replicas run keras_slim.train as in
        # tests/_fit/test_multi_worker.py, and --worker_replicas maps to them
        # (test_worker_replicas_flags_make_multi_worker_replicas): the
        # command's cluster run is the parameter servers' one, whose
        # coordinator alone evaluates and saves.
        (
            ["--workers", "2", "--ps", "1"],
            ["--num_ps_tasks", "1"],
            "ParameterServer",
        ),
    ],
)
def test_on_a_local_cluster(tmp_path, cluster_flags, train_flags, strategy):
    """Parameter servers through the launcher: the command end to end."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_slim.cluster",
            *cluster_flags,
            "--",
            sys.executable,
            "-m",
            "keras_slim.image.train_image_classifier",
            "--train_dir",
            str(tmp_path),
            "--max_number_of_steps",
            "200",
            *train_flags,
            *FAST,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"strategy: {strategy}" in result.stdout
    # Only the chief (worker 0, or the coordinator) evaluates and saves.
    assert result.stdout.count("held-out accuracy") == 1
    assert accuracy(result.stdout.replace("[worker 0] ", "")) >= 0.9
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-200")


@pytest.mark.parametrize(
    "value, message",
    [
        ("{bad", "The TF_CONFIG environment variable is not valid JSON"),
        ("[1, 2]", "must hold a JSON object"),
        ('{"task": {"index": -1}}', "task index must be a non-negative"),
    ],
)
def test_a_malformed_tf_config_exits_2_naming_it(
    value, message, tmp_path, capsys, monkeypatch
):
    monkeypatch.setenv("TF_CONFIG", value)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--train_dir", str(tmp_path)])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.glob("model.ckpt*"))


def test_learning_rate_multipliers_flag_reaches_the_policy():
    flags = cli.parser().parse_args(
        [
            "--learning_rate_multipliers",
            "logits/.*=10,conv1/kernel=0.5",
            "--gradient_multipliers",
            "conv2/.*=2",
        ]
    )
    assert flags.learning_rate_multipliers == {
        "logits/.*": 10.0,
        "conv1/kernel": 0.5,
    }
    assert cli._policy(flags) == keras_slim.GradientPolicy(
        multipliers={"conv2/.*": 2.0},
        lr_multipliers={"logits/.*": 10.0, "conv1/kernel": 0.5},
    )


@pytest.mark.parametrize(
    "value, message",
    [
        ("logits", "expected pattern=value, got 'logits'"),
        ("logits/.*=0", "multiplier of 'logits/.*' must be a positive"),
        ("logits/.*=-2", "multiplier of 'logits/.*' must be a positive"),
        ("logits/.*=inf", "must be a finite number"),
        ("=2", "expected pattern=value, got '=2'"),
    ],
)
def test_bad_learning_rate_multipliers_flag(value, message, capsys):
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--learning_rate_multipliers", value])
    err = capsys.readouterr().err
    assert "flag --learning_rate_multipliers" in err and message in err


def test_negative_multipliers_are_accepted_as_in_tf_slim():
    flags = cli.parser().parse_args(
        ["--gradient_multipliers", "logits/.*=-0.5,conv1/.*=0"]
    )
    assert flags.gradient_multipliers == {"logits/.*": -0.5, "conv1/.*": 0.0}


class Captured(Exception):
    pass


def test_retention_flags_reach_train(tmp_path, monkeypatch):
    seen = {}

    def train(model, data, **kwargs):
        seen.update(kwargs)
        raise Captured

    monkeypatch.setattr(cli.keras_slim, "train", train)
    with pytest.raises(Captured):
        cli.main(
            [
                "--train_dir",
                str(tmp_path),
                "--keep_checkpoint_max",
                "0",
                "--keep_checkpoint_every_n_hours",
                "2.5",
                "--rollback_on_nan",
                "3",
            ]
        )
    assert seen["keep_checkpoint_max"] == 0
    assert seen["keep_checkpoint_every_n_hours"] == 2.5
    assert seen["rollback_on_nan"] == 3
    defaults = cli.parser().parse_args(["--train_dir", str(tmp_path)])
    assert defaults.keep_checkpoint_max == 5
    assert defaults.keep_checkpoint_every_n_hours is None
    assert defaults.rollback_on_nan == 0


def _digits_model(strategy, synchronized):
    with strategy.scope():
        keras.utils.set_random_seed(0)
        inputs = keras.Input((8, 8, 1))
        model = keras_slim.SlimModel(
            inputs, digits_cnn.network(10, synchronized=synchronized)(inputs)
        )
        model.compile(
            optimizer=keras.optimizers.SGD(0.1),
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        )
    return model


def test_the_network_on_clones_trains_like_one_device(mirrored):
    # Synchronized batch norm: 4 clones see the global batch's statistics.
    (x, y), _ = digits.load(list(range(10)))
    x, y = x[:256], y[:256]

    def trained(strategy, synchronized):
        model = _digits_model(strategy, synchronized)
        model.fit(x, y, batch_size=64, shuffle=False, epochs=2, verbose=0)
        return model.get_weights()

    one = trained(tf.distribute.get_strategy(), True)
    clones = trained(mirrored, True)
    for a, b in zip(one, clones):
        np.testing.assert_allclose(a, b, atol=2e-5)
    # Per-clone statistics (TF-Slim's clones) do not.
    unsynced = trained(mirrored, False)
    gap = max(float(np.max(np.abs(a - b))) for a, b in zip(one, unsynced))
    assert gap > 1e-3


def test_summary_flags():
    flags = cli.parser().parse_args(
        ["--nosummarize_activations", "--summarize_gradients"]
    )
    assert flags.summarize_variables is True
    assert flags.summarize_activations is False
    assert flags.summarize_gradients is True


def test_a_net_with_aux_logits_trains_both_heads_as_tf_slim(monkeypatch):
    """TF-Slim's train_image_classifier adds the AuxLogits' cross-entropy
    with weight 0.4: the command compiles a two-output net so, and gives
    both outputs the labels."""

    def two_heads(name, num_classes, **kwargs):
        keras.utils.set_random_seed(0)
        images = keras.Input((4, 4, 3), name="images")
        flat = keras.layers.Flatten()(images)
        logits = keras.layers.Dense(num_classes, name="Logits")(flat)
        aux = keras.layers.Dense(num_classes, name="AuxLogits")(flat)
        return keras_slim.SlimModel(images, [logits, aux])

    monkeypatch.setattr(cli.nets, "build", two_heads)
    # 8 examples: a fixed rate (decaying every int(8 * 2.0 / 32) = 0
    # steps is an error).
    flags = cli.parser().parse_args(
        ["--optimizer", "sgd", "--learning_rate_decay_type", "fixed"]
    )
    flags.replicas_to_aggregate = 1  # as _check sets it
    rng = np.random.default_rng(0)
    images = rng.normal(size=(8, 4, 4, 3)).astype("float32")
    labels = np.eye(3, dtype="float32")[rng.integers(0, 3, 8)]
    task = _task.Task(
        "inception_v3",
        4,
        "inception",
        3,
        8,
        lambda context=None: tf.data.Dataset.from_tensors((images, labels)),
        3,
    )
    model = cli._build(flags, task)
    data = cli._labelled_for(model, task.make_dataset)(None)
    logits, aux = model(images)
    cross_entropy = keras.losses.CategoricalCrossentropy(from_logits=True)
    expected = float(cross_entropy(labels, logits)) + 0.4 * float(
        cross_entropy(labels, aux)
    )
    results = model.evaluate(data, verbose=0, return_dict=True)
    assert results["loss"] == pytest.approx(expected, rel=1e-5)
    # Accuracy of the logits only, as TF-Slim's eval reports it.
    assert sorted(results) == [
        "AuxLogits_loss",
        "Logits_accuracy",
        "Logits_loss",
        "loss",
    ]
    model.fit(data, epochs=1, verbose=0)  # both heads train


@pytest.mark.parametrize("flag", ["--alsologtostderr", "--logtostderr"])
def test_absl_logging_flags_send_the_log_lines_to_stderr(flag, capsys):
    import logging

    from keras_slim.image import _console

    flags = cli.parser().parse_args([flag])
    _console.configure(
        flags.verbosity, flags.alsologtostderr or flags.logtostderr
    )
    logging.getLogger("keras_slim").info("a line")
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", "a line\n")
    _console.configure(0)
    logging.getLogger("keras_slim").info("back")
    assert capsys.readouterr().out == "back\n"


def test_tf_slim_spellings_of_flags():
    """absl's spellings, as TF-Slim's users type them."""
    written = cli.parser().parse_args(
        [
            "--train_dir=/tmp/x",
            "--num_clones",
            "2",
            "--clone_on_cpu=True",
            "--nosummarize_variables",
            "--sync_replicas=false",
            "--checkpoint_exclude_scopes=InceptionV3/Logits,InceptionV3/AuxLogits",
            "--dataset_split_name=train",
            "--labels_offset=1",
            "--num_readers=2",
            "--num_preprocessing_threads=3",
            "--master=",
            "--quantize_delay=-1",
            "--use_grayscale",
            "-v",
            "1",
        ]
    )
    assert written.train_dir == "/tmp/x" and written.num_clones == 2
    assert written.clone_on_cpu is True and written.summarize_variables is False
    assert written.sync_replicas is False
    assert written.checkpoint_exclude_scopes == [
        "InceptionV3/Logits",
        "InceptionV3/AuxLogits",
    ]
    assert (written.labels_offset, written.num_readers) == (1, 2)
    assert written.num_preprocessing_threads == 3 and written.use_grayscale
    assert written.verbosity == 1 and written.master == ""
    assert cli.parser().parse_args(["--noclone_on_cpu"]).clone_on_cpu is False


def test_a_flagfile_is_read(tmp_path):
    flagfile = tmp_path / "flags.txt"
    flagfile.write_text("--batch_size=7\n--optimizer=adam\n")
    flags = cli.parser().parse_args([f"--flagfile={flagfile}"])
    assert (flags.batch_size, flags.optimizer) == (7, "adam")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--master=grpc://10.0.0.1:2222"], "flag --master: 'grpc://10.0.0.1"),
        (["--quantize_delay=0"], "tfmot.quantization.keras.quantize_model"),
        (["--clone_on_cpu=maybe"], "flag --clone_on_cpu=maybe: "),
        (["stray"], "unexpected arguments ['stray']"),
        (["--no_such_flag=1"], "Unknown command line flag 'no_such_flag'"),
        (["--labels_offset=1"], "flag --labels_offset: the bundled digits"),
        (
            ["--dataset_split_name=test"],
            "split name 'test' was not recognized for the bundled digits",
        ),
    ],
)
def test_tf_slim_flags_not_built_are_named(args, message, tmp_path, capsys):
    try:
        code = cli.main(["--train_dir", str(tmp_path), *args])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_summarize_activations_means_the_nets_end_points():
    from keras_slim.image import nets

    net = nets.build("mobilenet_v1_025", 5, image_size=64)
    on = cli.parser().parse_args([])
    on.summarize_activations = True
    assert cli._activations(net, on) == net.slim_end_points
    assert cli._activations(nets.build("digits_cnn", 10), on) is True
    off = cli.parser().parse_args(["--nosummarize_activations"])
    assert cli._activations(net, off) is False


def exit_code(main, argv):
    """`main(argv)`'s exit code, from its return or the parser's exit."""
    try:
        return main(argv)
    except SystemExit as exit_info:
        return exit_info.code


def test_a_checkpoint_path_that_is_not_a_checkpoint_is_refused(
    bad_checkpoint, tmp_path, capsys
):
    """Refused before the first step, naming it: a file of another kind,
    a truncated checkpoint, a checkpoint's .index file, a directory
    without one (tests/image/conftest.py)."""
    path, said = bad_checkpoint
    train_dir = tmp_path / "train"
    code = exit_code(
        cli.main,
        [
            *["--train_dir", str(train_dir), "--checkpoint_path", path],
            *["--max_number_of_steps", "2"],
        ],
    )
    assert code == 2
    err = capsys.readouterr().err
    assert said["train"] in err
    assert "Traceback" not in err
    assert not list(train_dir.glob("model.ckpt*"))


def test_gradient_accumulation_steps_reach_the_optimizer(monkeypatch, tmp_path):
    optimizer = _built_optimizer(
        monkeypatch, tmp_path, "--gradient_accumulation_steps=4"
    )
    assert optimizer.gradient_accumulation_steps == 4
    default = _built_optimizer(monkeypatch, tmp_path)
    assert default.gradient_accumulation_steps is None


def test_accumulating_steps_are_logged_and_counted_as_optimizer_steps(
    tmp_path, capsys
):
    """In-process: 3 optimizer steps of 2 micro-batches of 8 are logged as
    global steps 1, 2, 3 (16 examples each) and end at model.ckpt-3."""
    code = cli.main(
        [
            *["--train_dir", str(tmp_path), "--save_summaries_secs", "3600"],
            *["--gradient_accumulation_steps=2", "--batch_size=8"],
            *["--max_number_of_steps=3", "--log_every_n_steps=1"],
        ]
    )
    assert code == 0
    captured = capsys.readouterr()
    line = re.compile(
        r"global step (\d+): loss = \S+ \((\S+) sec/step\), (\S+) examples"
    )
    logged = [m.groups() for m in line.finditer(captured.out + captured.err)]
    assert [int(step) for step, _, _ in logged] == [1, 2, 3]
    for _, sec, rate in logged:
        assert float(sec) * float(rate) == pytest.approx(16, rel=0.15)
    path = tf.train.latest_checkpoint(str(tmp_path))
    assert path == str(tmp_path / "model.ckpt-3")
    reader = tf.train.load_checkpoint(path)
    micro = "optimizer/_iterations/.ATTRIBUTES/VARIABLE_VALUE"
    assert reader.get_tensor(micro) == 6


def test_gradient_accumulation_steps_must_be_positive(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.parser().parse_args(["--gradient_accumulation_steps=0"])
    assert exit_.value.code == 2
    assert "gradient_accumulation_steps" in capsys.readouterr().err
