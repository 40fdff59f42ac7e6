"""Models, data and policies shared by the JAX backend's tests."""

import keras
import numpy as np

import keras_slim

#: One policy per field of `GradientPolicy`, as the TensorFlow and JAX
#: runs of tests_jax/test_backend_parity.py both train them.
POLICIES = {
    "default": {},
    "multipliers": {"multipliers": {"logits/.*": 10.0, "fc1/bias": 0.0}},
    "negative": {"multipliers": {"fc2/kernel": -1.0}},
    "freeze": {"freeze": ["fc1/.*"]},
    "trainable": {"trainable": ["logits/.*", "fc2/.*"]},
    "clip_norm": {"clip_norm": 0.05},
    "clip_global_norm": {"clip_global_norm": 0.1},
    "lr_multipliers": {"lr_multipliers": {"fc1/.*": 0.1, "logits/bias": 3.0}},
    "layer_decay": {"layer_decay": 0.5},
    "full": {
        "multipliers": {"logits/.*": 2.0},
        "freeze": ["fc1/bias"],
        "clip_global_norm": 0.5,
        "lr_multipliers": {"fc2/.*": 0.5},
    },
}


#: Two policies that hold every field between them: what the clone tests
#: train on 1 and on N devices.
COMBINED = {
    "full": POLICIES["full"],
    "the rest": {
        "multipliers": {"fc2/kernel": -1.0, "logits/bias": 0.0},
        "trainable": ["logits/.*", "fc2/.*"],
        "clip_norm": 0.05,
        "layer_decay": 0.5,
    },
}


def data(n=64, features=8, classes=3, seed=0):
    """`(x, y)`: float32 features and int labels."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, features)).astype("float32")
    y = rng.integers(0, classes, n).astype("int32")
    return x, y


def mlp(policy=None, *, batch_norm=False, dropout=False, seed=1):
    """A `SlimModel`: fc1, fc2 (optionally batch norm after fc1), logits."""
    keras.utils.set_random_seed(seed)
    inputs = keras.Input((8,))
    h = keras.layers.Dense(16, activation="relu", name="fc1")(inputs)
    if batch_norm:
        h = keras.layers.BatchNormalization(name="bn")(h)
    if dropout:
        h = keras.layers.Dropout(0.3, seed=seed)(h)
    h = keras.layers.Dense(16, activation="tanh", name="fc2")(h)
    outputs = keras.layers.Dense(3, name="logits")(h)
    return keras_slim.SlimModel(
        inputs,
        outputs,
        gradient_policy=keras_slim.GradientPolicy(**(policy or {})),
    )


def compile_model(model, optimizer=None, **kwargs):
    """Compiles with a sparse cross-entropy on logits; AdamW by default."""
    model.compile(
        optimizer=optimizer or keras.optimizers.AdamW(0.01, weight_decay=0.05),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        **kwargs,
    )
    return model


def weights(model):
    """The model's variables and the optimizer's, as numpy, by path (the
    optimizer's without its name, which Keras numbers in a process)."""
    values = {v.path: np.array(v) for v in model.variables}
    for v in model.optimizer.variables:
        values["optimizer/" + v.path.split("/", 1)[-1]] = np.array(v)
    return values


def assert_close(a, b, atol=1e-5, keys=None):
    """Every array of dicts `a` and `b` (or those of `keys`) within atol."""
    keys = keys if keys is not None else sorted(a)
    assert set(keys) <= set(b), sorted(set(keys) - set(b))
    for key in keys:
        np.testing.assert_allclose(
            a[key], b[key], atol=atol, rtol=0, err_msg=key
        )


class Batches(keras.utils.PyDataset):
    """`(x, y)` in batches of 8 by index (Keras shuffles their order when
    `fit(shuffle=True)`)."""

    def __init__(self, x, y):
        super().__init__()
        self.x, self.y = x, y

    def __len__(self):
        return len(self.x) // 8

    def __getitem__(self, index):
        part = slice(index * 8, (index + 1) * 8)
        return self.x[part], self.y[part]
