"""keras-slim-train's start-of-run summary and --dry_run, in this process.

The summary's numbers are checked against what the run then uses: the
batch of the data `keras_slim.train` receives, the optimizer's schedule
at the steps the summary names, the checkpoint the run resumes from.
"""

import os
import re

import keras
import pytest

from keras_slim.image import learning_rate
from keras_slim.image import train_image_classifier as cli


class Captured(Exception):
    pass


def captured_run(monkeypatch, args):
    """`main(args)` up to `keras_slim.train`, which is not run: returns
    the model and the data it would train on."""
    seen = {}

    def train(model, data, **kwargs):
        seen.update(model=model, data=data)
        raise Captured

    monkeypatch.setattr(cli.keras_slim, "train", train)
    with pytest.raises(Captured):
        cli.main(args)
    return seen["model"], seen["data"]


def number(pattern, text):
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return float(match.group(1))


def built_schedule(model):
    """The schedule the compiled optimizer evaluates at the global step."""
    config = model.optimizer.get_config()["learning_rate"]
    return keras.optimizers.schedules.deserialize(config)


def summary_of(out):
    start = out.index("keras-slim-train will:")
    return out[start:]


@pytest.mark.parametrize(
    "args, clones, micro_batches",
    [
        (["--num_clones=2", "--clone_on_cpu"], 2, 1),
        (["--optimizer=adam", "--adam_beta1=0.8"], 1, 1),
        (["--gradient_accumulation_steps=2", "--mixed_precision"], 1, 2),
    ],
    ids=["two_clones", "adam", "accumulation_bfloat16"],
)
def test_the_summary_says_the_batch_rate_and_optimizer_the_run_uses(
    args, clones, micro_batches, monkeypatch, tmp_path, capsys
):
    if "--mixed_precision" in args:
        args = [*args, "mixed_bfloat16"]
    model, data = captured_run(
        monkeypatch,
        ["--train_dir", str(tmp_path), "--batch_size=8", *args],
    )
    text = summary_of(capsys.readouterr().out)
    # The global batch: the batch the step sees, times the micro-batches.
    per_step = number(r"= (\d+) examples per global step", text)
    seen = data.element_spec[0].shape[0]
    assert (
        seen == 8 * clones == model.distribute_strategy.num_replicas_in_sync * 8
    )
    assert per_step == seen * micro_batches
    # The decay steps are TF-Slim's, and the optimizer's schedule decays
    # at the step the summary names.
    num_samples = int(number(r"epoch: (\d+) examples", text))
    steps = number(r"every 2 epochs = (\d+) steps \(staircase\)", text)
    flags = {**learning_rate.LEARNING_RATE_FLAGS, "batch_size": 8}
    assert steps == learning_rate._decay_steps(num_samples, flags)
    schedule = built_schedule(model)
    rate = number(r"learning rate: exponential: (\S+) x", text)
    factor = number(r" x (\S+) every", text)
    assert float(schedule(steps - 1)) == pytest.approx(rate)
    assert float(schedule(steps)) == pytest.approx(rate * factor)
    # Each optimizer argument the summary names is the optimizer's.
    line = next(ln for ln in text.splitlines() if "optimizer: " in ln)
    arguments = re.findall(r"(\w+)=(\S+) --", line)
    assert arguments
    for name, value in arguments:
        assert getattr(model.optimizer, name) == float(value), name
    if "--mixed_precision" in args:
        assert model.get_layer("conv1").compute_dtype == "bfloat16"
        assert "precision: mixed_bfloat16: layers compute in bfloat16" in text
    else:
        assert "precision: float32" in text


