"""A `SlimModel` step's update, as one plan of stages (`plan.py`)."""

from keras_slim._step.gate import NONFINITE
from keras_slim._step.gate import VERDICT
from keras_slim._step.plan import Outcome
from keras_slim._step.plan import StepPlan
from keras_slim._step.plan import Update
from keras_slim._step.plan import build
from keras_slim._step.plan import check
from keras_slim._step.plan import sum_across_replicas

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
