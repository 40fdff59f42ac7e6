"""Reading the checkpoints a warm start accepts, one reader per format."""

import importlib
import io
import os
import re
import zipfile

import h5py
import numpy as np

from keras_slim import _keras
from keras_slim import checks
from keras_slim._backend import tensorflow as tf
from keras_slim.gradients import variable_path

_OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
_KERAS_SUFFIXES = (".h5", ".keras")
# The files of a checkpoint prefix, which users pass for the prefix.
_CHECKPOINT_FILE = re.compile(r"(.+)(\.index|\.data-\d+-of-\d+)$")
#: What a warm start reads, for the error messages.
EXPECTED = (
    "Expected a checkpoint directory, a checkpoint prefix (such as "
    "'model.ckpt-123', beside its .index and .data files) or a Keras "
    ".weights.h5 / .keras file."
)
# What h5py's reader raises on a damaged file; TensorFlow's raises these
# too (`IndexError` for a data file shorter than its index says: its
# OUT_OF_RANGE) and an `OpError` (`_tf_read_errors`).
_FILE_ERRORS = (IndexError, OSError)


def _tf_read_errors():
    """What TensorFlow's readers raise on a damaged file: an `OpError`
    (DataLossError, ...) and `_FILE_ERRORS`."""
    return (tf.errors.OpError, *_FILE_ERRORS)


class TF1Reader:
    """A name-based checkpoint: variable name -> value."""

    format = "TF1 name-based checkpoint"
    kind = "tf1"

    def __init__(self, prefix, reader=None):
        self.path = prefix
        self._reader = reader or tf.train.load_checkpoint(prefix)
        shapes = self._reader.get_variable_to_shape_map()
        dtypes = self._reader.get_variable_to_dtype_map()
        self._keys = {name: name for name in shapes}
        self.entries = {
            name: (tuple(shapes[name]), dtypes[name].name) for name in shapes
        }

    def lookup(self, key):
        """The name `key` stands for in this checkpoint, or `None`."""
        return key if key in self.entries else None

    def read(self, name):
        try:
            return np.asarray(self._reader.get_tensor(self._keys[name]))
        except _tf_read_errors() as error:
            raise damaged(self.path, error) from None

    def default_keys(self, variables, layers=()):
        """A variable's key is its path."""
        del layers
        return {variable_path(v): variable_path(v) for v in variables}

    def close(self):
        pass


class TF2Reader(TF1Reader):
    """An object-based checkpoint, named through its object graph.

    Keys are relative to the `model` object when the root has one (the
    checkpoints keras_slim's `Checkpoints` writes, or
    `tf.train.Checkpoint(model=...)`), so a variable's default key is its
    path there too.
    """

    format = "TF2 object-based checkpoint"
    kind = "tf2"

    def __init__(self, prefix, reader):
        self.path = prefix
        self._reader = reader
        shapes = reader.get_variable_to_shape_map()
        dtypes = reader.get_variable_to_dtype_map()
        graph = _keras.TrackableObjectGraph()
        graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
        self._keys = _object_paths(graph)
        self.entries = {
            name: (tuple(shapes[key]), dtypes[key].name)
            for name, key in self._keys.items()
            if key in shapes
        }
        root_names = {child.local_name for child in graph.nodes[0].children}
        self.prefix = "model/" if "model" in root_names else ""

    def lookup(self, key):
        name = self.prefix + key
        return name if name in self.entries else None


def _object_paths(graph):
    """{object path: checkpoint key} of every variable in the graph.

    A breadth-first walk from the root, so an object reachable in several
    ways is named by its shortest path.
    """
    paths = {0: ""}
    queue = [0]
    keys = {}
    while queue:
        node_id = queue.pop(0)
        node = graph.nodes[node_id]
        for attribute in node.attributes:
            if attribute.name == "VARIABLE_VALUE":
                keys[paths[node_id]] = attribute.checkpoint_key
        for child in node.children:
            if child.node_id not in paths:
                prefix = paths[node_id] + "/" if paths[node_id] else ""
                paths[child.node_id] = prefix + child.local_name
                queue.append(child.node_id)
    return keys


class KerasReader:
    """A Keras `.weights.h5` file, or the weights inside a `.keras` file."""

    format = "Keras weights file"
    kind = "keras"

    def __init__(self, path):
        self.path = path
        if path.endswith(".keras"):
            with zipfile.ZipFile(path) as archive:
                if "model.weights.h5" not in archive.namelist():
                    raise zipfile.BadZipFile("no model.weights.h5 inside")
                data = archive.read("model.weights.h5")
            self._file = h5py.File(io.BytesIO(data), "r")
        else:
            self._file = h5py.File(path, "r")
        self.entries = {}
        self._layer_groups = {}
        self._file.visititems(self._visit)

    def _visit(self, name, item):
        if isinstance(item, h5py.Dataset):
            self.entries[name] = (tuple(item.shape), item.dtype.name)
        elif name.split("/")[-1] == "vars" and "name" in item.attrs:
            layer = item.attrs["name"]
            layer = layer.decode() if isinstance(layer, bytes) else str(layer)
            self._layer_groups.setdefault(layer, []).append(name)

    def lookup(self, key):
        return key if key in self.entries else None

    def read(self, name):
        try:
            return np.asarray(self._file[name])
        except _FILE_ERRORS as error:
            raise damaged(self.path, error) from None

    def close(self):
        self._file.close()

    def default_keys(self, variables, layers=()):
        """Each variable's dataset, through the name of its layer.

        Keras stores a layer's variables as `vars/0`, `vars/1`, ... in the
        order of the layer's `save_own_variables`, under a group that
        records the layer's name. A layer name found in several groups, or
        several layers of one name, is ambiguous and maps nothing.
        """
        wanted = {variable_path(v) for v in variables}
        names = [layer.name for layer in layers]
        keys = {}
        for layer in layers:
            groups = self._layer_groups.get(layer.name, [])
            if len(groups) != 1 or names.count(layer.name) != 1:
                continue
            store = {}
            layer.save_own_variables(store)
            for index, value in store.items():
                path = getattr(value, "path", None)
                if path in wanted:
                    keys[path] = f"{groups[0]}/{index}"
        return keys