def test_the_polynomial_decay_ends_at_the_step_named(
    monkeypatch, tmp_path, capsys
):
    model, _ = captured_run(
        monkeypatch,
        [
            *["--train_dir", str(tmp_path), "--batch_size=64"],
            *["--learning_rate_decay_type=polynomial", "--num_clones=2"],
            "--clone_on_cpu",
        ],
    )
    text = summary_of(capsys.readouterr().out)
    steps = number(r"= (\d+) steps, then", text)
    schedule = built_schedule(model)
    assert float(schedule(steps)) == pytest.approx(1e-4)
    assert float(schedule(steps - 1)) > 1e-4
    # TF-Slim's decay steps count epochs of the per-clone batch: twice
    # the epochs at two clones' global batch.
    assert "at 128 examples per step they are" in text
    epochs = number(r"they are (\S+) epochs", text)
    num_samples = number(r"epoch: (\d+) examples", text)
    assert epochs == pytest.approx(steps * 128 / num_samples, rel=1e-2)


def test_the_warmup_and_cosine_end_at_the_steps_named(
    monkeypatch, tmp_path, capsys
):
    """With the recipes' schedule the summary names the warmup's steps
    and the cosine's: the built schedule reaches the rate at the first
    and the floor at the second, counted from the warmup's end."""
    model, _ = captured_run(
        monkeypatch,
        [
            *["--train_dir", str(tmp_path), "--batch_size=32"],
            "--learning_rate_decay_type=cosine",
            *["--warmup_epochs=1", "--max_number_of_steps=100"],
            *["--learning_rate=0.1", "--end_learning_rate=0.002"],
            *["--num_clones=2", "--clone_on_cpu"],
        ],
    )
    text = summary_of(capsys.readouterr().out)
    # The cosine's steps end at the last step: no epochs of --batch_size.
    assert "TF-Slim's decay steps count epochs" not in text
    warmup = number(r"linear warmup from 0 over 1 epochs = (\d+) steps", text)
    cosine = number(r"cosine: 0.1 to 0.002 over (\d+) steps", text)
    assert warmup + cosine == 100  # the cosine ends at the last step
    schedule = built_schedule(model)
    assert float(schedule(warmup // 2)) == pytest.approx(
        0.1 * (warmup // 2) / warmup
    )
    assert float(schedule(warmup)) == pytest.approx(0.1)
    assert float(schedule(warmup + cosine)) == pytest.approx(0.002)
    assert float(schedule(warmup + cosine - 5)) > 0.002


def test_resume_warm_start_and_frozen_variables_are_named(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    quiet = ["--save_summaries_secs", "3600", "--batch_size", "8"]
    quiet += ["--nosummarize_activations", "--nosummarize_variables"]
    assert (
        cli.main(["--train_dir", str(first), "--max_number_of_steps=2", *quiet])
        == 0
    )
    capsys.readouterr()
    # The resume line names the checkpoint the run then resumes from (a
    # run already at --max_number_of_steps: it takes no step).
    assert (
        cli.main(["--train_dir", str(first), "--max_number_of_steps=2", *quiet])
        == 0
    )
    out = capsys.readouterr().out
    said = re.search(r"start: resume from (\S+) \(global step (\d+)\)", out)
    assert said, out
    assert f"Resumed from {said.group(1)} (global step {said.group(2)})." in out
    assert said.group(1) == str(first / "model.ckpt-2")
    assert "steps: none: global step 2 is already --max_number_of_steps" in out
    assert "loss = " not in out
    # Warm start names --checkpoint_path's checkpoint and its exclusions;
    # --trainable_scopes leaves the convolutions out of the policy's table.
    code = cli.main(
        [
            *["--train_dir", str(second), "--checkpoint_path", str(first)],
            *[
                "--checkpoint_exclude_scopes=logits",
                "--trainable_scopes=logits",
            ],
            "--dry_run",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert (
        f"start: warm start from {first / 'model.ckpt-2'} (" in out
        and "excluding logits.* (--checkpoint_exclude_scopes)" in out
    ), out
    rows = {
        line.split()[0]: line
        for line in summary_of(out).splitlines()
        if line.startswith("    ") and "/" in line
    }
    assert "not in `trainable`" in rows["conv1/kernel"]
    assert " train " in rows["logits/kernel"]
    assert not second.exists()
    # A checkpoint in --train_dir is resumed; --checkpoint_path is not used.
    before = sorted(os.listdir(first))
    assert (
        cli.main(
            [
                "--train_dir",
                str(first),
                "--checkpoint_path",
                str(first),
                "--dry_run",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert f"resume from {first / 'model.ckpt-2'} (global step 2)" in out
    assert "is not used (a resumed run is not warm-started)" in out
    assert sorted(os.listdir(first)) == before


def test_dry_run_exits_0_before_any_step_writing_nothing(
    monkeypatch, tmp_path, capsys
):
    def train(*args, **kwargs):
        raise AssertionError("--dry_run trained")

    monkeypatch.setattr(cli.keras_slim, "train", train)
    train_dir = tmp_path / "new" / "train"
    assert cli.main(["--train_dir", str(train_dir), "--dry_run"]) == 0
    out = capsys.readouterr().out
    assert out.count("keras-slim-train will:") == 1
    assert "start: from scratch at global step 0" in out
    assert "held-out accuracy" not in out
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--batch_size", "0"], "flag --batch_size=0: must be a positive"),
        (["--checkpoint_path", "/no/such"], "No checkpoint at '/no/such'"),
        (
            ["--num_epochs_per_decay", "0.001"],
            "The learning rate would decay every 0 steps",
        ),
        (
            ["--keep_best", "--best_metric", "recall_5", "--labels", "0-4"],
            "recall_5 (top-5) needs more than 5 classes",
        ),
    ],
)
def test_dry_run_refuses_bad_flags(args, message, tmp_path, capsys):
    try:
        code = cli.main(["--train_dir", str(tmp_path), "--dry_run", *args])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, said",
    [
        (
            ["--worker_replicas=2"],
            [
                "32 per clone x 2 clones (1 on each of 2 workers) = 64 "
                "examples per global step",
                "/ 2 replicas to aggregate = 45 steps",
            ],
        ),
        (
            ["--num_ps_tasks=1", "--sync_replicas", "--worker_replicas=3"]
            + ["--replicas_to_aggregate=2"],
            [
                "x 2 workers' batches per synchronous step "
                "(--replicas_to_aggregate) = 64 examples per global step",
                "averages the first 2 of 3 gradients",
            ],
        ),
    ],
    ids=["multi_worker", "sync_parameter_servers"],
)
def test_dry_run_of_a_cluster_needs_none(
    args, said, monkeypatch, tmp_path, capsys
):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    code = cli.main(["--train_dir", str(tmp_path), "--dry_run", *args])
    out = capsys.readouterr().out
    assert code == 0, out
    for text in said:
        assert text in out


def test_the_migration_guides_sample_is_what_the_command_prints(
    monkeypatch, tmp_path, capsys
):
    import pathlib

    guide = (
        pathlib.Path(__file__).resolve().parents[2]
        / "docs"
        / "tutorials"
        / "migrating.md"
    ).read_text()
    section = guide[guide.index("### What a run will do") :]
    sample = section.split("```text\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(tmp_path)
    code = cli.main(
        [
            *["--train_dir", "train_digits", "--num_clones", "2"],
            *["--clone_on_cpu", "--max_number_of_steps", "600"],
            *["--optimizer", "adam", "--learning_rate", "0.005"],
            *["--opt_epsilon", "1e-7", "--freeze", "conv1", "--dry_run"],
        ]
    )
    assert code == 0
    assert summary_of(capsys.readouterr().out) == sample


def test_logged_to_stderr_the_summary_is_printed_on_stdout_too(
    tmp_path, capsys
):
    from keras_slim.image import _console

    try:
        code = cli.main(
            ["--train_dir", str(tmp_path), "--dry_run", "--alsologtostderr"]
        )
        captured = capsys.readouterr()
    finally:
        _console.configure(0)
    assert code == 0
    assert captured.out.count("keras-slim-train will:") == 1
    assert captured.err.count("keras-slim-train will:") == 1
    assert summary_of(captured.out) in captured.err
