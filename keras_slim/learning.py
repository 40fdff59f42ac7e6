"""`keras_slim.train`: TF-Slim's `slim.learning.train` on `model.fit`."""

import warnings

from keras_slim import _backend
from keras_slim import _run
from keras_slim import _strategy
from keras_slim import _train_checks
from keras_slim import _train_services

__all__ = ["train"]


def train(
    model,
    data,
    logdir,
    *,
    number_of_steps=None,
    steps=None,
    log_every_n_steps=1,
    save_summaries_secs=600,
    save_summaries_steps=None,
    save_interval_secs=600,
    save_interval_steps=None,
    keep_checkpoint_max=5,
    keep_checkpoint_every_n_hours=None,
    trace_every_n_steps=None,
    summarize_variables=False,
    summarize_activations=False,
    summarize_gradients=False,
    warm_start=None,
    startup_delay_steps=0,
    fail_on_nan_loss=True,
    rollback_on_nan=0,
    callbacks=None,
    is_chief=None,
    batch_size=None,
):
    """Trains a compiled model as TF-Slim's `slim.learning.train` did.

    Runs `model.fit` on `data` with keras_slim's callbacks until the global
    step (`model.optimizer.iterations`) reaches `number_of_steps`, or until
    finite data runs out (TF-Slim's `OutOfRangeError` stop). With a
    `logdir`, the latest checkpoint there is restored first, so a rerun
    continues where the last run stopped, checkpoints `model.ckpt-<global
    step>` are saved every `save_interval_secs` seconds and/or
    `save_interval_steps` steps, and once more at the end (by the chief
    only); summaries and traces are written there too. With
    `steps_per_execution > 1`, training stops at the first execution
    boundary at or past `number_of_steps`.

    Args:
        model: A compiled Keras model (a `SlimModel` for gradient policies).
        data: What `fit` takes: a `tf.data.Dataset` of `(x, y)` (or
            `(x, y, sample_weight)`) batches; a `keras.utils.PyDataset` of
            them; a Python generator (or any iterator) of them; or a tuple
            `(x, y)` of arrays together with `batch_size`. Arrays and a
            PyDataset are read pass after pass until `number_of_steps` (or
            `steps`) when it is set, else once; a dataset or a generator,
            as far as it goes. For a `SlimModel`, a checkpoint holds the
            position in the data; in a PyDataset, the pass and the batch
            index: a rerun reads that pass again from index 0, drops the
            batches before the saved index and goes on (the same data when
            `__getitem__` returns the same batch for an index). A
            generator's position cannot be saved: a rerun reads the
            generator it is given, drops as many batches as had been read
            when the checkpoint was saved, and trains on the ones after (a
            warning says so before the first step). Under
            `ParameterServerStrategy` a dataset, arrays or a dataset
            function `input_context -> tf.data.Dataset`, and
            `number_of_steps` is required.
        logdir: Directory for checkpoints, or `None` to write nothing.
        number_of_steps: Positive integer: the global step to stop at, or
            `None` to train until the data runs out (contrib.learn's
            `max_steps`: a rerun after it runs nothing).
            Defaults to `None`.
        steps: Positive integer: how many steps to run in this call, from
            the global step it starts at (after a restore), or `None`.
            contrib.learn's `steps`: a rerun runs that many more. Not with
            `number_of_steps`.
            Defaults to `None`.
        log_every_n_steps: Positive integer or `None`: log the loss of the
            step at global steps that are multiples of it (`LogEveryNSteps`).
            Defaults to `1`.
        save_summaries_secs: Write summaries (`keras_slim.callbacks.
            Summaries`: loss, metrics, learning rate, global_step/sec) every
            this many seconds (`None`: no time trigger).
            Defaults to `600`.
        save_summaries_steps: Write summaries every this many steps.
            Defaults to `None`.
        save_interval_secs: Save a checkpoint every this many seconds
            (`None`: no time trigger).
            Defaults to `600`.
        save_interval_steps: Save a checkpoint every this many steps.
            Defaults to `None`.
        keep_checkpoint_max: How many recent checkpoints to keep; `0` or
            `None` keeps every one (TF1's `Saver`, contrib.learn).
            Defaults to `5`.
        keep_checkpoint_every_n_hours: Positive number or `None`: besides
            the recent ones, keep one checkpoint every this many hours
            (TF1's `Saver`).
            Defaults to `None`.
        trace_every_n_steps: Trace the steps beginning at global steps 0, N,
            2N, ... (`keras_slim.callbacks.Trace`): `tf_trace-<step>.json`
            Chrome traces and TensorBoard profiles in `logdir`.
            Defaults to `None`.
        summarize_variables: Whether the summaries include a histogram
            of every variable (train_image_classifier's).
            Defaults to `False`.
        summarize_activations: Whether they include each layer output's
            histogram and zero fraction (`sparsity/<layer>`), from inside
            the step of a functional `SlimModel`, on the steps that write;
            or a list of layer names: those layers' only (a net's
            end points, as train_image_classifier summarized them).
            Defaults to `False`.
        summarize_gradients: Whether they include each gradient's
            histogram and norm after the policy (`create_train_op`'s
            `summarize_gradients`), from inside the step of a `SlimModel`.
            Defaults to `False`.
        warm_start: A `keras_slim.callbacks.WarmStart`, or a checkpoint
            path (directory, prefix or Keras weights file) to restore every
            model variable from: TF-Slim's `init_fn`. It acts before the
            first step, only when no checkpoint of `logdir` was restored.
            Defaults to `None`.
        startup_delay_steps: Non-negative integer. Under
            `ParameterServerStrategy`, TF-Slim's meaning for asynchronous
            workers: worker `i` starts when the global step reaches `i`
            times this (the coordinator runs at most `1 + step // delay`
            workers' calls at once until all of them run). Elsewhere
            there is no global step shared by separate workers to wait
            on, and a value above 0 is a `ValueError`; so it is with
            synchronous steps (`DeploymentConfig(replicas_to_aggregate=
            ...)`), as TF-Slim required with a `sync_optimizer`.
            Defaults to `0`.
        fail_on_nan_loss: Whether a non-finite loss (or, for a
            `SlimModel`, gradient) raises
            `keras_slim.NanLossDuringTrainingError` (`NanLossGuard`);
            `False` goes on training: a `SlimModel` skips such a step,
            which still advances the global step, and a warning counts
            them.
            Defaults to `True`.
        rollback_on_nan: Non-negative integer: how many times a
            non-finite loss or gradient rolls back to the last checkpoint
            (with its input position), skips the batch that diverged and
            goes on (`NanLossGuard(rollback=...)`), before one stops
            training as `fail_on_nan_loss` does. Needs a `logdir` and a
            `SlimModel`; the steps then run one per call.
            Defaults to `0`.
        callbacks: More Keras callbacks for `fit`.
            Defaults to `None`.
        is_chief: Whether this process writes checkpoints, summaries and
            traces; `None` asks the distribution strategy (the chief
            worker, or the only process).
            Defaults to `None`.
        batch_size: Positive integer, with array `data` only.
            Defaults to `None`.

    Returns:
        The loss of the last step, as a float (not Keras's running mean of
        the epoch; with `steps_per_execution > 1`, the mean over the last
        execution's steps), or `None` when no step ran (the global step had
        already reached `number_of_steps`).

    Raises:
        ValueError: before any step, for an invalid argument; for
            checkpoint, summary or trace settings with `logdir=None`, as in
            TF-Slim; for `startup_delay_steps > 0` under a synchronous
            multi-worker strategy; for a model that is not compiled; for
            `data` of another kind (the message lists the kinds it takes),
            empty data, x and y of different lengths, text for a numeric
            input, or a learning rate that is not finite (or, constant,
            not positive). After `fit`, when data of unknown length
            yielded no batch (no checkpoint is written).
        FileNotFoundError: before any step, for a `warm_start`
            checkpoint that does not exist.
        keras_slim.NanLossDuringTrainingError: for a non-finite loss, when
            `fail_on_nan_loss`.
        keras_slim.TrainingPreemptedError: on SIGTERM or SIGINT, after the
            call in flight finished and `model.ckpt-<step>` was saved (with
            a `logdir`); a rerun resumes from it.
        keras_slim.CheckpointSaveError: when a checkpoint cannot be
            written in `logdir` (a full disk, a file-size limit, no
            permission); no complete checkpoint is lost, and a rerun with
            space resumes from the last one.
        RuntimeError: before any step, when another process trains in
            `logdir`.

    On Keras's JAX backend the same call trains a `keras_slim.SlimModel`
    with the JAX services (docs/tutorials/training_services.md, "On
    JAX"): `data` is arrays, a `keras.utils.PyDataset`, a generator, or a
    `tf.data.Dataset` where TensorFlow is installed; `startup_delay_steps`
    must be 0 (no parameter servers there).

    Example:
    ```python
    final_loss = keras_slim.train(
        model,
        dataset,
        logdir="/tmp/run",
        number_of_steps=1000,
        save_summaries_steps=100,
        save_interval_steps=100,
    )
    ```
    """
    if not _backend.is_tensorflow():
        from keras_slim._jax import learning as jax_learning

        return jax_learning.train(model, dict(locals()))
    settings = _train_checks.checked(model, dict(locals()))
    strategy = model.distribute_strategy
    chief = _strategy.is_chief(strategy, override=is_chief)
    dataset = _train_checks.training_data(model, settings)
    services, last_loss = _train_services.make(
        settings, is_chief=chief, strategy=strategy, dataset=dataset
    )
    callbacks = services + list(callbacks or [])
    if _strategy.mode(strategy).needs_coordinator:
        fit_args = {
            "epochs": 1,
            "steps_per_epoch": settings.number_of_steps or settings.steps,
        }
    else:
        fit_args = {
            "epochs": _train_checks.epochs(settings, dataset),
            "shuffle": False,
        }
    with warnings.catch_warnings():
        # Running out of finite data is how train() stops (slim's
        # OutOfRangeError), not something to warn about.
        warnings.filterwarnings("ignore", message="Your input ran out of data")
        with _run.start(model, is_chief=chief) as run:
            run.startup_delay_steps = settings.startup_delay_steps
            with _run.handed_to(callbacks, run):
                model.fit(
                    dataset,
                    verbose=0,
                    callbacks=callbacks,
                    **fit_args,
                )
    _train_checks.check_some_step_ran(model, settings, last_loss.batches)
    return last_loss.loss
