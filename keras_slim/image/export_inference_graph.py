"""`keras-slim-export`: TF-Slim's export_inference_graph.py on keras_slim."""

import argparse
import logging
import os
import sys
import tempfile

import keras
import tensorflow as tf

from keras_slim.image import _console
from keras_slim.image import _flag_parser
from keras_slim.image import _flag_types
from keras_slim.image import _flags
from keras_slim.image import _inference_checkpoint
from keras_slim.image import _task
from keras_slim.image import nets
from keras_slim.image.datasets import layouts

_LOG = logging.getLogger("keras_slim")

SAVED_MODEL = "saved_model"
"""`export_model`'s format for a directory: a SavedModel."""

TFLITE = "tflite"
"""`export_model`'s format for a name ending `.tflite`: a LiteRT model."""


def parser():
    """The command's flags (absl's), with TF-Slim's names, defaults and help.

    Returns:
        A `FlagParser`: `parser().parse_args(argv)` returns the flags.
    """
    p = _flag_parser.FlagParser("keras-slim-export", __doc__.split("\n\n")[0])
    add = p.add
    _add_model_flags(add)
    _add_output_flags(add)
    _flags.add_inference_average_flag(add)
    _flags.add_logging_flags(add)
    return p


def _add_model_flags(add):
    """Adds the net's flags: which net, its input, its classes.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "model_name",
        "digits_cnn",
        "The name of the architecture to save (keras_slim.image.nets: "
        "TF-Slim's nets, or a small CNN for the digits).",
        choices=nets.NETWORKS,
    )
    add(
        "is_training",
        False,
        "Whether to save out a training-focused version of the model "
        "(batch statistics and dropout; a SavedModel only).",
    )
    add(
        "image_size",
        None,
        "The image size to use, otherwise use the model default_image_size.",
        parse=_flag_types.positive_int,
    )
    add(
        "batch_size",
        None,
        'Batch size for the exported model. Defaulted to "None" so batch '
        "size can be specified at model runtime.",
        parse=_flag_types.positive_int,
    )
    add(
        "dataset_name",
        _flags.DIGITS,
        "The name of the dataset to use with the model: its number of "
        "classes ('digits': scikit-learn's digits, bundled; TF-Slim's "
        "dataset_factory names; another name reads --dataset_dir).",
    )
    add(
        "labels_offset",
        0,
        "An offset for the labels in the dataset. This flag is primarily "
        "used to evaluate the VGG and ResNet architectures which do not use "
        "a background class for the ImageNet dataset.",
        parse=_flag_types.non_negative_int,
    )


def _add_output_flags(add):
    """Adds what is written and what it is made from: the output file and
    its format's options, the dataset's directory, the checkpoint.

    Args:
        add: The command's `FlagParser.add`.
    """
    add(
        "output_file",
        "",
        "Where to save the resulting file to: a directory for a "
        "SavedModel, a name ending .tflite for a LiteRT (TFLite) model.",
    )
    add(
        "dataset_dir",
        None,
        "The directory where the dataset files are stored, read for its "
        "classes and channels when --dataset_name does not fix them.",
    )
    add(
        "quantize",
        False,
        "whether to use quantized graph or not (a .tflite output: "
        "weights in 8 bits, TFLite's dynamic range quantization).",
    )
    add(
        "is_video_model",
        False,
        "whether to use 5-D inputs for video model (only false is "
        "taken: keras_slim.image.nets has no video nets).",
    )
    add(
        "num_frames",
        None,
        "The number of frames to use. Only used if is_video_model is True.",
        parse=_flag_types.positive_int,
    )
    add(
        "write_text_graphdef",
        False,
        "Whether to write a text version of graphdef (only false is "
        "taken: a SavedModel is binary; saved_model_cli show --all "
        "prints its signatures).",
    )
    add(
        "use_grayscale",
        False,
        "Whether to convert input images to grayscale (the input then "
        "has one channel).",
    )
    add(
        "labels",
        None,
        "The digits to keep, e.g. 0-4 or 5,7 (digits only; default all ten).",
        parse=_flag_types.labels,
    )
    add(
        "checkpoint_path",
        None,
        "The weights to export: a directory of keras-slim-train's (its "
        "latest checkpoint) or a checkpoint prefix of keras-slim-train or "
        "of TF-Slim, as freeze_graph's --input_checkpoint (default: the "
        "net's initial weights, as TF-Slim exported the graph alone).",
    )


def output_format(output_file):
    """What `export_model` writes to `output_file`.

    Args:
        output_file: The `--output_file` (a string or a path-like object).

    Returns:
        `TFLITE` for a name ending `.tflite`, else `SAVED_MODEL`.

    Raises:
        ValueError: for an empty path, a GraphDef's name (`.pb`,
            `.pbtxt`: TF-Slim's), or an existing path that is neither a
            SavedModel directory nor a file to replace by a `.tflite`.

    Example:
    ```python
    output_format("/tmp/mobilenet.tflite")  # "tflite"
    ```
    """
    output_file = os.fspath(output_file) if output_file else ""
    if not output_file:
        raise ValueError(
            "You must supply the path to save to with --output_file: a "
            "directory for a SavedModel, or a name ending .tflite."
        )
    if output_file.endswith((".pb", ".pbtxt")):
        raise ValueError(
            f"--output_file={output_file!r} names a GraphDef, which "
            "TF-Slim's export wrote for freeze_graph; keras-slim-export "
            "writes a SavedModel (the graph with its weights) into a "
            "directory, or a .tflite file. Pass a directory such as "
            f"{output_file.rsplit('.', 1)[0]!r}."
        )
    kind = TFLITE if output_file.endswith(".tflite") else SAVED_MODEL
    if os.path.isdir(output_file) and not _is_saved_model(output_file):
        raise ValueError(
            f"--output_file={output_file!r} is a directory that holds no "
            "SavedModel: not replaced. Pass a new path, or a SavedModel's "
            "directory to replace it."
        )
    if kind == SAVED_MODEL and os.path.isfile(output_file):
        raise ValueError(
            f"--output_file={output_file!r} is a file; a SavedModel is a "
            "directory. Pass a new path, or a name ending .tflite."
        )
    return kind


def _is_saved_model(path):
    return os.path.isfile(os.path.join(path, "saved_model.pb"))


def _check_options(kind, *, is_training, quantize):
    if kind == TFLITE and is_training:
        raise ValueError(
            "--is_training exports a SavedModel only: a .tflite model is "
            "for inference (batch norm on its moving statistics). Drop "
            "--is_training, or pass a directory as --output_file."
        )
    if kind == SAVED_MODEL and quantize:
        raise ValueError(
            "--quantize quantizes a .tflite model: pass an --output_file "
            "ending .tflite, or drop --quantize for a float SavedModel."
        )


def _inference_net(model):
    """The net from its input to its (main) logits: a net with TF-Slim's
    AuxLogits as a model without that head."""
    outputs = getattr(model, "outputs", None)
    if outputs is not None and len(outputs) > 1:
        return keras.Model(model.inputs[0], outputs[0], name=model.name)
    return model


def _write_saved_model(model, path, *, batch_size, is_training):
    net = _inference_net(model)
    shape = [batch_size, *net.inputs[0].shape[1:]]
    spec = tf.TensorSpec(shape, tf.float32, name="input")

    def serve(images):
        logits = net(images, training=is_training)
        if isinstance(logits, (list, tuple)):
            logits = logits[0]
        logits = tf.cast(logits, tf.float32)
        return {"logits": logits, "probabilities": tf.nn.softmax(logits)}

    archive = keras.export.ExportArchive()
    archive.track(net)
    archive.add_endpoint("serving_default", serve, input_signature=[spec])
    archive.write_out(path, verbose=False)


def _tflite(saved_model, *, quantize):
    converter = tf.lite.TFLiteConverter.from_saved_model(saved_model)
    if quantize:
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    return converter.convert()


def export_model(
    model, output_file, *, batch_size=None, is_training=False, quantize=False
):
    """Writes a net's inference function as a SavedModel or a LiteRT model.

    The function takes `input`, a float32 image batch shaped as the
    model's input (`batch_size` or any batch), and returns `logits` (the
    model's first output) and `probabilities` (their softmax). It is
    written next to `output_file`, then renamed onto it.

    Args:
        model: A functional Keras model from images to logits
            (`nets.build`'s; a second output, TF-Slim's AuxLogits, is
            left out).
        output_file: A directory for a SavedModel (signature
            `serving_default`), or a name ending `.tflite` (a string or
            a path-like object).
        batch_size: The input's fixed batch size, or `None` for any.
            Defaults to `None`.
        is_training: Run the model with `training=True` (batch
            statistics, dropout); SavedModel only. Defaults to `False`.
        quantize: Quantize a `.tflite` model's weights to 8 bits
            (dynamic range quantization). Defaults to `False`.

    Returns:
        The format written: `SAVED_MODEL` or `TFLITE`.

    Raises:
        ValueError: for an `output_file` `output_format` refuses,
            `is_training` with a `.tflite` output, `quantize` with a
            SavedModel.

    Example:
    ```python
    model = nets.build("digits_cnn", 10)
    export_model(model, "/tmp/digits_export")
    serve = tf.saved_model.load("/tmp/digits_export")
    outputs = serve.signatures["serving_default"](input=images)
    ```
    """
    kind = output_format(output_file)
    _check_options(kind, is_training=is_training, quantize=quantize)
    output_file = os.path.abspath(os.fspath(output_file))
    parent, name = os.path.split(output_file)
    os.makedirs(parent, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=parent, prefix=f".{name}.") as tmp:
        saved = os.path.join(tmp, "saved_model")
        _write_saved_model(
            model, saved, batch_size=batch_size, is_training=is_training
        )
        if kind == TFLITE:
            staged = os.path.join(tmp, name)
            with open(staged, "wb") as f:
                f.write(_tflite(saved, quantize=quantize))
            os.replace(staged, output_file)
        else:
            if os.path.isdir(output_file):  # a SavedModel: replaced
                os.rename(output_file, os.path.join(tmp, "replaced"))
            os.rename(saved, output_file)
    return kind


def _classes_and_channels(flags):
    """The number of logits and the input's channels, as training had
    them: a TF-Slim dataset name's own without `--dataset_dir`, else the
    data's (`_task.task`, which reads the dataset's files)."""
    layout = layouts.LAYOUTS.get(flags.dataset_name)
    if flags.dataset_dir is None and layout is not None:
        classes = layout.num_classes - flags.labels_offset
        if classes < 2:
            raise ValueError(
                f"--labels_offset={flags.labels_offset} leaves {classes} of "
                f"{flags.dataset_name}'s {layout.num_classes} classes. "
                "Expected at least 2 to classify."
            )
        return classes, 1 if flags.use_grayscale else layout.channels
    task_flags = argparse.Namespace(
        **vars(flags), preprocessing_name=None, num_preprocessing_threads=1
    )
    task = _task.task(
        task_flags,
        split="train",
        batch_size=1,
        image_size=flags.image_size,
        is_training=False,
    )
    return task.num_classes, task.channels


def _restore(model, flags):
    if flags.checkpoint_path is None:
        _LOG.info(
            "No --checkpoint_path: exporting %s with its initial weights, "
            "untrained (TF-Slim's export wrote the graph alone).",
            flags.model_name,
        )
        return
    step, averaged = _inference_checkpoint.restore(
        model,
        flags.checkpoint_path,
        model_name=flags.model_name,
        moving_average_decay=flags.moving_average_decay,
    )
    _LOG.info(
        "Restored %s (global step %d%s).",
        flags.checkpoint_path,
        step,
        ", moving averages" if averaged else "",
    )


def run(flags):
    """Exports as the flags say; returns the exit code."""
    classes, channels = _classes_and_channels(flags)
    keras.utils.set_random_seed(0)
    model = nets.build(
        flags.model_name,
        classes,
        image_size=flags.image_size,
        channels=channels,
    )
    _restore(model, flags)
    kind = export_model(
        model,
        flags.output_file,
        batch_size=flags.batch_size,
        is_training=flags.is_training,
        quantize=flags.quantize,
    )
    shape = [flags.batch_size or "batch", *model.inputs[0].shape[1:]]
    what = (
        f"a {'quantized ' if flags.quantize else ''}LiteRT model of "
        f"{os.path.getsize(flags.output_file)} bytes"
        if kind == TFLITE
        else "a SavedModel, signature serving_default"
    )
    _LOG.info(
        "Exported %s to %s: %s, input %s float32 -> logits (%d classes), "
        "probabilities.",
        flags.model_name,
        flags.output_file,
        what,
        f"[{', '.join(map(str, shape))}]",
        classes,
    )
    return 0


def _check_flags(p, flags):
    """The checks before any work (`p.error`: exit code 2)."""
    _flags.check_image_size(p, flags, "--image_size")
    _flags.check_digits_flags(p, flags)
    known = flags.dataset_name in layouts.LAYOUTS
    if flags.dataset_dir is None and not known:
        if flags.dataset_name != _flags.DIGITS:
            p.error(
                f"flag --dataset_name: {flags.dataset_name!r} needs "
                "--dataset_dir to count its classes (known without it: "
                f"digits, {', '.join(layouts.LAYOUTS)})"
            )
    if flags.is_video_model:
        p.error(
            "flag --is_video_model: keras_slim.image.nets has no video "
            "nets (TF-Slim's i3d, s3dg); only false is taken"
        )
    if flags.num_frames is not None:
        p.error("flag --num_frames: only with --is_video_model")
    if flags.write_text_graphdef:
        p.error(
            "flag --write_text_graphdef: keras-slim-export writes a "
            "SavedModel or a .tflite, both binary; `saved_model_cli show "
            "--dir <output_file> --all` prints a SavedModel's signatures"
        )
    try:
        kind = output_format(flags.output_file)
        _check_options(
            kind, is_training=flags.is_training, quantize=flags.quantize
        )
    except ValueError as error:
        p.error(str(error))
    if flags.checkpoint_path is not None:
        flags.checkpoint_path = _inference_checkpoint.check_checkpoint_path(
            p, flags.checkpoint_path, purpose="exports"
        )


def main(argv=None):
    """The console script `keras-slim-export`."""
    p = parser()
    flags = p.parse_args(argv)
    _console.check_backend(p)
    _check_flags(p, flags)
    _console.configure(
        flags.verbosity, flags.alsologtostderr or flags.logtostderr
    )
    try:
        return run(flags)
    except (ValueError, FileNotFoundError) as error:
        print(f"keras-slim-export: error: {error}", file=sys.stderr)
        return 2


__all__ = [
    "SAVED_MODEL",
    "TFLITE",
    "export_model",
    "main",
    "output_format",
    "parser",
]


def console():
    """The console script `keras-slim-export`: `main()`, then the exit
    (`_console.exit_now`)."""
    _console.exit_now(main())


if __name__ == "__main__":
    console()
