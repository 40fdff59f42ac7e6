"""The TF-Slim child tests/tf_slim_peer.py keeps: each code in its own
names and default graph, as in a child of its own; a failure reported,
and the child still there for the next code."""

import pytest

from tests import tf_slim_peer

# A variable of the default graph: a second run in the same graph would
# be refused ("Variable v already exists").
CODE = """
v = tf1.get_variable("v", initializer=np.float32(3.0))
assert "seen" not in globals()
seen = True
with tf1.Session() as session:
    session.run(tf1.global_variables_initializer())
    print(json.dumps([v.op.name, float(session.run(v * 2.0))]))
"""


def test_codes_run_apart_and_a_failure_leaves_the_child():
    first = tf_slim_peer.run(CODE)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        tf_slim_peer.run("print(1 / 0)")
    assert tf_slim_peer.run(CODE) == first == ["v", 6.0]
