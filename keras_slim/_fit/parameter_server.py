"""`SlimModel.fit` under `ParameterServerStrategy`, which Keras 3 lacks.
docs/design.md ("Private Keras internals") says how and why.
"""

import contextlib
import inspect
import math
import os
import socket
import time
import types
import warnings
import weakref

import keras

from keras_slim import _keras
from keras_slim import _keras_optimizer
from keras_slim import checks
from keras_slim._backend import tensorflow as tf
from keras_slim._fit import loops
from keras_slim._fit import scheduled_input
from keras_slim._fit import sync_replicas

_COORDINATORS = weakref.WeakKeyDictionary()

#: The environment variable that sets how long `fit` waits, with no worker
#: reachable, before it fails.
WORKER_TIMEOUT_ENV = "KERAS_SLIM_WORKER_TIMEOUT_SECS"
DEFAULT_WORKER_TIMEOUT_SECS = 300.0


def worker_timeout_secs():
    """The bound on waiting for lost workers, from `WORKER_TIMEOUT_ENV`.

    Returns:
        A positive float: seconds.

    Raises:
        ValueError: naming the variable when it is not a positive number.
    """
    text = os.environ.get(WORKER_TIMEOUT_ENV)
    if text is None or not text.strip():
        return DEFAULT_WORKER_TIMEOUT_SECS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ValueError(
            f"{WORKER_TIMEOUT_ENV} must be a positive number of seconds. "
            f"Received: {WORKER_TIMEOUT_ENV}={text!r}"
        )
    return value


def _answers(address, timeout=0.5):
    """Whether a TCP connection to `host:port` succeeds."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


class WorkerWatch:
    """Fails a wait when no worker has been reachable for `timeout` s.

    Args:
        workers: The workers' `host:port` addresses.
        timeout: Positive number: seconds with no worker reachable before
            `check` raises.
        probe_secs: Seconds between two probes.
            Defaults to `1.0`.
        probe: For tests: a function of an address returning whether it
            answers. Defaults to a TCP connection attempt.
        clock: For tests: a function returning seconds.
            Defaults to `time.monotonic`.

    Example:
    ```python
    watch = WorkerWatch(["127.0.0.1:2222"], timeout=300)
    while not coord.done():
        watch.check()  # raises RuntimeError naming the lost workers
        time.sleep(0.002)
    ```
    """

    def __init__(
        self,
        workers,
        timeout,
        *,
        probe_secs=1.0,
        probe=_answers,
        clock=time.monotonic,
    ):
        self._workers = list(workers)
        self._timeout = timeout
        self._probe_secs = probe_secs
        self._probe = probe
        self._clock = clock
        self._reachable_at = clock()
        self._probed_at = -math.inf

    @property
    def workers(self):
        """The workers' addresses."""
        return list(self._workers)

    @property
    def timeout(self):
        """Seconds with no worker reachable before `check` raises."""
        return self._timeout

    @classmethod
    def of(cls, strategy):
        """The watch of a `ParameterServerStrategy`'s workers."""
        workers = _keras.parameter_server_cluster(strategy).get("worker", [])
        if isinstance(workers, dict):
            workers = list(workers.values())
        return cls(workers, worker_timeout_secs())

    def check(self):
        """Probes the workers when due; raises when none answered for
        longer than the timeout.

        Raises:
            RuntimeError: naming the lost workers and the timeout.
        """
        now = self._clock()
        if now - self._probed_at < self._probe_secs:
            return
        self._probed_at = now
        if any(self._probe(address) for address in self._workers):
            self._reachable_at = now
            return
        if now - self._reachable_at > self._timeout:
            raise RuntimeError(
                f"No worker has been reachable for {self._timeout:g} s: "
                f"lost workers {self._workers}. Training cannot go on "
                "without workers. Restart them (the coordinator takes them "
                "back while it waits), or rerun: a run with "
                "keras_slim.callbacks.Checkpoints resumes from the latest "
                f"checkpoint. The bound is {WORKER_TIMEOUT_ENV} (seconds)."
            )


