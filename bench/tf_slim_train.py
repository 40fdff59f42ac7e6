"""TF-Slim's train_image_classifier.py, run by TF-Slim itself: the peer
of `keras-slim-train` in bench/vs_tf_slim_nets.py.

research/slim's script is not in the `tf_slim` package; this is its
training path written with the package's own pieces, in TF1 graph mode,
in a child process (tests/tf_slim_peer.py's shims):

- data: `slim.dataset.Dataset` over TF-Slim's flowers TFRecords,
  `slim.dataset_data_provider.DatasetDataProvider(num_readers=4,
  common_queue_capacity=20 * batch, common_queue_min=10 * batch)`,
  TF-Slim's inception training preprocessing in TF1 ops (crop by
  `sample_distorted_bounding_box`, `resize_images`, `random_flip_left_right`,
  `distort_color` fast mode: `random_brightness`, `random_saturation`),
  `tf.train.batch(num_threads=4, capacity=5 * batch)`, one-hot labels,
  `slim.prefetch_queue`: the script's queues, as it builds them;
- net: `tf_slim.nets`' `inception_v1` and `resnet_v1_50` under their arg
  scopes (weight decay 4e-5), with their fused batch norm;
  `mobilenet_v1` is not in `tf_slim`, so it is written here with
  `slim.conv2d` / `slim.separable_conv2d` / `slim.batch_norm` in
  `mobilenet_v1_arg_scope`'s settings (ReLU6, batch norm decay 0.9997,
  `truncated_normal(0.09)`), as research/slim's nets/mobilenet_v1.py
  builds it;
- loss and update: `slim.losses.softmax_cross_entropy` plus the
  regularization losses, the script's defaults (RMSProp, decay 0.9,
  momentum 0.9, epsilon 1.0; learning rate 0.01, exponential staircase
  decay 0.94 every 2 epochs), `slim.learning.create_train_op`;
- summaries: the script's (end points' histograms and sparsity, losses,
  model variables, the learning rate);
- loop: `slim.learning.train` (a `Supervisor`), its log line every
  `--log_every_n_steps`, summaries and checkpoints every
  `--save_summaries_secs` / `--save_interval_secs`.

Usage: `subprocess.Popen(tf_slim_train.argv([...flags...]))`.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from tests import tf_slim_peer  # noqa: E402

_BODY = r"""
import argparse
from tf_slim.nets import inception_v1
from tf_slim.nets import resnet_v1

parser = argparse.ArgumentParser()
for name, kind, default in [
    ("train_dir", str, None), ("dataset_dir", str, None),
    ("model_name", str, None), ("train_image_size", int, None),
    ("num_samples", int, None), ("num_classes", int, 5),
    ("batch_size", int, 32), ("max_number_of_steps", int, None),
    ("log_every_n_steps", int, 10), ("save_summaries_secs", int, 600),
    ("save_interval_secs", int, 600), ("weight_decay", float, 0.00004),
    ("num_readers", int, 4), ("num_preprocessing_threads", int, 4),
]:
    parser.add_argument("--" + name, type=kind, default=default)
FLAGS = parser.parse_args(sys.argv[1:])

MOBILENET_V1_DEFS = [(3, 2, 32)] + [
    (3, stride, depth) for stride, depth in [
        (1, 64), (2, 128), (1, 128), (2, 256), (1, 256), (2, 512),
        (1, 512), (1, 512), (1, 512), (1, 512), (1, 512), (2, 1024),
        (1, 1024)]]


def mobilenet_v1(images, num_classes, is_training):
    batch_norm = {"center": True, "scale": True, "decay": 0.9997,
                  "epsilon": 0.001, "is_training": is_training}
    regularizer = slim.l2_regularizer(FLAGS.weight_decay)
    end_points = {}
    with slim.arg_scope(
            [slim.conv2d, slim.separable_conv2d],
            weights_initializer=tf1.truncated_normal_initializer(
                stddev=0.09),
            activation_fn=tf.nn.relu6, normalizer_fn=slim.batch_norm,
            normalizer_params=batch_norm, padding="SAME"), \
            slim.arg_scope([slim.conv2d], weights_regularizer=regularizer), \
            slim.arg_scope([slim.separable_conv2d],
                           weights_regularizer=None), \
            tf1.variable_scope("MobilenetV1"):
        net = images
        for i, (kernel, stride, depth) in enumerate(MOBILENET_V1_DEFS):
            if i == 0:
                net = slim.conv2d(net, depth, [kernel, kernel],
                                  stride=stride, scope="Conv2d_0")
                end_points["Conv2d_0"] = net
                continue
            net = slim.separable_conv2d(
                net, None, [kernel, kernel], depth_multiplier=1,
                stride=stride, scope="Conv2d_%d_depthwise" % i)
            end_points["Conv2d_%d_depthwise" % i] = net
            net = slim.conv2d(net, depth, [1, 1], stride=1,
                              scope="Conv2d_%d_pointwise" % i)
            end_points["Conv2d_%d_pointwise" % i] = net
        with tf1.variable_scope("Logits"):
            side = net.shape[1]
            net = slim.avg_pool2d(net, [side, side], padding="VALID",
                                  scope="AvgPool_1a")
            net = slim.dropout(net, keep_prob=0.999,
                               is_training=is_training, scope="Dropout_1b")
            net = slim.conv2d(net, num_classes, [1, 1], activation_fn=None,
                              normalizer_fn=None, scope="Conv2d_1c_1x1",
                              weights_regularizer=regularizer)
            logits = tf.squeeze(net, [1, 2], name="SpatialSqueeze")
            end_points["Logits"] = logits
            return logits, end_points


