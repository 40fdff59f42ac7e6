"""What a `SlimModel` train step is traced with, fixed for a run."""

import dataclasses

# Field metadata of the options the train function sets, not callbacks.
_OWNED = {"owner": "the train function"}


@dataclasses.dataclass(frozen=True)
class StepOptions:
    """The options of one traced train step.

    Attributes:
        raise_on_nonfinite: Whether a non-finite loss or gradient fails
            the step (`NanLossDuringTrainingError`); else the step is
            skipped. Declared by `NanLossGuard` (its `fail`).
        step_summaries: The in-step summaries hook (`callbacks/
            _step_summaries.py`), or `None`. Declared by `Summaries`.
        skipped_steps: The `SkippedSteps` the skip branch records into,
            or `None`. Set by the train function.
        defer_check: Whether the step is XLA-compiled, which compiles an
            `Assert` away: the step then returns its numeric verdict and
            the loop around it fails the step (`keras_slim/_step/gate.py`).
            Set by the train function.
        overflow_steps: Under a `LossScaleOptimizer`, the `SkippedSteps`
            counting the steps skipped for a loss-scale overflow (a finite
            loss with a non-finite gradient); else `None`. Set by the
            train function.
    """

    raise_on_nonfinite: bool = True
    step_summaries: object = None
    skipped_steps: object = dataclasses.field(default=None, metadata=_OWNED)
    defer_check: bool = dataclasses.field(default=False, metadata=_OWNED)
    overflow_steps: object = dataclasses.field(default=None, metadata=_OWNED)


#: A step outside keras_slim's `fit` (`keras.Model.fit` called directly).
DEFAULT = StepOptions()

#: The fields callbacks may declare.
DECLARABLE = tuple(
    f.name for f in dataclasses.fields(StepOptions) if f.metadata != _OWNED
)


def declared(callbacks, model):
    """Merges the step options the callbacks declare.

    Each callback with a `step_options(model)` method (keras_slim's
    `StepCallback`s, `NanLossGuard`, or any callback saying the same)
    returns a dict of `StepOptions` fields; a field no callback declares
    keeps its default.

    Args:
        callbacks: The fit's callbacks.
        model: The model being fitted.

    Returns:
        A dict of field name to value.

    Raises:
        ValueError: for a field that is not declarable, or for two
            callbacks declaring different values of one field (the
            message names both).

    Example:
    ```python
    declared([NanLossGuard(fail=False)], model)
    # {"raise_on_nonfinite": False}
    ```
    """
    merged, owners = {}, {}
    for index, callback in enumerate(callbacks):
        declare = getattr(callback, "step_options", None)
        if not callable(declare):
            continue
        callback = _describe(index, callback)
        for name, value in dict(declare(model)).items():
            _check_declarable(callback, name)
            if name in merged and merged[name] != value:
                raise ValueError(
                    f"Two callbacks declare different step options "
                    f"`{name}`: {owners[name]} declares "
                    f"{name}={merged[name]!r}, {callback} "
                    f"declares {name}={value!r}. One step runs with one "
                    "value: keep one of them."
                )
            merged[name], owners[name] = value, callback
    return merged


def _check_declarable(callback, name):
    """`callback` is the declaring callback's description."""
    if name not in DECLARABLE:
        raise ValueError(
            f"Invalid step option declared by {callback}: "
            f"{name!r}. Expected one of {list(DECLARABLE)}."
        )


def _describe(index, callback):
    """Names a callback, and its place among the fit's callbacks."""
    return f"{type(callback).__name__} (callbacks[{index}])"
