"""keras_slim.gradients on JAX arrays: the squared norms the clip and the
numeric check share, against NumPy in float64."""

import jax.numpy as jnp
import keras
import numpy as np
import pytest

from keras_slim import gradients

# Every way a gradient meets the blocks of 32 elements: none, one padded,
# one exact, one and a bit, many; a scalar; float16 and bfloat16 values.
SHAPES = [(0,), (), (31,), (32,), (33,), (64, 64), (3, 3, 8, 16)]


def _grads(dtypes=("float32",)):
    rng = np.random.default_rng(0)
    grads = []
    for i, shape in enumerate(SHAPES):
        dtype = dtypes[i % len(dtypes)]
        value = rng.normal(size=shape).astype("float32") * (i + 1)
        grads.append(jnp.asarray(value, dtype))
    return grads


def _reference(grads):
    return np.array(
        [np.sum(np.square(np.asarray(g, np.float64))) for g in grads]
    )


@pytest.fixture(params=[True, False], ids=["by blocks", "per gradient"])
def layout(request, monkeypatch):
    """Both layouts of `squared_norms` off TensorFlow: all the gradients
    at once (XLA:CPU's, this machine's), one sum per gradient (a GPU's)."""
    assert gradients._on_xla_cpu()
    monkeypatch.setattr(gradients, "_on_xla_cpu", lambda: request.param)


@pytest.mark.parametrize(
    "dtypes",
    [("float32",), ("float16", "float32", "bfloat16")],
    ids=["float32", "mixed"],
)
def test_squared_norms_equal_each_gradients_sum(layout, dtypes):
    grads = _grads(dtypes)
    squares = gradients.squared_norms(grads)
    assert squares.dtype == jnp.float32 and squares.shape == (len(grads),)
    np.testing.assert_allclose(squares, _reference(grads), rtol=1e-5)
    assert float(squares[0]) == 0.0  # the empty gradient
    total = gradients.squared_global_norm(grads)
    assert total.shape == ()
    np.testing.assert_allclose(total, _reference(grads).sum(), rtol=1e-5)


def test_a_non_finite_gradient_makes_its_own_norm_non_finite_only(layout):
    grads = _grads()
    grads[3] = grads[3].at[5].set(jnp.nan)
    grads[5] = grads[5].at[1, 2].set(jnp.inf)
    squares = np.asarray(gradients.squared_norms(grads))
    assert np.isnan(squares[3]) and np.isinf(squares[5])
    finite = [i for i in range(len(grads)) if i not in (3, 5)]
    np.testing.assert_allclose(
        squares[finite], _reference(grads)[finite], rtol=1e-5
    )
    assert not np.isfinite(float(gradients.squared_global_norm(grads)))


def test_the_clip_on_jax_arrays_clips_each_gradient_by_its_norm(layout):
    grads = _grads()[1:]  # a gradient of no element has no direction
    variables = [
        keras.Variable(np.zeros(g.shape), name=f"v{i}")
        for i, g in enumerate(grads)
    ]
    pairs = gradients.multiply_and_clip(
        list(zip(grads, variables)), clip_norm=1.0
    )
    for (clipped, _), grad, square in zip(pairs, grads, _reference(grads)):
        expected = np.asarray(grad) / max(np.sqrt(square), 1.0)
        np.testing.assert_allclose(clipped, expected, rtol=1e-5, atol=1e-7)


def test_a_layout_map_keeps_one_sum_per_gradient():
    # Under ModelParallel one array of every gradient would gather each
    # one's shards on every device: the per-gradient layout is kept.
    devices = keras.distribution.list_devices()
    mesh = keras.distribution.DeviceMesh((len(devices),), ["model"], devices)
    layout_map = keras.distribution.LayoutMap(mesh)
    model_parallel = keras.distribution.ModelParallel(layout_map=layout_map)
    data_parallel = keras.distribution.DataParallel(devices=devices)
    assert gradients._on_xla_cpu()
    with model_parallel.scope():
        assert not gradients._on_xla_cpu()
    with data_parallel.scope():
        assert gradients._on_xla_cpu()