def network_fn(images):
    n, decay = FLAGS.num_classes, FLAGS.weight_decay
    if FLAGS.model_name == "mobilenet_v1":
        return mobilenet_v1(images, n, True)
    if FLAGS.model_name == "inception_v1":
        with slim.arg_scope(inception_v1.inception_v1_arg_scope(decay)):
            return inception_v1.inception_v1(images, n, is_training=True)
    if FLAGS.model_name == "resnet_v1_50":
        with slim.arg_scope(resnet_v1.resnet_arg_scope(decay)):
            logits, end_points = resnet_v1.resnet_v1_50(
                images, n, is_training=True)
            return tf.squeeze(logits, [1, 2]), end_points
    raise ValueError(FLAGS.model_name)


def distort_color(image):
    # TF-Slim's distort_color, fast_mode, color_ordering 0.
    image = tf1.image.random_brightness(image, max_delta=32. / 255.)
    image = tf1.image.random_saturation(image, lower=0.5, upper=1.5)
    return tf.clip_by_value(image, 0.0, 1.0)


def preprocess_for_train(image, height, width):
    # TF-Slim's inception preprocess_for_train, fast_mode, no bbox.
    bbox = tf.constant([0.0, 0.0, 1.0, 1.0], tf.float32, [1, 1, 4])
    image = tf1.image.convert_image_dtype(image, dtype=tf.float32)
    begin, size, _ = tf1.image.sample_distorted_bounding_box(
        tf.shape(image), bounding_boxes=bbox, min_object_covered=0.1,
        aspect_ratio_range=(0.75, 1.33), area_range=(0.05, 1.0),
        max_attempts=100, use_image_if_no_bounding_boxes=True)
    image = tf.slice(image, begin, size)
    image.set_shape([None, None, 3])
    image = tf1.image.resize_images(image, [height, width], 0)
    image = tf1.image.random_flip_left_right(image)
    image = distort_color(image)
    return tf.multiply(tf.subtract(image, 0.5), 2.0)


def dataset():
    keys_to_features = {
        "image/encoded": tf1.FixedLenFeature((), tf.string, ""),
        "image/format": tf1.FixedLenFeature((), tf.string, "png"),
        "image/class/label": tf1.FixedLenFeature(
            [], tf.int64, default_value=tf.zeros([], dtype=tf.int64)),
    }
    items_to_handlers = {
        "image": slim.tfexample_decoder.Image(),
        "label": slim.tfexample_decoder.Tensor("image/class/label"),
    }
    return slim.dataset.Dataset(
        data_sources=os.path.join(
            FLAGS.dataset_dir, "flowers_train_*.tfrecord"),
        reader=tf1.TFRecordReader,
        decoder=slim.tfexample_decoder.TFExampleDecoder(
            keys_to_features, items_to_handlers),
        num_samples=FLAGS.num_samples, items_to_descriptions={},
        num_classes=FLAGS.num_classes)


tf1.logging.set_verbosity(tf1.logging.INFO)
with tf.Graph().as_default():
    global_step = tf1.train.create_global_step()
    data = dataset()
    provider = slim.dataset_data_provider.DatasetDataProvider(
        data, num_readers=FLAGS.num_readers,
        common_queue_capacity=20 * FLAGS.batch_size,
        common_queue_min=10 * FLAGS.batch_size)
    image, label = provider.get(["image", "label"])
    size = FLAGS.train_image_size
    image = preprocess_for_train(image, size, size)
    images, labels = tf1.train.batch(
        [image, label], batch_size=FLAGS.batch_size,
        num_threads=FLAGS.num_preprocessing_threads,
        capacity=5 * FLAGS.batch_size)
    labels = slim.one_hot_encoding(labels, data.num_classes)
    batch_queue = slim.prefetch_queue.prefetch_queue(
        [images, labels], capacity=2)
    images, labels = batch_queue.dequeue()
    logits, end_points = network_fn(images)
    slim.losses.softmax_cross_entropy(logits, labels, weights=1.0)
    total_loss = tf1.losses.get_total_loss()
    decay_steps = int(FLAGS.num_samples * 2.0 / FLAGS.batch_size)
    learning_rate = tf1.train.exponential_decay(
        0.01, global_step, decay_steps, 0.94, staircase=True)
    # The script's summaries: end points, losses, variables, the rate.
    for name, value in end_points.items():
        tf1.summary.histogram("activations/" + name, value)
        tf1.summary.scalar("sparsity/" + name, tf.nn.zero_fraction(value))
    for loss in tf1.get_collection(tf1.GraphKeys.LOSSES):
        tf1.summary.scalar("losses/%s" % loss.op.name, loss)
    for variable in slim.get_model_variables():
        tf1.summary.histogram(variable.op.name, variable)
    tf1.summary.scalar("learning_rate", learning_rate)
    optimizer = tf1.train.RMSPropOptimizer(
        learning_rate, decay=0.9, momentum=0.9, epsilon=1.0)
    train_op = slim.learning.create_train_op(total_loss, optimizer)
    slim.learning.train(
        train_op, logdir=FLAGS.train_dir,
        number_of_steps=FLAGS.max_number_of_steps,
        log_every_n_steps=FLAGS.log_every_n_steps,
        save_summaries_secs=FLAGS.save_summaries_secs,
        save_interval_secs=FLAGS.save_interval_secs)
"""


def argv(flags):
    """The command line of the TF-Slim run: `python -c <program> flags`.

    Args:
        flags: `--name=value` strings (the module's flags).

    Returns:
        A list for `subprocess.Popen`.
    """
    return [sys.executable, "-c", tf_slim_peer.source(_BODY), *flags]
