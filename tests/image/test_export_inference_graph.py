"""keras-slim-export: a SavedModel and LiteRT models of a trained net (a
keras-slim-train run in this process, with moving averages) against the
net restored as keras-slim-eval restores it; a TF-Slim checkpoint's
averages; loading without keras_slim; bad flags refused before any work;
no partial export left behind."""

import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
import tensorflow as tf
import tomllib

from keras_slim import training_state
from keras_slim.image import export_inference_graph as export_cli
from keras_slim.image import nets
from keras_slim.image import train_image_classifier as train_cli
from keras_slim.image.datasets import digits
from tests.checkpoint_files import write_tf1

ROOT = pathlib.Path(__file__).resolve().parents[2]
_VALUE = ".ATTRIBUTES/VARIABLE_VALUE"
STEPS = 40  # of the trained fixture


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A train_dir of digits_cnn after 40 steps with moving averages.

    Adam at a learning rate of 0.1 settles batch norm's statistics in 40
    steps (measured: all 10 classes predicted, the quantized model agrees
    on 350 of 355 digits); at 0.01 it took 150 steps (fewer gave one
    class for all, and the agreement of the quantized model says little).
    """
    train_dir = tmp_path_factory.mktemp("export") / "train"
    with pytest.MonkeyPatch.context() as patch:
        # No held-out split (the command's path for a --dataset_dir
        # without one): the accuracy printed at the end is not read here.
        patch.setattr(train_cli, "_held_out_task", lambda flags: None)
        code = train_cli.main(
            [
                *["--train_dir", str(train_dir)],
                *["--max_number_of_steps", str(STEPS)],
                *["--batch_size", "32", "--moving_average_decay", "0.9"],
                *["--optimizer", "adam", "--learning_rate", "0.1"],
                *["--save_summaries_secs", "3600"],
                *["--log_every_n_steps", "50", "--nosummarize_activations"],
            ]
        )
    assert code == 0
    return train_dir


@pytest.fixture(scope="module")
def images():
    _, (x, _) = digits.load()
    return x  # the 355 held-out digits, 8x8x1 in [0, 1]


@pytest.fixture(scope="module")
def exports(trained):
    """The train_dir exported as a SavedModel and a quantized LiteRT model
    (the command), a float LiteRT model converted from that SavedModel
    (what the command converts; written once, not again for it); and the
    logits of the net keras-slim-eval restores."""
    out = trained.parent
    paths = {
        "saved": out / "saved",
        "float": out / "digits.tflite",
        "quantized": out / "digits_q.tflite",
    }
    for kind, extra in (("saved", []), ("quantized", ["--quantize"])):
        argv = ["--checkpoint_path", str(trained)]
        argv += ["--output_file", str(paths[kind]), *extra]
        assert export_cli.main(argv) == 0
    paths["float"].write_bytes(
        export_cli._tflite(str(paths["saved"]), quantize=False)
    )
    model = nets.build("digits_cnn", 10)
    prefix = tf.train.latest_checkpoint(str(trained))
    step, averaged = training_state.restore_for_inference(model, prefix)
    assert (step, averaged) == (STEPS, True)
    return paths, model


def _lite(path, images):
    interpreter = tf.lite.Interpreter(model_path=str(path))
    runner = interpreter.get_signature_runner("serving_default")
    return runner(input=images)


def test_the_saved_model_is_the_eval_model_with_its_averages(
    exports, images, trained
):
    paths, model = exports
    loaded = tf.saved_model.load(str(paths["saved"]))
    serve = loaded.signatures["serving_default"]
    assert serve.structured_input_signature[1]["input"].shape.as_list() == [
        None,
        8,
        8,
        1,
    ]
    outputs = serve(input=tf.constant(images))
    expected = model(images, training=False).numpy()
    np.testing.assert_allclose(outputs["logits"], expected, atol=1e-5)
    np.testing.assert_allclose(
        outputs["probabilities"], tf.nn.softmax(expected), atol=1e-6
    )
    # The averages are what was exported: the trained weights differ.
    prefix = tf.train.latest_checkpoint(str(trained))
    raw = nets.build("digits_cnn", 10)
    training_state.restore_for_inference(raw, prefix)
    reader = tf.train.load_checkpoint(prefix)
    for variable in raw.trainable_variables:
        key = variable.path.replace("/", ".S")
        variable.assign(reader.get_tensor(f"model/{key}/{_VALUE}"))
    assert np.abs(raw(images, training=False) - expected).max() > 1e-3


def test_the_litert_models_float_and_quantized(exports, images):
    paths, model = exports
    expected = model(images, training=False).numpy()
    lite = _lite(paths["float"], images)
    np.testing.assert_allclose(lite["logits"], expected, atol=1e-3)
    quantized = _lite(paths["quantized"], images)
    size = {k: os.path.getsize(paths[k]) for k in ("float", "quantized")}
    assert size["quantized"] < 0.6 * size["float"]
    predicted = expected.argmax(-1)
    assert len(np.unique(predicted)) >= 5  # not one class for all
    agree = np.mean(quantized["logits"].argmax(-1) == predicted)
    assert agree >= 0.95, agree  # measured: 0.986, 350 of 355 digits


_FRESH = textwrap.dedent(
    """
    import importlib.abc
    import sys

    BLOCKED = ("keras_slim", "keras", "tf_keras")


    class Refused(importlib.abc.Loader):
        def create_module(self, spec):
            return None

        def exec_module(self, module):
            raise ImportError(f"blocked: {module.__name__}")


    class Blocked(importlib.abc.MetaPathFinder):
        # Found (TensorFlow looks for keras's directory), never loaded.
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] not in BLOCKED:
                return None
            for finder in sys.meta_path:
                find = getattr(finder, "find_spec", None)
                spec = None if finder is self or not find else find(
                    name, path, target
                )
                if spec is not None:
                    spec.loader = Refused()
                    return spec
            return None


    sys.meta_path.insert(0, Blocked())
    import numpy as np
    import tensorflow as tf

    images_file, saved, lite, out = sys.argv[1:]
    images = np.load(images_file)
    serve = tf.saved_model.load(saved).signatures["serving_default"]
    interpreter = tf.lite.Interpreter(model_path=lite)
    runner = interpreter.get_signature_runner("serving_default")
    np.savez(
        out,
        saved=serve(input=tf.constant(images))["logits"].numpy(),
        lite=runner(input=images)["logits"],
    )
    print("loaded:", [m for m in sys.modules if m.split(".")[0] in BLOCKED])
    try:
        import keras_slim
    except ImportError as error:
        print(error)
    """
)


def test_the_exports_run_without_keras_slim_nor_keras(
    exports, images, tmp_path
):
    """One fresh process for both formats, keras_slim and keras blocked."""
    paths, model = exports
    np.save(tmp_path / "images.npy", images)
    script = tmp_path / "fresh.py"
    script.write_text(_FRESH)
    result = subprocess.run(
        [
            sys.executable,
            str(script),
            str(tmp_path / "images.npy"),
            str(paths["saved"]),
            str(paths["float"]),
            str(tmp_path / "out.npz"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "loaded: []" in result.stdout
    assert "blocked: keras_slim" in result.stdout  # the blocker works
    out = np.load(tmp_path / "out.npz")
    expected = model(images, training=False).numpy()
    np.testing.assert_allclose(out["saved"], expected, atol=1e-5)
    np.testing.assert_allclose(out["lite"], expected, atol=1e-3)


def _slim_checkpoint(directory, model, name_map):
    """A TF-Slim (TF1) checkpoint of `model`'s variables in TF-Slim's
    names, with a different `ExponentialMovingAverage` of each trainable
    one; returns the prefix and the averaged values by path."""
    rng = np.random.default_rng(3)
    trainable = {id(v) for v in model.trainable_variables}
    values, averaged = {}, {}
    for variable in model.variables:
        shape = tuple(variable.shape)
        value = rng.normal(0, 0.3, shape).astype("float32")
        if "variance" in variable.path:
            value = np.abs(value) + 0.5
        values[name_map(variable.path)] = value
        averaged[variable.path] = value
        if id(variable) in trainable:
            average = rng.normal(0, 0.3, shape).astype("float32")
            name = name_map(variable.path) + "/ExponentialMovingAverage"
            values[name] = averaged[variable.path] = average
    return write_tf1(directory / "model.ckpt", values), averaged


def test_a_tf_slim_checkpoint_exports_its_moving_averages(tmp_path):
    """mobilenet_v1_025 from a TF-Slim checkpoint (flowers' 5 classes,
    known without --dataset_dir), its averages assigned by name as the
    reference."""
    name = "mobilenet_v1_025"
    model = nets.build(name, 5, image_size=32)
    prefix, averaged = _slim_checkpoint(
        tmp_path, model, nets.slim_name_map(name)
    )
    for variable in model.variables:
        variable.assign(averaged[variable.path])
    output = tmp_path / "saved"
    code = export_cli.main(
        [
            *["--model_name", name, "--image_size", "32"],
            *["--dataset_name", "flowers", "--checkpoint_path", prefix],
            *["--moving_average_decay", "0.9999", "--batch_size", "4"],
            *["--output_file", str(output)],
        ]
    )
    assert code == 0
    images = np.random.default_rng(0).uniform(-1, 1, (4, 32, 32, 3))
    images = images.astype("float32")
    serve = tf.saved_model.load(str(output)).signatures["serving_default"]
    assert serve.structured_input_signature[1]["input"].shape[0] == 4
    logits = serve(input=tf.constant(images))["logits"].numpy()
    expected = model(images, training=False).numpy()
    assert np.abs(expected).max() > 0.1  # not all near zero
    np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_a_net_with_aux_logits_exports_its_main_logits(tmp_path):
    """TF-Slim's AuxLogits (a second output) are left out."""
    inputs = keras.Input((4, 4, 2))
    flat = keras.layers.Flatten()(inputs)
    logits = keras.layers.Dense(3, name="logits")(flat)
    aux = keras.layers.Dense(3, name="aux")(flat)
    model = keras.Model(inputs, [logits, aux])
    images = np.random.default_rng(0).normal(size=(5, 4, 4, 2))
    images = images.astype("float32")
    assert export_cli.export_model(model, tmp_path / "m") == "saved_model"
    serve = tf.saved_model.load(str(tmp_path / "m")).signatures[
        "serving_default"
    ]
    outputs = serve(input=tf.constant(images))
    assert sorted(outputs) == ["logits", "probabilities"]
    main, other = model(images)
    np.testing.assert_allclose(outputs["logits"], main, atol=1e-6)
    assert np.abs(outputs["logits"] - other).max() > 1e-3


