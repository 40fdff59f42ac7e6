"""TensorFlow's C++ log level, for a process that runs a keras_slim command."""

import contextlib
import gc
import json
import os
import re
import sys
import tempfile

# An absl C++ info line (`I0000 00:00:...`) and absl's notice before it.
_INFO_LINE = re.compile(
    rb"^(I\d{4} \d\d:\d\d:|WARNING: All log messages before "
    rb"absl::InitializeLog\(\) is called)"
)

#: The console scripts and modules of keras_slim's commands.
COMMANDS = {
    "keras-slim-train": "keras_slim.image.train_image_classifier",
    "keras-slim-eval": "keras_slim.image.eval_image_classifier",
}


def command_arguments(argv):
    """The arguments of a keras_slim command in a process's command line.

    Args:
        argv: The process's full command line (`sys.orig_argv`: the
            interpreter first).

    Returns:
        The command's arguments (a list), or `None` when the process runs
        no keras_slim command.
    """
    modules = set(COMMANDS.values())
    for i, word in enumerate(argv):
        if os.path.basename(word) in COMMANDS:
            return list(argv[i + 1 :])
        if word == "-m" and i + 1 < len(argv) and argv[i + 1] in modules:
            return list(argv[i + 2 :])
    return None


def verbosity(arguments):
    """The value of `--verbosity` (absl's, also `-v`) in `arguments`, or 0.

    Args:
        arguments: A command's arguments.

    Returns:
        An int; 0 when absent or not an integer (the flag's parser then
        says so).
    """
    for i, word in enumerate(arguments):
        for name in ("--verbosity", "-v"):
            if word == name and i + 1 < len(arguments):
                value = arguments[i + 1]
            elif word.startswith(name + "="):
                value = word[len(name) + 1 :]
            else:
                continue
            try:
                return int(value)
            except ValueError:
                return 0
    return 0


def tf_cpp_min_log_level(level):
    """TensorFlow's C++ log level for a command's `--verbosity`.

    Args:
        level: The `--verbosity`.

    Returns:
        `"0"` (info lines too) from 1 on, else `"1"` (warnings and errors).
    """
    return "0" if level >= 1 else "1"


def keras_backend(environ=None):
    """The backend Keras runs on, read as Keras reads it, before it loads.

    Keras's own answer once Keras is imported; else `KERAS_BACKEND`, else
    the `"backend"` of `keras.json` in `KERAS_HOME` (`~/.keras`, or
    `/tmp/.keras` when the home directory is read-only), else
    `"tensorflow"` (`keras/src/backend/config.py`). Importing Keras to ask
    would import TensorFlow on its TensorFlow backend.

    Args:
        environ: The environment, or `None` for `os.environ`. Defaults to
            `None`.

    Returns:
        The backend's name: `"tensorflow"`, `"jax"`, ...
    """
    environ = os.environ if environ is None else environ
    keras = sys.modules.get("keras")
    if keras is not None and hasattr(keras, "backend"):
        return keras.backend.backend()
    return environ.get("KERAS_BACKEND") or _keras_json_backend(environ)


def _keras_json_backend(environ):
    """The `"backend"` of Keras's `keras.json`, else `"tensorflow"`."""
    home = environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        writable = os.access(base, os.W_OK)
        home = os.path.join(base if writable else "/tmp", ".keras")
    try:
        with open(os.path.join(os.path.expanduser(home), "keras.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = {}
    backend = config.get("backend") if isinstance(config, dict) else None
    return backend or "tensorflow"


def quiet_tensorflow_for_commands():
    """Sets `TF_CPP_MIN_LOG_LEVEL` in a keras_slim command's process and,
    at verbosity 0 on Keras's TensorFlow backend, imports TensorFlow
    without its C++ info lines (on another backend, none is imported).

    A command also pauses Python's cyclic garbage collector until
    `started()`: importing TensorFlow and Keras makes some 450,000
    objects, over which the collector would run its full passes again and
    again (a second of CPU at each command's start)."""
    arguments = command_arguments(getattr(sys, "orig_argv", sys.argv))
    if arguments is None:
        return
    if gc.isenabled():
        gc.disable()
        _PAUSED.append(True)
    level = tf_cpp_min_log_level(verbosity(arguments))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", level)
    quiet = os.environ["TF_CPP_MIN_LOG_LEVEL"] != "0"
    if quiet and keras_backend() == "tensorflow":
        with without_info_lines():
            import tensorflow  # noqa: F401


@contextlib.contextmanager
def without_info_lines():
    """Runs the body with file descriptor 2 captured, then writes back
    its lines except absl's C++ info lines (`_INFO_LINE`)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable stderr: nothing to filter
        yield
        return
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            kept = [ln for ln in captured if not _INFO_LINE.match(ln)]
            if kept:
                os.write(2, b"".join(kept))


# Whether `quiet_tensorflow_for_commands` paused the collector.
_PAUSED = []


def started():
    """Called once keras_slim's imports are done: a command's collector
    resumes, the objects of the imports frozen (`gc.freeze`: modules and
    their functions, never garbage, are not scanned again)."""
    if _PAUSED:
        _PAUSED.clear()
        gc.freeze()
        gc.enable()