class StartupDelay:
    """TF-Slim's `startup_delay_steps` for asynchronous workers: worker `i`
    starts when the global step reaches `i * delay_steps`.

    The coordinator cannot address one worker, so it bounds how many
    calls run at once instead: `1 + step // delay_steps` (one worker's
    worth at the start, all of them from `(workers - 1) * delay_steps`
    on), in waves it joins.

    Args:
        delay_steps: Non-negative integer; 0 starts every worker at once.
        workers: Positive integer: the cluster's workers.

    Example:
    ```python
    delay = StartupDelay(10, workers=4)
    delay.concurrent(0), delay.concurrent(25)  # 1, 3; None from step 30
    ```
    """

    def __init__(self, delay_steps, workers):
        self._delay = delay_steps
        self._workers = workers

    def concurrent(self, step):
        """How many calls may run at once at global step `step`, or `None`
        when every worker has started (no bound)."""
        if self._delay <= 0:
            return None
        allowed = 1 + step // self._delay
        return None if allowed >= self._workers else allowed


def watched_join(coord, watch, poll_secs=0.002):
    """`coord.join()`, bounded by `watch` when every worker is lost.

    Args:
        coord: A `ClusterCoordinator`.
        watch: A `WorkerWatch`.
        poll_secs: Seconds between two looks at `coord.done()`.
            Defaults to `0.002`.
    """
    while not coord.done():
        watch.check()
        time.sleep(poll_secs)


def coordinator(strategy):
    """The strategy's `ClusterCoordinator` (one per strategy)."""
    if strategy not in _COORDINATORS:
        _COORDINATORS[strategy] = tf.distribute.coordinator.ClusterCoordinator(
            strategy
        )
    return _COORDINATORS[strategy]


def make_updates_atomic(model):
    """Makes every `assign_add` / `assign_sub` of the step a single op.

    On the model's, the optimizer's and the metrics' variables, which the
    parameter servers then apply atomically.

    Args:
        model: A model built in a `ParameterServerStrategy`'s scope.
    """
    optimizer = model.optimizer
    variables = list(model.variables) + list(optimizer.variables)
    if _keras_optimizer.loss_scale_optimizer(optimizer) is not None:
        variables += list(_keras_optimizer.inner_optimizer(optimizer).variables)
    variables += list(model.metrics_variables)
    for variable in variables:
        _keras.make_assign_add_atomic(variable)


def _check_arguments(steps_per_epoch, validation_data, epochs, kwargs):
    if steps_per_epoch is None:
        raise ValueError(
            "`steps_per_epoch` is required under ParameterServerStrategy: "
            "an epoch is the steps scheduled on the workers, and the data "
            "is not read to its end (a dataset function's is read by the "
            "workers, on their own). Received: steps_per_epoch=None"
        )
    checks.positive_int("steps_per_epoch", steps_per_epoch)
    checks.positive_int("epochs", epochs)
    if validation_data is not None:
        raise ValueError(
            "`validation_data` is not supported under "
            "ParameterServerStrategy; evaluate the model after `fit`."
        )
    # Arguments left at Keras's defaults are fine; so is `shuffle`, which
    # means nothing for a dataset (Keras ignores it too).
    defaults = {
        name: parameter.default
        for name, parameter in inspect.signature(
            keras.Model.fit
        ).parameters.items()
    }
    unsupported = {
        k: v
        for k, v in kwargs.items()
        if k != "shuffle" and (k not in defaults or v != defaults[k])
    }
    if unsupported:
        raise ValueError(
            "These `fit` arguments are not supported under "
            f"ParameterServerStrategy: {sorted(unsupported)}."
        )


