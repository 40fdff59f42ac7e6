"""The public API: every exported name is documented and importable."""

import pathlib

import pytest

import keras_slim
from keras_slim import callbacks
from keras_slim import checkpoints
from keras_slim import checks
from keras_slim import cluster
from keras_slim import gradients
from keras_slim import optimizers
from keras_slim import testing
from keras_slim import training_state

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "api"


def documented():
    text = "\n".join(p.read_text() for p in DOCS.glob("*.md"))
    return {
        line.split()[1] for line in text.splitlines() if line.startswith("::: ")
    } | {
        line.strip()[2:]
        for line in text.splitlines()
        if line.strip().startswith("- ")
    }


def test_every_exported_name_is_in_the_api_docs():
    names = documented()
    missing = [
        name for name in keras_slim.__all__ if f"keras_slim.{name}" not in names
    ]
    assert not missing, f"not in docs/api: {missing}"


def test_every_gradients_function_is_in_the_api_docs():
    names = documented()
    missing = [name for name in gradients.__all__ if name not in names]
    assert not missing, f"not in docs/api/gradients.md: {missing}"


def test_every_callback_is_in_the_api_docs():
    names = documented()
    missing = [
        name
        for name in callbacks.__all__
        if f"keras_slim.callbacks.{name}" not in names
    ]
    assert not missing, f"not in docs/api/callbacks.md: {missing}"


@pytest.mark.parametrize(
    "module", [checkpoints, training_state, keras_slim.moving_averages]
)
def test_every_checkpoint_function_is_in_the_api_docs(module):
    names = documented()
    missing = [name for name in module.__all__ if name not in names]
    assert not missing, f"not in docs/api: {module.__name__}: {missing}"


def test_every_optimizer_is_in_the_api_docs():
    from keras_slim.image import learning_rate
    from keras_slim.image import optimizer as optimizer_lib

    names = documented()
    missing = [
        name
        for name in optimizers.__all__
        if f"keras_slim.optimizers.{name}" not in names
    ]
    missing += [
        name
        for module in (optimizer_lib, learning_rate)
        for name in module.__all__
        if name not in names
    ]
    assert not missing, f"not in docs/api/optimizers.md: {missing}"


def test_cluster_and_testing_are_in_the_api_docs():
    names = documented()
    for module in (cluster, testing):
        missing = [
            name
            for name in module.__all__
            if f"{module.__name__}.{name}" not in names
        ]
        assert not missing, f"not in docs/api/cluster.md: {missing}"


def test_every_check_is_in_the_api_docs():
    names = documented()
    missing = [name for name in checks.__all__ if name not in names]
    assert not missing, f"not in docs/api/checks.md: {missing}"


def test_all_names_exist():
    for module in (
        keras_slim,
        callbacks,
        checkpoints,
        checks,
        cluster,
        gradients,
        optimizers,
        testing,
        training_state,
    ):
        for name in module.__all__:
            assert hasattr(module, name), name
