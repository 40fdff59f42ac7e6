"""What a `SlimModel` train step is traced with, fixed for a run.

The train function fixes a run's options when it makes (or reuses) the
compiled functions for that run (`keras_slim/_fit/train_function.py`),
and the step reads them while it is traced, so what callbacks change
during the run does not change the step.
"""

import dataclasses


@dataclasses.dataclass(frozen=True)
class StepOptions:
    """The options of one traced train step.

    Attributes:
        raise_on_nonfinite: Whether a non-finite loss or gradient fails
            the step (`NanLossDuringTrainingError`); else the step is
            skipped (`NanLossGuard(fail=False)`).
        step_summaries: The in-step summaries hook (`callbacks/
            _step_summaries.py`), or `None`.
        skipped_steps: The `SkippedSteps` the skip branch records into,
            or `None`.
        defer_check: Whether the step is XLA-compiled, which compiles an
            `Assert` away: the step then returns its numeric verdict and
            the loop around it fails the step (`keras_slim/_optimizer.py`).
        overflow_steps: Under a `LossScaleOptimizer`, the `SkippedSteps`
            counting the steps skipped for a loss-scale overflow (a finite
            loss with a non-finite gradient); else `None`.
    """

    raise_on_nonfinite: bool = True
    step_summaries: object = None
    skipped_steps: object = None
    defer_check: bool = False
    overflow_steps: object = None


#: A step outside keras_slim's `fit` (`keras.Model.fit` called directly).
DEFAULT = StepOptions()