def fit(
    model,
    x,
    *,
    batch_size=None,
    epochs=1,
    verbose="auto",
    callbacks=None,
    validation_data=None,
    initial_epoch=0,
    steps_per_epoch=None,
    run,
    translate_error=lambda function: function,
    **unsupported,
):
    """`model.fit` under the model's `ParameterServerStrategy`.

    Args:
        model: A compiled `SlimModel` made in the strategy's scope.
        x: A `tf.data.Dataset` of batches (the coordinator reads it
            and sends each call its batches, each batch once; its
            position is saved by `Checkpoints`), or a dataset function
            `input_context -> tf.data.Dataset` (each worker calls it, and
            may shard by `input_context`; no position is saved).
        batch_size: Must be `None` (the data is batched).
        epochs: Positive integer.
        verbose: As Keras's (`"auto"` is 1).
        callbacks: Keras callbacks, run on the coordinator.
        validation_data: Must be `None`.
        initial_epoch: The epoch to start at.
        steps_per_epoch: Required: batches (of `steps_per_execution` steps
            each, the last may be shorter) per epoch.
        run: The fit's `Run`: its `settle()` waits for the steps in
            flight while `fit` runs; its feed is a `HostFeed` when the
            coordinator reads `x` (`scheduled_input.why_workers_read`),
            whose position checkpoints save, and its `Position` callback
            is first in `callbacks`.
        translate_error: Wraps the coordinator's waits, so that a step's
            errors read as they do in Keras's `fit`.
        **unsupported: Other `fit` arguments; any that is set is an error.

    Returns:
        The `History`.

    Raises:
        ValueError: before any step, for missing or unsupported arguments.
        RuntimeError: when a parameter server is lost (training cannot go
            on; a rerun resumes from the last checkpoint).
    """
    _check_arguments(steps_per_epoch, validation_data, epochs, unsupported)
    plan = _plan(model, x, batch_size, run, translate_error)
    callback_list = keras.callbacks.CallbackList(
        callbacks,
        add_history=True,
        add_progbar=verbose != 0,
        verbose=1 if verbose == "auto" else verbose,
        epochs=epochs,
        steps=steps_per_epoch,
        model=model,
    )
    model.stop_training = False
    run.set_settle(plan.settle)
    try:
        with _lost_ps():
            callback_list.on_train_begin()
            # The callbacks' declared step options: fixed from here.
            model.train_function.for_run()
            if plan.sync is not None:
                _check_sync_summaries(run)
            if plan.reads is None:
                # After the restore: the position's iterator is restored.
                plan.reads = scheduled_input.CoordinatorReads(
                    run.feed.source(plan)
                )
            # Keras's `fit` starts where a restore says, as here.
            initial_epoch = _keras.initial_epoch(model) or initial_epoch
            logs = {}
            for epoch in range(initial_epoch, epochs):
                logs = _epoch(
                    model, callback_list, plan, epoch, steps_per_epoch
                )
                if model.stop_training:
                    break
            if plan.sync is not None:
                translate_error(plan.sync.drain)()
                plan.sync.log_counts()
            callback_list.on_train_end(logs)
    finally:
        run.set_settle(None)
        _keras.set_initial_epoch(model, None)
    return model.history


def _plan(model, x, batch_size, run, translate_error):
    """How this fit schedules its steps: built state, what each call
    reads (`scheduled_input`: the coordinator's reads are made when
    training begins, after a restore), and the schedule, join and settle
    of the steps' kind (asynchronous, or synchronous with `SyncSteps`).

    Raises:
        ValueError: for `startup_delay_steps` with synchronous steps.
    """
    strategy = model.distribute_strategy
    fed = run.feed is not None and run.feed.reads_host
    if fed:
        checks.no_batch_size_for_dataset(batch_size)
        sample = x.element_spec
    else:
        dataset_fn, sample = scheduled_input.per_worker_dataset(
            x, batch_size, strategy
        )
    settings = run.mode.sync
    if settings is not None and run.startup_delay_steps:
        raise ValueError(
            "`startup_delay_steps` must be 0 with synchronous steps "
            "(DeploymentConfig(replicas_to_aggregate=...)), as TF-Slim "
            "required with a `sync_optimizer`: every step waits for the "
            "workers anyway. Received: startup_delay_steps="
            f"{run.startup_delay_steps}"
        )
    with strategy.scope():
        _keras.symbolic_build(model, sample)
    model.make_train_function()  # resolves the policy, installs the mixin
    make_updates_atomic(model)
    coord = coordinator(strategy)
    watch = WorkerWatch.of(strategy)
    join = translate_error(lambda: watched_join(coord, watch))
    if fed:
        # Made when training begins, after a restore (`fit`).
        reads = None
        step_function = loops.fed_steps_function(model)
    else:
        reads = scheduled_input.WorkerReads(
            iter(coord.create_per_worker_dataset(dataset_fn))
        )
        step_function = loops.scheduled_steps_function(model)
    if settings is not None:
        sync = sync_replicas.SyncSteps(
            model, coord, reads.iterator, settings, watch
        )
        return types.SimpleNamespace(
            run=run,
            sync=sync,
            schedule=_sync_schedule(sync, translate_error),
            step_function=None,
            reads=reads,
            # Each step ends applied: callbacks read exact variables.
            settle=None,
            # Backups still in flight are waited for once, at the end.
            join=_nothing,
            startup=None,
        )
    return types.SimpleNamespace(
        run=run,
        sync=None,
        schedule=translate_error(coord.schedule),
        step_function=step_function,
        reads=reads,
        settle=join,
        join=join,
        startup=StartupDelay(run.startup_delay_steps, len(watch.workers)),
    )


