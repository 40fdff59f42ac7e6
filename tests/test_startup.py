"""A keras_slim command's process sets TensorFlow's C++ log level before
TensorFlow loads; a program importing keras_slim is left alone."""

import os
import pathlib
import subprocess
import sys

import pytest

from keras_slim import _startup


@pytest.mark.parametrize(
    "argv, arguments",
    [
        (
            ["/v/bin/python", "/v/bin/keras-slim-train", "--a", "1"],
            ["--a", "1"],
        ),
        (["python", "/v/bin/keras-slim-eval"], []),
        (
            ["python", "-m", "keras_slim.image.train_image_classifier", "-v"],
            ["-v"],
        ),
        (["python", "train.py", "--verbosity", "1"], None),
        (["python", "-m", "keras_slim.cluster", "--workers", "2"], None),
        (["python", "-c", "import keras_slim"], None),
    ],
)
def test_command_arguments(argv, arguments):
    assert _startup.command_arguments(argv) == arguments


@pytest.mark.parametrize(
    "arguments, level",
    [
        ([], 0),
        (["--verbosity", "1"], 1),
        (["--verbosity=2"], 2),
        (["-v", "-1"], -1),
        (["-v=1"], 1),
        (["--verbosity", "loud"], 0),
    ],
)
def test_verbosity(arguments, level):
    assert _startup.verbosity(arguments) == level


def test_the_level_keeps_warnings_and_brings_info_back_from_1():
    assert _startup.tf_cpp_min_log_level(0) == "1"
    assert _startup.tf_cpp_min_log_level(-1) == "1"
    assert _startup.tf_cpp_min_log_level(1) == "0"


def test_verbosity_1_brings_tensorflows_info_lines_back(tmp_path):
    """`--help` loads TensorFlow (the package imports it) and exits: its
    import-time info line shows only with `--verbosity 1`."""
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    script = pathlib.Path(sys.executable).parent / "keras-slim-eval"
    outputs = {}
    for level in ("0", "1"):
        outputs[level] = subprocess.run(
            [str(script), "--verbosity", level, "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=tmp_path,
        )
        assert outputs[level].returncode == 0, outputs[level].stderr
    assert "cpu_feature_guard" not in outputs["0"].stderr
    assert "cpu_feature_guard" in outputs["1"].stderr


def test_info_lines_written_to_fd_2_are_dropped_and_the_rest_kept():
    """What a C++ library writes to file descriptor 2 during the import:
    absl's info lines go, warnings and errors stay, in order."""
    code = (
        "import importlib.util, os\n"
        # The module alone: the package would import TensorFlow first.
        "spec = importlib.util.spec_from_file_location("
        f"'s', {_startup.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(module)\n"
        "without_info_lines = module.without_info_lines\n"
        "with without_info_lines():\n"
        "    os.write(2, b'WARNING: All log messages before "
        "absl::InitializeLog() is called are written to STDERR\\n')\n"
        "    os.write(2, b'I0000 00:00:1795645391.18 6278 port.cc:153] "
        "oneDNN custom operations are on.\\n')\n"
        "    os.write(2, b'W0000 00:00:1795645391.18 6278 x.cc:1] kept\\n')\n"
        "    os.write(2, b'E0000 00:00:1795645391.18 6278 y.cc:2] "
        "kept too\\n')\n"
        "os.write(2, b'after\\n')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.decode().splitlines() == [
        "W0000 00:00:1795645391.18 6278 x.cc:1] kept",
        "E0000 00:00:1795645391.18 6278 y.cc:2] kept too",
        "after",
    ]
