"""`keras_slim.moving_averages.warm_up`: TF1's ExponentialMovingAverage.

The reference is TF1's own `tf.compat.v1.train.ExponentialMovingAverage(
decay, num_updates=global_step)`, applied after each step of a
`GradientDescentOptimizer` in graph mode (in the tests' TF1 child), read
step by step; keras_slim's averages of the same problem are read after
each batch of `fit`, in one run and in a run resumed from a checkpoint.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

import keras_slim
from keras_slim import _keras_optimizer
from keras_slim import moving_averages
from tests import tf_slim_peer
from tests.helpers import global_step
from tests.optimizer_problem import INITIAL
from tests.optimizer_problem import X
from tests.optimizer_problem import Y

STEPS = 24
RATE = 0.05

_TF1 = """
X = np.array({x!r}, "float32")
Y = np.array({y!r}, "float32")
averages = {{}}
for decay in {decays!r}:
    with tf.Graph().as_default():
        step = tf1.train.get_or_create_global_step()
        kernel = tf1.get_variable(
            "kernel", initializer=np.array({kernel!r}, "float32"),
            use_resource=True)
        bias = tf1.get_variable(
            "bias", initializer=np.array({bias!r}, "float32"),
            use_resource=True)
        loss = tf.reduce_mean(tf.square(tf.matmul(X, kernel) + bias - Y))
        train_op = tf1.train.GradientDescentOptimizer({rate!r}).minimize(
            loss, step)
        ema = tf1.train.ExponentialMovingAverage(decay, num_updates=step)
        with tf.control_dependencies([train_op]):
            average_op = ema.apply([kernel, bias])
        shadows = [ema.average(kernel), ema.average(bias)]
        with tf1.Session() as sess:
            sess.run(tf1.global_variables_initializer())
            averages[str(decay)] = []
            for _ in range({steps!r}):
                sess.run(average_op)
                averages[str(decay)].append(
                    [s.tolist() for s in sess.run(shadows)])
print(json.dumps(averages))
"""


@pytest.fixture(scope="module")
def tf1_averages():
    """`{decay: [[kernel's, bias's average] after each step]}`, TF1's."""
    code = _TF1.format(
        x=X.tolist(),
        y=Y.tolist(),
        kernel=INITIAL["kernel"].tolist(),
        bias=INITIAL["bias"].tolist(),
        rate=RATE,
        steps=STEPS,
        decays=[0.5, 0.999],
    )
    return {float(k): v for k, v in tf_slim_peer.run(code).items()}


class ReadAverages(keras.callbacks.Callback):
    """The optimizer's averages after each global step, in order (a
    resumed run's batches that catch up with Keras's count run none)."""

    def __init__(self):
        super().__init__()
        self.by_step = {}

    @property
    def seen(self):
        return [self.by_step[step] for step in sorted(self.by_step)]

    def on_train_batch_end(self, batch, logs=None):
        optimizer = self.model.optimizer
        pairs = _keras_optimizer.moving_averages(optimizer)
        step = global_step(optimizer)
        self.by_step[step] = [np.array(a.numpy()) for _, a in pairs]


def model(decay, cls=keras_slim.SlimModel):
    inputs = keras.Input((3,))
    dense = keras.layers.Dense(2, name="fc")
    net = cls(inputs, dense(inputs))
    dense.kernel.assign(INITIAL["kernel"])
    dense.bias.assign(INITIAL["bias"])
    optimizer = keras.optimizers.SGD(RATE, use_ema=True, ema_momentum=decay)
    net.compile(optimizer=moving_averages.warm_up(optimizer), loss="mse")
    return net


def fit(net, steps, callbacks=()):
    """One epoch of `steps` steps on the problem's whole batch."""
    reader = ReadAverages()
    data = tf.data.Dataset.from_tensors((X, Y)).repeat(steps)
    net.fit(data, verbose=0, callbacks=[reader, *callbacks])
    return reader.seen


def assert_averages(seen, expected):
    assert len(seen) == len(expected)
    for step, (ours, theirs) in enumerate(zip(seen, expected), start=1):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(
                a, np.array(b), rtol=1e-5, atol=1e-6, err_msg=f"step {step}"
            )


@pytest.mark.parametrize("cls", [keras_slim.SlimModel, keras.Model])
@pytest.mark.parametrize("decay", [0.5, 0.999])
def test_each_step_equals_tf1s_exponential_moving_average(
    decay, cls, tf1_averages
):
    # 0.5 reaches its cap at step 8, 0.999 warms up the whole run.
    assert_averages(fit(model(decay, cls), STEPS), tf1_averages[decay])


def test_keras_own_averages_are_not_tf1s(tf1_averages):
    # The premise: without warm_up the run differs (Keras's averages
    # start at the first step's weights, with a fixed momentum).
    net = model(0.999)
    plain = keras.optimizers.SGD(RATE, use_ema=True, ema_momentum=0.999)
    net.compile(optimizer=plain, loss="mse")
    with pytest.raises(AssertionError):
        assert_averages(fit(net, STEPS), tf1_averages[0.999])


def train(net, logdir, steps):
    """`keras_slim.train` to global step `steps`, resuming from `logdir`."""
    reader = ReadAverages()
    keras_slim.train(
        net,
        tf.data.Dataset.from_tensors((X, Y)).repeat(),
        str(logdir),
        number_of_steps=steps,
        save_summaries_secs=None,
        log_every_n_steps=None,
        callbacks=[reader],
    )
    return reader.by_step


def test_a_run_continued_to_a_higher_step_goes_on_as_tf1s(
    tmp_path, tf1_averages
):
    first = train(model(0.999), tmp_path, 10)
    again = model(0.999)  # restores step 10's weights and averages
    rest = train(again, tmp_path, STEPS)
    assert global_step(again) == STEPS
    assert sorted(first) == list(range(1, 11))
    assert max(rest) == STEPS
    # Step 10's averages as restored, then those of steps 11 to 24.
    both = {**first, **rest}
    assert_averages([both[s] for s in sorted(both)], tf1_averages[0.999])


def test_under_a_loss_scale_and_on_clones(mirrored, tf1_averages):
    with mirrored.scope():
        net = model(0.999)
        scaled = keras.optimizers.LossScaleOptimizer(
            moving_averages.warm_up(
                keras.optimizers.SGD(RATE, use_ema=True, ema_momentum=0.999)
            )
        )
        net.compile(optimizer=scaled, loss="mse")
    assert_averages(fit(net, STEPS), tf1_averages[0.999])


def test_decay_at():
    assert float(moving_averages.decay_at(0.9999, 40)) == pytest.approx(41 / 50)
    assert float(moving_averages.decay_at(0.5, 40)) == 0.5


def test_an_optimizer_without_averages_is_refused():
    with pytest.raises(ValueError, match="use_ema=False"):
        moving_averages.warm_up(keras.optimizers.SGD(0.1))
