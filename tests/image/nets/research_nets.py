"""TF-Slim's research/slim nets that the `tf_slim` package lacks (lenet,
cifarnet), for slim_peer.py: tf_slim's own layers (`slim.conv2d`,
`slim.max_pool2d`, `slim.flatten`, `slim.fully_connected`,
`slim.dropout`) and `tf.nn.lrn`, in the order, scopes, arguments and arg
scopes of tensorflow/models research/slim nets/lenet.py and
nets/cifarnet.py. Imported by slim_peer.py after its shims, in graph
mode.
"""

import tensorflow as tf
import tf_slim as slim

tf1 = tf.compat.v1


def lenet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5):
    ends = {}
    with tf1.variable_scope("LeNet", "LeNet", [images]):
        net = ends["conv1"] = slim.conv2d(images, 32, [5, 5], scope="conv1")
        net = ends["pool1"] = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
        net = ends["conv2"] = slim.conv2d(net, 64, [5, 5], scope="conv2")
        net = ends["pool2"] = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
        net = ends["Flatten"] = slim.flatten(net)
        net = ends["fc3"] = slim.fully_connected(net, 1024, scope="fc3")
        if not num_classes:
            return net, ends
        net = ends["dropout3"] = slim.dropout(
            net, dropout_keep_prob, is_training=is_training, scope="dropout3"
        )
        logits = ends["Logits"] = slim.fully_connected(
            net, num_classes, activation_fn=None, scope="fc4"
        )
    ends["Predictions"] = slim.softmax(logits, scope="Predictions")
    return logits, ends


def lenet_arg_scope(weight_decay=0.0):
    with slim.arg_scope(
        [slim.conv2d, slim.fully_connected],
        weights_regularizer=slim.l2_regularizer(weight_decay),
        weights_initializer=tf1.truncated_normal_initializer(stddev=0.1),
        activation_fn=tf.nn.relu,
    ) as sc:
        return sc


def _lrn(net, name):
    return tf.nn.lrn(net, 4, bias=1.0, alpha=0.001 / 9.0, beta=0.75, name=name)


def cifarnet(images, num_classes=10, is_training=False, dropout_keep_prob=0.5):
    ends = {}
    with tf1.variable_scope("CifarNet", "CifarNet", [images]):
        net = ends["conv1"] = slim.conv2d(images, 64, [5, 5], scope="conv1")
        net = ends["pool1"] = slim.max_pool2d(net, [2, 2], 2, scope="pool1")
        net = _lrn(net, "norm1")
        net = ends["conv2"] = slim.conv2d(net, 64, [5, 5], scope="conv2")
        net = _lrn(net, "norm2")
        net = ends["pool2"] = slim.max_pool2d(net, [2, 2], 2, scope="pool2")
        net = ends["Flatten"] = slim.flatten(net)
        net = ends["fc3"] = slim.fully_connected(net, 384, scope="fc3")
        net = slim.dropout(
            net, dropout_keep_prob, is_training=is_training, scope="dropout3"
        )
        net = ends["fc4"] = slim.fully_connected(net, 192, scope="fc4")
        if not num_classes:
            return net, ends
        logits = ends["Logits"] = slim.fully_connected(
            net,
            num_classes,
            biases_initializer=tf1.zeros_initializer(),
            weights_initializer=tf1.truncated_normal_initializer(
                stddev=1 / 192.0
            ),
            weights_regularizer=None,
            activation_fn=None,
            scope="logits",
        )
        ends["Predictions"] = slim.softmax(logits, scope="Predictions")
    return logits, ends


def cifarnet_arg_scope(weight_decay=0.004):
    with slim.arg_scope(
        [slim.conv2d],
        weights_initializer=tf1.truncated_normal_initializer(stddev=5e-2),
        activation_fn=tf.nn.relu,
    ):
        with slim.arg_scope(
            [slim.fully_connected],
            biases_initializer=tf1.constant_initializer(0.1),
            weights_initializer=tf1.truncated_normal_initializer(stddev=0.04),
            weights_regularizer=slim.l2_regularizer(weight_decay),
            activation_fn=tf.nn.relu,
        ) as sc:
            return sc
