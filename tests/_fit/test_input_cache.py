"""keras_slim/_fit/input_cache.py: one dataset's prepared values, by
identity. (A fit's use of it: tests/test_model.py.)"""

import tensorflow as tf

from keras_slim._fit.input_cache import InputCache


def test_values_are_made_once_per_dataset_and_key():
    cache = InputCache()
    data = tf.data.Dataset.range(4)
    made = []

    def make(value):
        return lambda: made.append(value) or value

    assert cache.get(data, "a", make(1)) == 1
    assert cache.get(data, "a", make(2)) == 1
    assert cache.get(data, "b", make(3)) == 3
    assert made == [1, 3]
    # An equal but other dataset is another input: everything is remade,
    # and the first dataset is no longer held.
    other = tf.data.Dataset.range(4)
    assert cache.get(other, "a", make(4)) == 4
    assert cache.get(data, "a", make(5)) == 5
    assert made == [1, 3, 4, 5]


def test_swap_returns_what_was_kept_and_keeps_no_none():
    cache = InputCache()
    data = tf.data.Dataset.range(4)
    assert cache.swap(data, "left", "it1") is None
    assert cache.swap(data, "left", None) == "it1"
    assert cache.swap(data, "left", None) is None
    cache.swap(data, "left", "it2")
    assert cache.swap(tf.data.Dataset.range(4), "left", None) is None
