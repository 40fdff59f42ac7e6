"""Every function that mirrors a TF-Slim one, called as TF-Slim's callers
and its own tests call it: positional arguments in TF-Slim's order.

(`checkpoints`' functions are called so in tests/test_checkpoints.py::
test_tf_slims_positional_calls.)
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import gradients


@pytest.fixture()
def grads_and_vars():
    inputs = keras.Input((3,))
    model = keras.Model(inputs, keras.layers.Dense(2, name="fc1")(inputs))
    kernel, bias = model.get_layer("fc1").kernel, model.get_layer("fc1").bias
    return [
        (tf.fill(kernel.shape, 3.0), kernel),
        (tf.fill(bias.shape, 4.0), bias),
    ]


def test_learning_clip_gradient_norms(grads_and_vars):
    # slim.learning.clip_gradient_norms(gradients_to_variables, max_norm)
    clipped = gradients.clip_gradient_norms(grads_and_vars, 2.0)
    for (grad, var), (original, _) in zip(clipped, grads_and_vars):
        norm = np.linalg.norm(original.numpy())
        np.testing.assert_allclose(
            grad.numpy(), original.numpy() * 2.0 / norm, rtol=1e-6
        )
        assert var is _


def test_learning_multiply_gradients(grads_and_vars):
    # slim.learning.multiply_gradients(grads_and_vars, gradient_multipliers)
    # (Keras variables are not hashable: keyed by path, as TF-Slim's by name.)
    multiplied = gradients.multiply_gradients(
        grads_and_vars, {"fc1/kernel": 0.5}
    )
    np.testing.assert_array_equal(multiplied[0][0].numpy(), 1.5)
    np.testing.assert_array_equal(multiplied[1][0].numpy(), 4.0)


def test_variables_helper_regex_functions(grads_and_vars):
    # multiply_gradients_matching_regex(grads_and_vars, regex_list, multiplier)
    multiplied = gradients.multiply_gradients_matching_regex(
        grads_and_vars, ["fc1/bias"], 2.0
    )
    np.testing.assert_array_equal(multiplied[1][0].numpy(), 8.0)
    np.testing.assert_array_equal(multiplied[0][0].numpy(), 3.0)
    # freeze_gradients_matching_regex(grads_and_vars, regex_list)
    kept = gradients.freeze_gradients_matching_regex(
        grads_and_vars, ["fc1/kernel"]
    )
    assert [var.path for _, var in kept] == ["fc1/bias"]


def test_model_deploy_deployment_config_positional():
    # model_deploy.DeploymentConfig(num_clones, clone_on_cpu, replica_id,
    #                               num_replicas, num_ps_tasks, ...)
    positional = keras_slim.DeploymentConfig(2, True, 0, 1, 0, "worker", "ps")
    keywords = keras_slim.DeploymentConfig(
        num_clones=2,
        clone_on_cpu=True,
        replica_id=0,
        num_replicas=1,
        num_ps_tasks=0,
        worker_job_name="worker",
        ps_job_name="ps",
    )
    for name in (
        "num_clones",
        "clone_on_cpu",
        "replica_id",
        "num_replicas",
        "num_ps_tasks",
        "worker_job_name",
        "ps_job_name",
    ):
        assert getattr(positional, name) == getattr(keywords, name), name


def test_learning_train_takes_logdir_second_after_the_data(tmp_path):
    # slim.learning.train(train_op, logdir, ...): the train op is a model
    # and its data here, then logdir.
    inputs = keras.Input((3,))
    model = keras_slim.SlimModel(inputs, keras.layers.Dense(1)(inputs))
    model.compile(optimizer="sgd", loss="mse")
    data = (
        tf.data.Dataset.from_tensor_slices(
            (np.ones((8, 3), "float32"), np.ones((8, 1), "float32"))
        )
        .batch(4)
        .repeat()
    )
    keras_slim.train(model, data, str(tmp_path), number_of_steps=2)
    assert tf.train.latest_checkpoint(str(tmp_path)).endswith("-2")
