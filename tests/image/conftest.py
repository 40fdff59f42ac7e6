"""One run of TF-Slim's own nets for every test module here that needs it.

Each module lists its nets as `SPECS` (see slim_peer.py); the `slim`
fixture runs the peer once per test session for the specs of the modules
collected, in one process (one TensorFlow import), and gives its output
directory.
"""

import hashlib

import pytest

from tests.image.nets import peer


@pytest.fixture(scope="session")
def slim(request, tmp_path_factory):
    modules = sorted(
        {
            item.module
            for item in request.session.items
            if getattr(item.module, "SPECS", None)
        },
        key=lambda module: module.__name__,
    )
    # A net two modules use (the nets' tests, the commands') runs once.
    specs = list(
        {
            spec["name"]: spec for module in modules for spec in module.SPECS
        }.values()
    )
    names = ",".join(spec["name"] for spec in specs)
    key = "tf_slim_" + hashlib.sha1(names.encode()).hexdigest()[:10]
    return peer.run(tmp_path_factory, key, specs)


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _tf1_prefix(directory):
    from tests.checkpoint_files import slim_values
    from tests.checkpoint_files import write_tf1

    return write_tf1(directory / "tf1" / "model.ckpt", slim_values())


def _random_file(directory):
    path = directory / "random.bin"
    path.write_bytes(bytes(range(256)) * 2)
    return str(path), {"both": f"No checkpoint at {str(path)!r}: neither"}


def _random_weights_file(directory):
    path = directory / "random.weights.h5"
    path.write_bytes(bytes(range(256)) * 2)
    return str(path), {"both": f"The checkpoint {str(path)!r} could not be"}


def _truncated_index(directory):
    prefix = _tf1_prefix(directory)
    _truncated(directory / "tf1" / "model.ckpt.index")
    return prefix, {"both": f"The checkpoint {prefix!r} could not be read"}


def _truncated_data(directory):
    """A keras_slim checkpoint of the default net (digits_cnn, 10 classes)
    whose data file lost its second half."""
    import keras

    from keras_slim import training_state
    from keras_slim.image import nets

    model = nets.build("digits_cnn", 10)
    model.compile(optimizer=keras.optimizers.Adam(), loss="mse")
    model.optimizer.build(model.trainable_variables)
    prefix = training_state.training_checkpoint(model).write(
        str(directory / "model.ckpt-1")
    )
    _truncated(directory / "model.ckpt-1.data-00000-of-00001")
    return prefix, {"both": f"The checkpoint {prefix!r} could not be read"}


def _index_file(directory):
    prefix = _tf1_prefix(directory)
    return prefix + ".index", {
        "both": f"it is a file of the checkpoint {prefix!r}. Pass that prefix"
    }


def _empty_directory(directory):
    path = directory / "empty"
    path.mkdir()
    return str(path), {
        "train": f"The directory {str(path)!r} holds no checkpoint",
        "eval": f"No checkpoint in --checkpoint_path={str(path)!r}",
        "export": f"flag --checkpoint_path: no checkpoint in {str(path)!r}",
    }


@pytest.fixture(
    params=[
        _random_file,
        _random_weights_file,
        _truncated_index,
        _truncated_data,
        _index_file,
        _empty_directory,
    ],
    ids=lambda make: make.__name__.lstrip("_"),
)
def bad_checkpoint(request, tmp_path):
    """A `--checkpoint_path` that is not a checkpoint: `(path, {command:
    what its error says})`, `"both"` for every command (train, eval,
    export)."""
    path, said = request.param(tmp_path)
    said.setdefault("train", said.get("both"))
    said.setdefault("eval", said.get("both"))
    said.setdefault("export", said.get("both"))
    return path, said