def test_a_failed_export_leaves_the_old_output(tmp_path, monkeypatch):
    """Written beside the output, then renamed: a conversion that fails
    leaves the previous file and no temporary one."""
    output = tmp_path / "digits.tflite"
    output.write_bytes(b"the previous export")

    def fails(saved_model, *, quantize):
        raise RuntimeError("conversion failed")

    monkeypatch.setattr(export_cli, "_tflite", fails)
    with pytest.raises(RuntimeError, match="conversion failed"):
        export_cli.export_model(nets.build("digits_cnn", 10), output)
    assert output.read_bytes() == b"the previous export"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["digits.tflite"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model_name", "resnet_v3"], "flag --model_name=resnet_v3: value"),
        ([], "You must supply the path to save to with --output_file"),
        (
            ["--output_file", "{tmp}/m.tflite", "--is_training"],
            "--is_training exports a SavedModel only",
        ),
        (
            ["--output_file", "{tmp}/m", "--quantize"],
            "--quantize quantizes a .tflite model",
        ),
        (
            ["--output_file", "{tmp}/graph.pb"],
            "names a GraphDef, which TF-Slim's export wrote",
        ),
        (
            ["--output_file", "{tmp}", "--dataset_name", "flowers"],
            "is a directory that holds no SavedModel: not replaced",
        ),
        (
            ["--output_file", "{tmp}/m", "--checkpoint_path", "{tmp}/none"],
            "flag --checkpoint_path: '{tmp}/none' is neither a directory",
        ),
        (
            ["--output_file", "{tmp}/m", "--dataset_name", "colors"],
            "'colors' needs --dataset_dir to count its classes",
        ),
        (
            ["--output_file", "{tmp}/m", "--labels_offset", "1"],
            "flag --labels_offset: the bundled digits have no background",
        ),
        (
            ["--output_file", "{tmp}/m", "--is_video_model"],
            "flag --is_video_model: keras_slim.image.nets has no video",
        ),
        (
            ["--output_file", "{tmp}/m", "--write_text_graphdef"],
            "flag --write_text_graphdef: keras-slim-export writes",
        ),
        (
            ["--model_name", "vgg_16", "--image_size", "32"],
            "flag --image_size: vgg_16 takes images of at least 224",
        ),
    ],
)
def test_bad_flags_are_refused_before_any_work(args, message, tmp_path, capsys):
    args = [a.format(tmp=tmp_path) for a in args]
    with pytest.raises(SystemExit) as exit_info:
        export_cli.main(args)
    assert exit_info.value.code == 2
    assert message.format(tmp=tmp_path) in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_path_that_is_not_a_checkpoint_is_refused(
    bad_checkpoint, tmp_path, capsys
):
    """Exit 2 naming it, nothing written (tests/image/conftest.py)."""
    path, said = bad_checkpoint
    output = tmp_path / "export"
    try:
        code = export_cli.main(
            ["--checkpoint_path", path, "--output_file", str(output)]
        )
    except SystemExit as exit_info:
        code = exit_info.code
    assert code == 2
    captured = capsys.readouterr()
    assert said["export"] in captured.err
    assert "Traceback" not in captured.err
    assert not output.exists()


def test_the_console_script(monkeypatch, capsys):
    """pyproject's `keras-slim-export` is `console`, which exits as
    `main` says (an error's exit: `sys.exit`)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())
    entry = scripts["project"]["scripts"]["keras-slim-export"]
    assert entry == "keras_slim.image.export_inference_graph:console"
    monkeypatch.setattr(sys, "argv", ["keras-slim-export"])
    with pytest.raises(SystemExit) as exit_info:
        export_cli.console()
    assert exit_info.value.code == 2
    assert "keras-slim-export: error: You must supply" in (
        capsys.readouterr().err
    )


def test_every_flag_has_help():
    # Each is in the Commands reference with it (tests/
    # test_commands_reference.py); the migration guide links there.
    flags = export_cli.parser().flags()
    assert [f.name for f in flags if not f.help.strip()] == []
