"""StopAgreement: when workers agree, and on what (two workers simulated
by a fake all-reduce; the real one runs in tests/_fit/test_multi_worker.py)."""

import numpy as np
import tensorflow as tf

from keras_slim._stop_agreement import StopAgreement


class TwoWorkers:
    """A fake all-reduce over two workers of one replica each: this one
    and another whose flag and call time the test sets."""

    def __init__(self):
        self.other_flag, self.other_secs, self.reduces = 0.0, 0.03, 0

    def __call__(self, values):
        self.reduces += 1
        other = [self.other_flag, self.other_secs]
        other += [0.0] * (len(values) - len(other))
        return np.array(values) + np.array(other), 2


class Clock:
    def __init__(self, step):
        self.now, self.step = 0.0, step

    def __call__(self):
        self.now += self.step
        return self.now


def test_one_worker_answers_its_own_flag():
    agree = StopAgreement(tf.distribute.get_strategy())
    assert agree(True) is True
    assert agree(False) is False


def test_workers_agree_each_call_then_about_every_interval():
    fake, clock = TwoWorkers(), Clock(0.01)
    agree = StopAgreement(
        None, interval_secs=1.0, calibration_calls=10, total=fake, clock=clock
    )
    assert [agree(False) for _ in range(10)] == [False] * 10
    assert fake.reduces == 10
    # Mean call time over both workers: (0.01 + 0.03) / 2 = 0.02 s, so an
    # agreement every 50 calls; a flag in between waits for it.
    assert agree.every == 50
    answers = [agree(True) for _ in range(50)]
    assert answers == [False] * 49 + [True]
    assert fake.reduces == 11


def test_a_flag_on_another_worker_stops_this_one():
    fake = TwoWorkers()
    agree = StopAgreement(None, total=fake, clock=Clock(0.01))
    assert agree(False) is False
    fake.other_flag = 1.0
    assert agree(False) is True


def test_slow_calls_agree_at_every_call():
    fake, clock = TwoWorkers(), Clock(5.0)
    fake.other_secs = 5.0
    agree = StopAgreement(None, calibration_calls=3, total=fake, clock=clock)
    for _ in range(3):
        agree(False)
    assert agree.every == 1
    fake.other_flag = 1.0
    assert agree(False) is True


def test_the_chiefs_wish_to_save_reaches_every_worker_at_an_agreement():
    """A time-based save under several workers: every worker saves at the
    agreement after the chief asked (here this worker asks)."""
    fake, clock = TwoWorkers(), Clock(0.01)
    agree = StopAgreement(
        None, interval_secs=1.0, calibration_calls=10, total=fake, clock=clock
    )
    for _ in range(10):
        assert agree.decide(False) == (False, False)
    assert agree.every == 50
    answers = [agree.decide(False, save=True) for _ in range(50)]
    assert answers == [(False, False)] * 49 + [(False, True)]


def test_one_worker_decides_alone():
    agree = StopAgreement(tf.distribute.get_strategy())
    assert agree.decide(False, save=True) == (False, True)
    assert agree.decide(True) == (True, False)
