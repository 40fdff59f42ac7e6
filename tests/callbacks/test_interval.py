"""IntervalTrigger: step multiples, step jumps, a fake clock."""

import pytest

from keras_slim.callbacks._interval import IntervalTrigger


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_every_n_steps_fires_at_multiples():
    trigger = IntervalTrigger(every_n_steps=10)
    trigger.reset(0)
    fired = [step for step in range(1, 35) if trigger(step)]
    assert fired == [10, 20, 30]


def test_step_jumps_fire_at_the_first_step_past_each_multiple():
    trigger = IntervalTrigger(every_n_steps=10)
    trigger.reset(0)
    fired = [step for step in range(4, 41, 4) if trigger(step)]
    assert fired == [12, 20, 32, 40]


def test_reset_on_a_resumed_run_counts_from_the_restored_step():
    trigger = IntervalTrigger(every_n_steps=10)
    trigger.reset(305)
    assert [s for s in range(306, 322) if trigger(s)] == [310, 320]


def test_every_n_secs_with_a_fake_clock():
    clock = FakeClock()
    trigger = IntervalTrigger(every_n_secs=60, clock=clock)
    trigger.reset(0)
    clock.now = 59.9
    assert not trigger(1)
    clock.now = 60.0
    assert trigger(2)
    clock.now = 100.0
    assert not trigger(3)
    clock.now = 120.0
    assert trigger(4)


def test_would_fire_does_not_fire():
    trigger = IntervalTrigger(every_n_steps=5)
    trigger.reset(0)
    assert trigger.would_fire(5)
    assert trigger.would_fire(5)
    assert trigger(5)
    assert not trigger.would_fire(6)


def test_disabled_trigger_never_fires():
    trigger = IntervalTrigger()
    trigger.reset(0)
    assert not trigger.enabled
    assert not any(trigger(step, t=1e9) for step in range(1, 100))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"every_n_steps": 0}, "Received: every_n_steps=0"),
        ({"every_n_steps": 2.5}, "Received: every_n_steps=2.5"),
        ({"every_n_secs": -1}, "Received: every_n_secs=-1"),
        ({"every_n_secs": "60"}, "Received: every_n_secs='60'"),
        ({"at_steps": [-1]}, "Received: at_steps=\\[-1\\]"),
        ({"at_steps": 5}, "Received: at_steps=5"),
        ({"at_steps": [True]}, "Received: at_steps=\\[True\\]"),
    ],
)
def test_bad_intervals(kwargs, message):
    with pytest.raises(ValueError, match=message):
        IntervalTrigger(**kwargs)


def test_used_before_reset():
    with pytest.raises(RuntimeError, match="before `reset"):
        IntervalTrigger(every_n_steps=1)(1)


def test_at_steps_fire_once_each_also_on_a_jump():
    trigger = IntervalTrigger(at_steps=[3, 10, 11])
    trigger.reset(0)
    assert trigger.enabled
    fired = [step for step in range(4, 17, 4) if trigger(step)]
    # 4 covers 3; 12 covers 10 and 11 in one jump; 8 and 16 cover none.
    assert fired == [4, 12]


def test_at_steps_and_every_n_steps_together():
    trigger = IntervalTrigger(every_n_steps=5, at_steps=[2])
    trigger.reset(0)
    assert [s for s in range(1, 11) if trigger(s)] == [2, 5, 10]


@pytest.mark.parametrize(
    "kwargs, first, last, due",
    [
        ({"at_steps": [0]}, 0, 0, 0),
        ({"at_steps": [7, 3]}, 1, 8, 3),
        ({"at_steps": [7]}, 8, 20, None),
        ({"every_n_steps": 10}, 3, 12, 10),
        ({"every_n_steps": 10}, 11, 19, None),
        ({"every_n_steps": 10}, 0, 0, 0),
        ({"every_n_steps": 10, "at_steps": [12]}, 11, 25, 12),
        ({}, 0, 100, None),
    ],
)
def test_first_due_is_the_first_chosen_step_of_a_range(
    kwargs, first, last, due
):
    assert IntervalTrigger(**kwargs).first_due(first, last) == due
