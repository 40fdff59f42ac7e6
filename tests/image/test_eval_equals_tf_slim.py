"""keras-slim-eval on TF-Slim's checkpoints predicts what TF-Slim's own
evaluation predicts, image by image.

The reference runs in TF1 graph mode (tests/tf_slim_peer.py): TF-Slim's
checkpoints of `inception_v1` and `resnet_v1_50` (tf_slim's nets, written
by tests/image/conftest.py's peer; then, by TF1, each batch norm's
moving averages set to the images' statistics and the logits layer
fitted to the pre-logit features so that image i's class is i % 5 by a
wide margin), images of assorted sizes and aspect
ratios encoded as JPEG and written as TF-Slim's flowers validation shards
with `tf.train.Example`s as TF-Slim's converters write them; each record
read back through TF-Slim's `TFExampleDecoder`, preprocessed by TF-Slim's
eval preprocessing in TF1 ops (tests/image/preprocessing_peer.py:
inception's central crop and `resize_bilinear`, vgg's aspect-preserving
resize and central crop), then tf_slim's net. Each record's label is
TF-Slim's top-1 prediction, so TF-Slim's accuracy is 1 by construction
and keras-slim-eval's accuracy is the fraction of images on which the
two predictions agree: the test asks for all of them.
"""

import os
import re

import pytest

from keras_slim.image import eval_image_classifier as eval_cli
from tests import tf_slim_peer
from tests.helpers import run_module
from tests.image.nets.test_inception import SPECS as INCEPTION_SPECS
from tests.image.nets.test_resnet import SPECS as RESNET_SPECS

pytestmark = pytest.mark.prestarted  # tests/zygote.py

#: TF-Slim's checkpoints this module evaluates (conftest's `slim` peer).
SPECS = [
    *(s for s in INCEPTION_SPECS if s["name"] == "inception_v1"),
    *(s for s in RESNET_SPECS if s["name"] == "resnet_v1_50"),
]
#: net: its preprocessing in preprocessing_peer, and the eval size:
#: inception_v1's TF-Slim's 224; resnet_v1_50's 128, a third of the cost
#: (what is compared, the decoder, the eval preprocessing and the net
#: image by image, is the same code at any size; inception_v1 at 193 left
#: two images' top logits 5e-4 apart, a near tie the test refuses).
NETS = {
    "inception_v1": ("_inception_eval", 224),
    "resnet_v1_50": ("_vgg_eval", 128),
}
IMAGES = 15
CLASSES = ("daisy", "dandelion", "roses", "sunflowers", "tulips")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))