def resolve(checkpoint):
    """Opens a checkpoint given as a directory, prefix or Keras file.

    Args:
        checkpoint: A directory (its latest checkpoint), a checkpoint
            prefix, or a `.weights.h5` / `.keras` file.

    Returns:
        A reader: `entries` ({name: (shape, dtype)}), `lookup(key)`,
        `read(name)`, `default_keys(variables, layers)`, `close()`,
        `format` (its description), `kind` (`"tf1"`, `"tf2"` or
        `"keras"`) and `path`.

    Raises:
        FileNotFoundError: if nothing is at `checkpoint` (a file of a
            checkpoint, `.index` or `.data-...`, names its prefix).
        ImportError: for a TF checkpoint (a directory or a prefix) when
            TensorFlow cannot be imported, saying it is needed.
        ValueError: for a file that is not a checkpoint, or a truncated or
            damaged one (`damaged`); its `read` raises the same.
    """
    path = checks.path("checkpoint", checkpoint)
    if os.path.isdir(path):
        _require_tensorflow(path)
        latest = tf.train.latest_checkpoint(path)
        if latest is None:
            raise FileNotFoundError(
                f"The directory {path!r} holds no checkpoint (no "
                f"'checkpoint' file naming one). {EXPECTED}"
            )
        path = latest
    if path.endswith(_KERAS_SUFFIXES):
        if not os.path.isfile(path):
            raise FileNotFoundError(f"The Keras file {path!r} does not exist.")
        return _open(KerasReader, path, _FILE_ERRORS)
    _require_tensorflow(path)
    if not tf.io.gfile.exists(path + ".index"):
        raise FileNotFoundError(_not_found(path, tf.io.gfile.exists))
    return _open(_prefix_reader, path, _tf_read_errors())


def _require_tensorflow(path):
    """Imports TensorFlow, which reads TF checkpoints, or says it is
    needed (a path with nothing at it is not found, as with it)."""
    try:
        importlib.import_module("tensorflow")
    except ImportError as error:
        there = os.path.exists(path) or os.path.exists(path + ".index")
        if "://" not in path and not there:
            raise FileNotFoundError(_not_found(path, os.path.exists)) from None
        raise ImportError(
            f"Reading the checkpoint {path!r} needs TensorFlow, which "
            f"cannot be imported in this process ({error}). Install it "
            "(`pip install tensorflow-cpu`) to read TF1, TF2 and TF-Slim "
            "checkpoints, or pass a Keras .weights.h5 / .keras file, which "
            "reads without it."
        ) from error


def _open(reader, path, errors):
    """`reader(path)`, a damaged or foreign file (`errors`, or not a zip
    file) raising `damaged`."""
    try:
        return reader(path)
    except (*errors, zipfile.BadZipFile) as error:
        raise damaged(path, error) from None


def _prefix_reader(path):
    reader = tf.train.load_checkpoint(path)
    if _OBJECT_GRAPH_KEY in reader.get_variable_to_shape_map():
        return TF2Reader(path, reader)
    return TF1Reader(path, reader)


def _not_found(path, exists):
    """Why there is no checkpoint at `path`, naming its prefix when `path`
    is one of a checkpoint's files (`exists`: whether a file is there)."""
    prefix = _CHECKPOINT_FILE.match(path)
    if prefix and exists(prefix.group(1) + ".index"):
        return (
            f"No checkpoint at {path!r}: it is a file of the checkpoint "
            f"{prefix.group(1)!r}. Pass that prefix, without "
            f"{prefix.group(2)!r}."
        )
    return (
        f"No checkpoint at {path!r}: neither a directory, nor a "
        f"checkpoint prefix (no {path + '.index'!r}), nor a Keras "
        ".weights.h5 / .keras file."
    )


def damaged(path, error):
    """The error for a checkpoint that exists but cannot be read.

    Args:
        path: The checkpoint (a prefix or a Keras file).
        error: What TensorFlow, h5py or zipfile raised reading it.

    Returns:
        A `ValueError` naming `path`, what was said and what to do.
    """
    said = getattr(error, "message", None) or str(error) or type(error).__name__
    return ValueError(
        f"The checkpoint {path!r} could not be read ({said.strip()}): it is "
        "not a checkpoint, or a truncated or damaged one (an interrupted "
        f"copy or download?). Copy or download it again. {EXPECTED}"
    )
