"""A `SlimModel` step's update, as one plan of stages (`plan.py`).

The plan and its stages run on TensorFlow and are imported on first use;
the gate's check is shared with the JAX step (`keras_slim/_jax/step.py`).
"""

import importlib

from keras_slim._step.gate import NONFINITE
from keras_slim._step.gate import VERDICT

__all__ = [
    "NONFINITE",
    "VERDICT",
    "Outcome",
    "StepPlan",
    "Update",
    "build",
    "check",
    "sum_across_replicas",
]

_FROM_PLAN = frozenset(__all__) - {"NONFINITE", "VERDICT"}


def __getattr__(name):
    if name in _FROM_PLAN:
        plan = importlib.import_module("keras_slim._step.plan")
        return getattr(plan, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
