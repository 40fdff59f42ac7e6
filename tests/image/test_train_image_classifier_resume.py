"""keras-slim-train resumes exactly, as the library does.

Each case runs the command once uninterrupted, then a chain in one
`--train_dir`: a run that finishes at a lower `--max_number_of_steps`
(the common way to go on: the same command with a higher target), a run
killed with SIGKILL or stopped with SIGTERM at a randomly chosen later
step (the command's own process), and a last run left to finish (the
other runs call the command's `main` in the test's process). The chain's
final checkpoint must hold the uninterrupted run's weights (the optimizer's
slots and moving averages included). Checkpoints are saved every second,
so a kill lands anywhere relative to the last save. The shards hold no
validation split: the command says it has no held-out accuracy to print,
before the first step, and trains.
"""

import os
import signal
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.errors import PREEMPTED_EXIT_CODE
from keras_slim.image import datasets
from keras_slim.image import train_image_classifier as cli
from tests.image.test_eval_image_classifier import colored_images
from tests.processes import reaching
from tests.processes import steps
from tests.processes import watched

pytestmark = pytest.mark.prestarted  # tests/zygote.py

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1")
# The command's log lines: "global step 12: loss = ...".
LOGGED = "global step "
# Primes above 32 (the most steps per call): the steps per call divide the
# run's steps, so each call is one step and a signal can land at any step;
# a finished run's lower target keeps one step per call too (other steps
# per call read other blocks of batches: tests/_fit/test_position.py).
STEPS = 71
FINISHED_AT = (37, 41, 43)
# The signal goes out once the command logs its step; it lands a few
# steps later on a loaded machine (about 15 ms a step here): the signal's
# step is at least this many steps before the end, so it lands before it.
SIGNAL_MARGIN = 16
COMMON = [
    *["--max_number_of_steps", str(STEPS), "--log_every_n_steps", "1"],
    *["--save_interval_secs", "1", "--save_summaries_secs", "3600"],
    *["--optimizer", "momentum", "--learning_rate", "0.05"],
]


def command(train_dir, flags, at_step=None, signal_number=None, timeout=180):
    """Runs keras-slim-train; sends `signal_number` once it logs a global
    step >= `at_step`. A watchdog kills it after `timeout` seconds.

    Returns:
        `(returncode, last global step logged, output lines)`.
    """
    result = watched(
        [
            sys.executable,
            "-m",
            "keras_slim.image.train_image_classifier",
            *["--train_dir", str(train_dir), *COMMON, *flags],
        ],
        env=ENV,
        timeout=timeout,
        signal_when=reaching(at_step, prefix=LOGGED),
        signals=(signal_number,),
        merge_stderr=True,
    )
    assert not result.timed_out, f"timed out:\n{result.output()}"
    logged = result.steps(LOGGED)
    return result.returncode, logged[-1] if logged else None, result.lines


def in_process(train_dir, flags, capsys):
    """keras-slim-train's `main` in this process (the runs whose process
    is not the point: the uninterrupted reference, the finished run, the
    last rerun). Returns what `command` returns."""
    code = cli.main(["--train_dir", str(train_dir), *COMMON, *flags])
    lines = capsys.readouterr().out.splitlines()
    logged = steps(lines, LOGGED)
    return code, logged[-1] if logged else None, lines


def final_weights(train_dir):
    """Every variable of the newest checkpoint but the save counter (and
    the input iterator's state, a variant)."""
    path = tf.train.latest_checkpoint(str(train_dir))
    reader = tf.train.load_checkpoint(path)
    return {
        name: reader.get_tensor(name)
        for name, dtype in reader.get_variable_to_dtype_map().items()
        if dtype != tf.variant
        and "save_counter" not in name
        and "OBJECT_GRAPH" not in name
    }


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    """A folder of class subfolders and TF-Slim's TFRecord shards."""
    root = tmp_path_factory.mktemp("images")
    pictures, labels = colored_images(per_class=20, size=20)
    datasets.write_image_folder(
        pictures, labels, root / "folder", class_names=["r", "g", "b"]
    )
    datasets.write_tfrecords(
        pictures,
        labels,
        root / "tfrecords",
        name="colors",
        split="train",
        shards=3,
        class_names=["r", "g", "b"],
    )
    return root


# digits: the bundled default (shuffled); the folder and the shards with
# inception's preprocessing (random crops and flips).
CASES = {
    "digits-2-clones-moving-averages": [
        *["--num_clones", "2", "--clone_on_cpu"],
        *["--moving_average_decay", "0.9"],
    ],
    "folder-augmented": [
        *["--dataset_dir", "{folder}", "--preprocessing_name", "inception"],
        *["--train_image_size", "16", "--batch_size", "8"],
    ],
    "tfrecords-augmented-moving-averages": [
        *["--dataset_dir", "{tfrecords}", "--dataset_name", "colors"],
        *["--preprocessing_name", "inception", "--train_image_size", "16"],
        *["--batch_size", "8", "--moving_average_decay", "0.9"],
    ],
}


# The signal each chain's interrupted run gets (after the finished run).
SIGNALS = {
    "digits-2-clones-moving-averages": signal.SIGKILL,
    "folder-augmented": signal.SIGTERM,
    "tfrecords-augmented-moving-averages": signal.SIGKILL,
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_continued_interrupted_then_rerun_equals_an_uninterrupted_run(
    case, images, tmp_path, capsys
):
    """The chain: a run that finishes at a random `--max_number_of_steps`
    below the target, the same command with the target, interrupted at a
    random later step (the command's process), and a last run left to
    finish. The runs that are not interrupted run `main` here."""
    flags = [
        f.format(folder=images / "folder", tfrecords=images / "tfrecords")
        for f in CASES[case]
    ]
    code, step, lines = in_process(tmp_path / "reference", flags, capsys)
    assert code == 0 and step == STEPS, lines[-10:]
    if case.startswith("tfrecords"):
        assert any("No held-out accuracy" in line for line in lines[:10])

    rng = np.random.default_rng(len(case))
    finish_at = int(rng.choice(FINISHED_AT))
    signal_at = int(rng.integers(finish_at + 2, STEPS - SIGNAL_MARGIN))
    chain = tmp_path / "chain"
    fewer = [*flags, "--max_number_of_steps", str(finish_at)]
    code, step, lines = in_process(chain, fewer, capsys)
    assert code == 0 and step == finish_at, lines[-10:]
    number = SIGNALS[case]
    code, stopped, lines = command(chain, flags, signal_at, number)
    expected = -number if number == signal.SIGKILL else PREEMPTED_EXIT_CODE
    assert code == expected and finish_at < stopped < STEPS, lines[-10:]
    assert any(line.startswith("Resumed from ") for line in lines)
    code, step, lines = in_process(chain, flags, capsys)
    assert code == 0 and step == STEPS, lines[-10:]
    assert any(line.startswith("Resumed from ") for line in lines)

    reference = final_weights(tmp_path / "reference")
    resumed = final_weights(chain)
    assert sorted(resumed) == sorted(reference)
    for name, value in reference.items():
        if not np.issubdtype(np.asarray(value).dtype, np.floating):
            np.testing.assert_array_equal(resumed[name], value, err_msg=name)
            continue
        np.testing.assert_allclose(
            resumed[name], value, rtol=1e-5, atol=1e-6, err_msg=name
        )