def _epoch(model, callback_list, plan, epoch, steps):
    """One epoch: its calls between their callbacks, then its logs."""
    model.reset_metrics()
    callback_list.on_epoch_begin(epoch)
    _run_epoch(model, callback_list, plan, steps)
    plan.join()
    logs = _epoch_logs(model)
    callback_list.on_epoch_end(epoch, logs)
    return logs


def _epoch_logs(model):
    return {
        name: float(value) for name, value in model.get_metrics_result().items()
    }


def _run_epoch(model, callback_list, plan, steps):
    """Schedules one epoch's calls, each between its callbacks.

    A call the run says runs no step (`Run.no_step`: a resumed run
    catching up with its epoch's count) reads nothing and schedules
    nothing. With a `StartupDelay`, while not every worker has started, at
    most its `concurrent` calls run at once: a wave of them is joined
    before the next (the global step, read then, is exact). Data that runs
    out stops training after its last batch, with Keras's warning.

    Args:
        model: The model.
        callback_list: The `fit`'s `CallbackList`.
        plan: The `_plan`: `run`, `schedule`, `step_function`, `reads`,
            `join` and `startup`.
        steps: The epoch's steps.
    """
    per_call = model.steps_per_execution
    in_wave = 0
    startup = plan.startup
    for begin in range(0, steps, per_call):
        end = min(begin + per_call, steps) - 1
        callback_list.on_train_batch_begin(begin)
        if model.stop_training:
            break
        if plan.run.no_step:
            plan.run.no_step = False
            callback_list.on_train_batch_end(end, {})
            continue
        if startup is not None:
            allowed = startup.concurrent(
                int(model.optimizer.iterations.numpy())
            )
            if allowed is None:
                startup = None  # every worker has started
            elif in_wave >= allowed:
                plan.join()
                in_wave = 0
        calls, read = plan.reads.calls(end - begin + 1)
        for args in calls:
            plan.schedule(plan.step_function, args=args)
        in_wave += 1
        if read:
            callback_list.on_train_batch_end(begin + read - 1, {})
        if read <= end - begin:
            _ran_out(model)
        if model.stop_training:
            break


def _ran_out(model):
    """Keras's `fit` stops, with this warning, where its data runs out."""
    warnings.warn(
        "Your input ran out of data; interrupting training. Make sure "
        "that your dataset or generator can generate at least "
        "`steps_per_epoch * epochs` batches. You may need to use the "
        "`.repeat()` function when building your dataset.",
        stacklevel=3,
    )
    model.stop_training = True


def _nothing():
    pass


def _check_sync_summaries(run):
    """Activation summaries need the step's batch, which a synchronous
    step's apply (on the coordinator) does not have."""
    hook = run.step_options.step_summaries
    if hook is not None and hook.activations:
        raise ValueError(
            "Activation summaries cannot be written by synchronous steps "
            "over parameter servers (DeploymentConfig(replicas_to_aggregate"
            "=...)): the gradients are applied on the coordinator, and the "
            "batches stay on the workers. Pass summarize_activations=False "
            "(Summaries(activations=False)); gradient summaries work."
        )


def _sync_schedule(sync, translate_error):
    """A `schedule` for `_run_epoch` running `steps` synchronous steps."""
    step = translate_error(sync.step)

    def schedule(function, args):
        del function
        for _ in range(args[1]):
            step()

    return schedule


@contextlib.contextmanager
def _lost_ps():
    """A lost parameter server (the coordinator's waits and schedules fail
    with `UnavailableError`) is a clear error; a lost worker is not seen
    here, the coordinator reschedules its steps."""
    try:
        yield
    except (tf.errors.UnavailableError, tf.errors.AbortedError) as error:
        raise RuntimeError(
            "A parameter server was lost, so training cannot go on (its "
            "variables are gone). Restart the cluster and rerun: a run "
            "with keras_slim.callbacks.Checkpoints resumes from the latest "
            f"checkpoint. The error: {type(error).__name__}: {error}"
        ) from error