REFERENCE = """
import re
import sys
sys.path.insert(0, {root!r})
from tests.image import preprocessing_peer
from tf_slim.nets import inception_v1, resnet_v1


rng = np.random.default_rng(7)
encoded = []
for i in range({images}):
    height, width = int(rng.integers(120, 360)), int(rng.integers(120, 360))
    low = rng.uniform(0, 255, (1, 4, 5, 3))
    with tf.Graph().as_default(), tf1.Session() as session:
        smooth = tf1.image.resize_bicubic(low, [height, width])
        noise = rng.normal(0, 25, (1, height, width, 3))
        pixels = tf.cast(tf.clip_by_value(smooth + noise, 0, 255), tf.uint8)
        encoded.append(session.run(
            tf1.image.encode_jpeg(pixels[0], quality=90)))

decoder = slim.tfexample_decoder.TFExampleDecoder(
    {{
        "image/encoded": tf1.FixedLenFeature((), tf.string, ""),
        "image/format": tf1.FixedLenFeature((), tf.string, "jpeg"),
        "image/class/label": tf1.FixedLenFeature((), tf.int64, -1),
    }},
    {{"image": slim.tfexample_decoder.Image(),
      "label": slim.tfexample_decoder.Tensor("image/class/label")}})


def example(data, label):
    # TF-Slim's dataset_utils.image_to_tfexample (height and width aside).
    return tf.train.Example(features=tf.train.Features(feature={{
        "image/encoded": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[data])),
        "image/format": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[b"jpg"])),
        "image/class/label": tf.train.Feature(
            int64_list=tf.train.Int64List(value=[label])),
    }})).SerializeToString()


def preprocessed(preprocess, size):
    # TF-Slim's decoder and eval preprocessing, record by record.
    with tf.Graph().as_default(), tf1.Session() as session:
        record = tf1.placeholder(tf.string, [])
        image, = decoder.decode(record, ["image"])
        image = getattr(preprocessing_peer, preprocess)(tf1, image, size, size)
        return np.stack([session.run(image, {{record: example(data, 0)}})
                         for data in encoded])


def network(net, images, is_training):
    if net == "inception_v1":
        with slim.arg_scope(inception_v1.inception_v1_arg_scope()):
            return inception_v1.inception_v1(
                images, 5, is_training=is_training)[0]
    with slim.arg_scope(resnet_v1.resnet_arg_scope()):
        logits, _ = resnet_v1.resnet_v1_50(
            images, 5, is_training=is_training)
        return tf.squeeze(logits, [1, 2])


def calibrate(net, batch, features, checkpoint, saved):
    # TF-Slim's checkpoint made to tell these images apart, saved by TF1
    # in TF-Slim's names: each batch norm's moving averages set to the
    # batch's statistics (one training-mode pass), the logits layer to
    # a least-squares fit of the pre-logit features to wide-margin logits.
    with tf.Graph().as_default() as graph, tf1.Session() as session:
        images = tf1.placeholder(tf.float32, batch.shape)
        network(net, images, True)
        saver = tf1.train.Saver()
        saver.restore(session, checkpoint)
        norms = [op for op in graph.get_operations()
                 if op.type == "FusedBatchNormV3"]
        pooled, *moments = session.run(
            [graph.get_tensor_by_name(features)]
            + [(op.outputs[1], op.outputs[2]) for op in norms],
            {{images: batch}})
        variables = {{v.op.name: v for v in tf1.global_variables()}}

        def variable_of(tensor):
            while tensor.op.name not in variables:
                tensor = tensor.op.inputs[0]
            return variables[tensor.op.name]

        for op, (mean, variance) in zip(norms, moments):
            variable_of(op.inputs[3]).load(mean, session)
            variable_of(op.inputs[4]).load(variance, session)
        pooled = pooled.reshape(len(batch), -1)
        weights, biases = sorted(
            [v for v in tf1.trainable_variables()
             if re.search("(Logits/Conv2d_0c_1x1|/logits)/(weights|biases)",
                          v.op.name)],
            key=lambda v: -len(v.shape))
        # Logits the features decide by a wide margin on any CPU: image
        # i's class i % 5 at 1, the others at -1 (the least-squares fit
        # of the centered features, which have far more dimensions than
        # there are images), not a random direction whose top two logits
        # may lie as close as the float results of two CPUs differ.
        target = -np.ones((len(batch), 5))
        target[np.arange(len(batch)), np.arange(len(batch)) % 5] = 1.0
        centered = pooled - pooled.mean(0)
        kernel = np.linalg.lstsq(
            centered, target - target.mean(0), rcond=None)[0]
        weights.load(kernel.reshape(weights.shape.as_list()), session)
        biases.load(target.mean(0) - pooled.mean(0) @ kernel, session)
        saver.save(session, saved, write_meta_graph=False)


def predictions_of(net, batch, checkpoint):
    # TF-Slim's evaluation: the net in inference mode, from the checkpoint.
    with tf.Graph().as_default(), tf1.Session() as session:
        images = tf1.placeholder(tf.float32, batch.shape)
        logits = network(net, images, False)
        tf1.train.Saver().restore(session, checkpoint)
        return session.run(logits, {{images: batch}})


results = {{}}
for net, (preprocess, size, features, checkpoint, directory) in (
        {nets}.items()):
    os.makedirs(directory)
    saved = os.path.join(directory, "model.ckpt")
    batch = preprocessed(preprocess, size)
    calibrate(net, batch, features, checkpoint, saved)
    logits = predictions_of(net, batch, saved)
    predictions = np.argmax(logits, 1)
    top2 = np.sort(logits, 1)[:, -2:]
    with open(os.path.join(directory, "labels.txt"), "w") as f:
        f.write("".join(f"{{i}}:{{n}}\\n" for i, n in enumerate({classes})))
    for shard in range(5):
        path = os.path.join(
            directory, f"flowers_validation_{{shard:05d}}-of-00005.tfrecord")
        with tf1.python_io.TFRecordWriter(path) as writer:
            for i in range(shard, len(encoded), 5):
                writer.write(example(encoded[i], int(predictions[i])))
    results[net] = {{
        "predictions": predictions.tolist(),
        "margin": float(np.min(top2[:, 1] - top2[:, 0])),
    }}
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def reference(slim, tmp_path_factory):
    root = tmp_path_factory.mktemp("eval_vs_tf_slim")
    features = {spec["name"]: spec["features"] for spec in SPECS}
    nets = {
        net: (
            preprocess,
            size,
            features[net],
            str(slim / net / "model.ckpt"),
            str(root / net),
        )
        for net, (preprocess, size) in NETS.items()
    }
    code = REFERENCE.format(
        root=ROOT, images=IMAGES, nets=nets, classes=CLASSES
    )
    return root, tf_slim_peer.run(code, timeout=300)


def _evaluate(net, flags, capsys):
    """keras-slim-eval with `flags`: `(exit code, stdout, stderr)`.
    inception_v1's in a subprocess, as a user runs it (the command's
    exit); resnet_v1_50's `main` in this process (one TensorFlow process
    start fewer)."""
    if net == "inception_v1":
        evaluated = run_module(
            "keras_slim.image.eval_image_classifier",
            *flags,
            timeout=300,
            env={"TF_CPP_MIN_LOG_LEVEL": "3"},
        )
        return evaluated.returncode, evaluated.stdout, evaluated.stderr
    code = eval_cli.main(flags)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("net", list(NETS))
def test_keras_slim_eval_predicts_what_tf_slim_predicts(reference, net, capsys):
    root, results = reference
    predictions = results[net]["predictions"]
    # The premise: every class predicted, each image's top logit ahead of
    # the next by far more than any two CPUs' float results differ.
    assert len(set(predictions)) == 5, predictions
    assert results[net]["margin"] > 0.5, results[net]
    # TF-Slim's eval_image_classifier command, the script's name changed.
    code, out, err = _evaluate(
        net,
        [
            f"--checkpoint_path={root / net / 'model.ckpt'}",
            f"--dataset_dir={root / net}",
            "--dataset_name=flowers",
            "--dataset_split_name=validation",
            f"--model_name={net}",
            f"--eval_image_size={NETS[net][1]}",
        ],
        capsys,
    )
    assert code == 0, err[-3000:]
    # The result line; the kept best's line follows it.
    line = next(line for line in out.splitlines() if "eval/Accuracy = " in line)
    match = re.search(r"eval/Accuracy = ([0-9.]+).*\((\d+) images", line)
    assert match, line
    assert (float(match.group(1)), int(match.group(2))) == (1.0, IMAGES), (
        line,
        predictions,
    )
