"""A mixed-precision run through the three commands, as a user runs them:
keras-slim-train with its held-out evaluation and --keep_best, then
keras-slim-eval and keras-slim-export on its checkpoint."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from keras_slim.image import eval_image_classifier as eval_cli
from keras_slim.image import export_inference_graph as export_cli
from keras_slim.image import train_image_classifier as train_cli
from keras_slim.image.datasets import digits

STEPS = 40


def held_out(output):
    """`(accuracy, step)` of the line training prints at its end."""
    found = re.search(
        r"held-out accuracy: ([\d.]+) on 355 digits \(global step (\d+)\)",
        output,
    )
    assert found, output
    return float(found.group(1)), int(found.group(2))


def evaluated(output):
    """`(step, accuracy)` of keras-slim-eval's result line."""
    found = re.search(r"global step (\d+): eval/Accuracy = ([\d.]+)", output)
    assert found, output
    return int(found.group(1)), float(found.group(2))


def best_step(directory):
    with open(directory / "best" / "best.json") as file:
        return json.load(file)["global_step"]


@pytest.mark.parametrize("clones", [1, 2])
@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
def test_a_mixed_precision_run_through_the_commands(
    policy, clones, tmp_path, capsys
):
    train_dir = tmp_path / "mp"
    # TF-Slim's defaults (RMSProp at 0.01): about 0.93 after 40 steps.
    argv = [
        *["--train_dir", str(train_dir), "--mixed_precision", policy],
        *["--max_number_of_steps", str(STEPS), "--keep_best"],
        *["--save_summaries_secs", "3600", "--nosummarize_activations"],
    ]
    if clones == 2:
        argv += ["--num_clones", "2", "--clone_on_cpu"]
    assert train_cli.main(argv) == 0
    accuracy, step = held_out(capsys.readouterr().out)
    assert step == STEPS
    assert accuracy > 0.5  # 10 classes: chance is 0.1
    assert best_step(train_dir) == STEPS  # keep-best's evaluation

    assert eval_cli.main(["--checkpoint_path", str(train_dir)]) == 0
    step, eval_accuracy = evaluated(capsys.readouterr().out)
    assert step == STEPS  # read through the loss scale's optimizer
    # The same weights, evaluated in float32: a digit or two may differ.
    assert eval_accuracy == pytest.approx(accuracy, abs=3 / 355)
    assert best_step(train_dir / "eval") == STEPS

    saved = tmp_path / "saved"
    argv = ["--checkpoint_path", str(train_dir), "--output_file", str(saved)]
    assert export_cli.main(argv) == 0
    _, (x, y) = digits.load()
    serve = tf.saved_model.load(str(saved)).signatures["serving_default"]
    predicted = np.argmax(serve(input=tf.constant(x))["logits"], axis=-1)
    # keras-slim-eval's accuracy, printed to 4 decimals.
    assert np.mean(predicted == y) == pytest.approx(eval_accuracy, abs=1e-4)
