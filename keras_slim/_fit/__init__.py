"""How `SlimModel.fit` schedules its steps; Keras's `fit` stays the loop."""

import importlib

from keras_slim import _backend
from keras_slim import _keras
from keras_slim import _run
from keras_slim import checks
from keras_slim._fit import position

# The modules of TensorFlow's step (the feed, the loops, the train
# function: they import keras_slim/_step's stages) are imported on first
# use; the callbacks import `position` and `rollback` without them.

__all__ = [
    "TrainFunction",
    "build_on_one_replica",
    "fit",
]


def _from(module, name):
    """A maker of `keras_slim._fit.<module>.<name>`, for `__getattr__`."""
    return lambda: getattr(
        importlib.import_module(f"{__name__}.{module}"), name
    )


__getattr__ = _backend.lazy_attributes(
    __name__,
    {
        "TrainFunction": _from("train_function", "TrainFunction"),
        "build_on_one_replica": _from("multi_worker", "build_on_one_replica"),
    },
)


def fit(model, keras_fit, x, y, kwargs, *, auto):
    """Runs one `fit` call of a `SlimModel`.

    Args:
        model: The `SlimModel`.
        keras_fit: Keras's `fit` bound to the model.
        x: `fit`'s data argument.
        y: `fit`'s targets, or `None`.
        kwargs: `fit`'s other keyword arguments.
        auto: Whether the steps per call are the model's to choose
            (`compile(steps_per_execution="auto")`).

    Returns:
        The `History`.

    Raises:
        ValueError: before any step, for text fed to a numeric input;
            under `ParameterServerStrategy`, for `y` or arguments its loop
            does not support.
    """
    checks.numeric_inputs(model, x)
    with _run.start(model) as run:
        run.records = None
        function = model.make_train_function()
        callbacks = list(kwargs.get("callbacks") or [])
        with function.bound(run, callbacks), _run.handed_to(callbacks, run):
            if run.mode.needs_coordinator:
                return _fit_on_parameter_servers(
                    model, run, x, y, kwargs, auto, function.inputs
                )
            return _fit_with_keras(
                model, run, keras_fit, x, y, kwargs, auto, function.inputs
            )


def _fit_with_keras(model, run, keras_fit, x, y, kwargs, auto, cache):
    """Keras's `fit`, on the run's feed, at the steps per call chosen;
    `cache` is the train function's `InputCache`."""
    from keras_slim._fit import auto_steps
    from keras_slim._fit import feed as feed_lib

    steps = None
    if auto:
        steps = 1 if model.run_eagerly else auto_steps.choose(model, x, kwargs)
        model.steps_per_execution = steps
    run.feed = feed_lib.make(model, x, y, kwargs, steps, cache, mode=run.mode)
    run.position = run.feed.position
    kwargs = dict(run.feed.kwargs)
    kwargs["callbacks"] = [
        position.Position(run),
        *(kwargs.get("callbacks") or []),
    ]
    try:
        return keras_fit(*run.feed.keras_data(), **kwargs)
    finally:
        run.feed.end()
        _keras.set_initial_epoch(model, None)
        if auto:
            # Evaluation and prediction keep one batch per call.
            model.steps_per_execution = 1


def _fit_on_parameter_servers(model, run, x, y, kwargs, auto, cache):
    """keras_slim's coordinator loop; `cache` is the train function's
    `InputCache`. A `tf.data.Dataset` is read by the coordinator, in a
    `HostFeed` whose position checkpoints save; a dataset function by the
    workers (`scheduled_input.why_workers_read`)."""
    from keras_slim._fit import auto_steps
    from keras_slim._fit import feed as feed_lib
    from keras_slim._fit import parameter_server
    from keras_slim._fit import scheduled_input
    from keras_slim._fit.train_function import translate_nonfinite

    if y is not None:
        raise ValueError(
            "Under ParameterServerStrategy, pass a tf.data.Dataset of "
            "(x, y) batches or a dataset function as `x`, and no `y`."
        )
    why = scheduled_input.why_workers_read(model, x)
    if why is None:
        run.feed = feed_lib.make(
            model, x, None, kwargs, None, cache, mode=run.mode
        )
    else:
        run.feed = feed_lib.Feed(
            x,
            None,
            kwargs,
            position=position.InputPosition(follows_keras=False),
            why=why,
        )
    run.position = run.feed.position
    if auto:
        model.steps_per_execution = auto_steps.choose(model, x, kwargs)
    kwargs = dict(kwargs)
    kwargs["callbacks"] = [
        position.Position(run),
        *(kwargs.get("callbacks") or []),
    ]
    try:
        return parameter_server.fit(
            model,
            x,
            run=run,
            translate_error=lambda f: translate_nonfinite(f, model.optimizer),
            **kwargs,
        )
    finally:
        run.feed.end()
        if auto:
            model.steps_per_execution = 1
