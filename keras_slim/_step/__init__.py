"""A `SlimModel` step's update, as one plan of stages (`plan.py`).

`StepPlan` orders the update; each stage is a module: `accumulate`,
`gate`, `policy` (and the in-step summaries), `loss_scale`, `apply` (the
adapter onto Keras's optimizer, with `lr_factors`); `skipped` counts the
steps a gate skipped.
"""

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
