"""Real checkpoints in every format warm start reads, made by the tests."""

import numpy as np
import tensorflow as tf

from keras_slim import training_state

# TF-Slim's names for the test MLP (tests.helpers.mlp: fc1, logits), under
# a model scope as slim's nets have (`InceptionV1/Conv2d_1a_7x7/weights`).
SLIM_NAME_MAP = {
    r"(.*)/kernel": r"MLP/\1/weights",
    r"(.*)/bias": r"MLP/\1/biases",
}


def slim_values(features=8, hidden=16, classes=3, seed=7):
    """Distinct values for each slim variable of the MLP."""
    rng = np.random.default_rng(seed)
    shapes = {
        "MLP/fc1/weights": (features, hidden),
        "MLP/fc1/biases": (hidden,),
        "MLP/logits/weights": (hidden, classes),
        "MLP/logits/biases": (classes,),
    }
    return {
        name: rng.normal(size=shape).astype("float32")
        for name, shape in shapes.items()
    }


def write_tf1(prefix, values):
    """A TF1 name-based checkpoint, written as TF-Slim did: graph mode, a
    `tf.compat.v1.train.Saver`, a global step."""
    with tf.Graph().as_default():
        for name, value in values.items():
            tf.compat.v1.Variable(value, name=name)
        global_step = tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session() as session:
            session.run(tf.compat.v1.global_variables_initializer())
            session.run(global_step.assign(1234))
            return saver.save(session, str(prefix))


def write_tf2(prefix, model):
    """A TF2 object-based checkpoint, as keras_slim's `Checkpoints` writes."""
    return training_state.training_checkpoint(model).write(str(prefix))


def trained(model, steps=3, seed=0):
    """`model` after a few steps, so that every optimizer slot exists."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(32, model.inputs[0].shape[-1])).astype("float32")
    y = rng.integers(0, model.outputs[0].shape[-1], size=32).astype("int32")
    model.fit(x, y, batch_size=32, epochs=steps, verbose=0, shuffle=False)
    return model


def values_of(model):
    return {v.path: v.numpy().copy() for v in model.weights}


def assert_values(model, expected, paths=None):
    actual = values_of(model)
    for path in paths if paths is not None else expected:
        np.testing.assert_array_equal(actual[path], expected[path], path)
