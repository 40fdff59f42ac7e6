"""`keras-slim-train`: TF-Slim's train_image_classifier.py on keras_slim."""

import contextlib
import logging
import sys

import keras

import keras_slim
from keras_slim import _cluster_env
from keras_slim import checkpoints
from keras_slim import checks
from keras_slim.callbacks import StepCallback
from keras_slim.callbacks import WarmStart
from keras_slim.callbacks._files import check_writable
from keras_slim.deployment import read_tf_config
from keras_slim.errors import PREEMPTED_EXIT_CODE
from keras_slim.image import _best_checkpoint
from keras_slim.image import _console
from keras_slim.image import _flag_parser
from keras_slim.image import _flags
from keras_slim.image import _keep_best
from keras_slim.image import _run_summary
from keras_slim.image import _task
from keras_slim.image import datasets
from keras_slim.image import evaluation
from keras_slim.image import learning_rate
from keras_slim.image import nets
from keras_slim.image import optimizer as optimizer_lib

_LOG = logging.getLogger("keras_slim")


def parser():
    """The command's flags (absl's), with TF-Slim's names, defaults and help.

    Returns:
        A `FlagParser`: `parser().parse_args(argv)` returns the flags.
    """
    p = _flag_parser.FlagParser("keras-slim-train", __doc__.split("\n\n")[0])
    add = p.add
    add(
        "train_dir",
        "/tmp/tfmodel/",
        "Directory where checkpoints and event logs are written to.",
    )
    _flags.add_deployment_flags(add)
    _flags.add_services_flags(add)
    _flags.add_best_flags(add, training=True)
    _flags.add_optimization_flags(add)
    _flags.add_fine_tuning_flags(add)
    _flags.add_policy_flags(add)
    _flags.add_precision_flag(add)
    _flags.add_model_flags(add, image_size_flag="--train_image_size")
    _flags.add_data_flags(add, training=True)
    _flags.add_augmentation_flags(add)
    _flags.add_quantization_flag(add, training=True)
    _flags.add_master_flag(add)
    _flags.add_logging_flags(add)
    _flags.add_dry_run_flag(add)
    return p


def _task_from_tf_config(p):
    try:
        task = read_tf_config().get("task", {})
    except ValueError as error:
        p.error(str(error))
    index = task.get("index", 0) if isinstance(task, dict) else None
    if not checks.is_int(index) or index < 0:
        p.error(
            "TF_CONFIG's task index must be a non-negative integer. "
            f"Received: {task!r}"
        )
    return index


def _default_task(p, flags):
    """`--task` when not given: 0 under parameter servers (the
    coordinator), else the index in `TF_CONFIG`, else the rank in a SLURM
    job step, else 0."""
    if flags.num_ps_tasks:
        return 0
    if not read_tf_config().get("cluster") and flags.worker_replicas > 1:
        rank = _cluster_env.slurm_rank()
        if rank is not None:
            return rank
    return _task_from_tf_config(p)


def _check(p, flags):
    """Checks across flags, and paths, before TensorFlow starts."""
    if flags.task is None:
        try:
            flags.task = _default_task(p, flags)
        except ValueError as error:
            p.error(str(error))

    sync_ps = bool(flags.num_ps_tasks and flags.sync_replicas)
    if flags.num_ps_tasks and flags.worker_replicas > 1 and not sync_ps:
        p.error(
            "flag --num_ps_tasks: with parameter servers the workers "
            "are asynchronous unless --sync_replicas is set; "
            f"--worker_replicas must stay 1, got {flags.worker_replicas}"
        )
    if flags.replicas_to_aggregate is None:
        flags.replicas_to_aggregate = flags.worker_replicas
    if flags.replicas_to_aggregate != flags.worker_replicas and not sync_ps:
        p.error(
            "flag --replicas_to_aggregate: backup workers (fewer "
            "gradients per step than --worker_replicas) need parameter "
            "servers and --sync_replicas (--num_ps_tasks > 0); without "
            "them each step aggregates every worker "
            "(MultiWorkerMirroredStrategy): it must equal "
            f"--worker_replicas={flags.worker_replicas}, got "
            f"{flags.replicas_to_aggregate}"
        )
    if flags.summarize_activations is None:
        flags.summarize_activations = not sync_ps
    elif flags.summarize_activations and sync_ps:
        p.error(
            "flag --summarize_activations: synchronous steps over "
            "parameter servers apply on the coordinator, where the "
            "workers' batches are not; pass --nosummarize_activations"
        )
    if flags.keep_best and flags.num_ps_tasks:
        p.error(
            "flag --keep_best: not with parameter servers "
            f"(--num_ps_tasks={flags.num_ps_tasks}); evaluate the "
            "checkpoints with keras-slim-eval --eval_interval_secs, which "
            "keeps the best"
        )
    if sync_ps:
        flags.task = 0  # the coordinator
    if flags.task >= flags.worker_replicas:
        p.error(
            f"flag --task: {flags.task} is not below "
            f"--worker_replicas={flags.worker_replicas}"
        )
    if flags.checkpoint_path is not None:
        try:
            checkpoints.checkpoint_format(flags.checkpoint_path)
        except (FileNotFoundError, ValueError) as error:
            p.error(f"flag --checkpoint_path: {error}")
    try:
        check_writable(
            "train_dir",
            flags.train_dir,
            what="checkpoints",
            create=not flags.dry_run,
        )
    except ValueError as error:
        p.error(f"flag --train_dir: {error}")


def _deployment(flags):
    sync_ps = bool(flags.num_ps_tasks and flags.sync_replicas)
    return keras_slim.DeploymentConfig(
        num_clones=flags.num_clones,
        clone_on_cpu=flags.clone_on_cpu,
        replica_id=0 if sync_ps else flags.task,
        num_replicas=1 if sync_ps else flags.worker_replicas,
        num_ps_tasks=flags.num_ps_tasks,
        replicas_to_aggregate=flags.replicas_to_aggregate if sync_ps else None,
        total_num_replicas=flags.worker_replicas if sync_ps else None,
        slurm_port_base=flags.slurm_port_base,
    )


def _scopes(flags, scopes):
    """Patterns on variable paths for scopes as TF-Slim's users write
    them (`InceptionV3/Logits`) or as Keras paths (`logits`): prefixes."""
    return [f"{nets.slim_scope(flags.model_name, s)}.*" for s in scopes]


def _policy(flags):
    return keras_slim.GradientPolicy(
        trainable=_scopes(flags, flags.trainable_scopes)
        if flags.trainable_scopes
        else None,
        freeze=_scopes(flags, flags.freeze),
        multipliers=flags.gradient_multipliers,
        clip_norm=flags.clip_gradient_norm,
        lr_multipliers=flags.learning_rate_multipliers,
    )


def _schedule(flags, task):
    """The learning rate's `learning_rate.DecaySchedule`, from the flags."""
    # TF-Slim's --sync_replicas: each step aggregates the batches of
    # --replicas_to_aggregate workers (parameter servers with
    # --sync_replicas; multi-worker replicas always).
    sync_ps = bool(flags.num_ps_tasks and flags.sync_replicas)
    multi_worker = not flags.num_ps_tasks and flags.worker_replicas > 1
    return learning_rate.DecaySchedule.from_flags(
        task.num_samples,
        learning_rate=flags.learning_rate,
        learning_rate_decay_type=flags.learning_rate_decay_type,
        num_epochs_per_decay=flags.num_epochs_per_decay,
        learning_rate_decay_factor=flags.learning_rate_decay_factor,
        end_learning_rate=flags.end_learning_rate,
        batch_size=flags.batch_size,
        sync_replicas=sync_ps or multi_worker,
        replicas_to_aggregate=flags.replicas_to_aggregate,
        warmup_epochs=flags.warmup_epochs,
        max_number_of_steps=flags.max_number_of_steps,
    )


def _build(flags, task, *, schedule=None):
    keras.utils.set_random_seed(0)
    model = nets.build(
        task.model_name,
        task.num_classes,
        image_size=task.image_size,
        channels=task.channels,
        weight_decay=flags.weight_decay,
        gradient_policy=_policy(flags),
    )
    rate = (schedule or _schedule(flags, task)).build()
    loss = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=flags.label_smoothing
    )
    optimizer = optimizer_lib.configure_optimizer(
        rate,
        optimizer=flags.optimizer,
        moving_average_decay=flags.moving_average_decay,
        **{
            name: getattr(flags, name) for name in optimizer_lib.OPTIMIZER_FLAGS
        },
    )
    if len(model.outputs) == 2:
        # TF-Slim's AuxLogits: their loss weighs 0.4 of the logits'.
        model.compile(
            optimizer=optimizer,
            loss=[loss, loss],
            loss_weights=[1.0, 0.4],
            metrics=[["accuracy"], []],
        )
    else:
        model.compile(optimizer=optimizer, loss=loss, metrics=["accuracy"])
    return model


class _Progress(StepCallback):
    """Keras's progress bar over global steps, for a terminal."""

    def __init__(self, target):
        super().__init__()
        self.target = target

    def on_first_batch(self, step):
        self.bar = keras.utils.Progbar(self.target, unit_name="step")
        self.bar.update(step)

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        values = [("loss", logs["loss"])] if logs else None
        self.bar.update(self.counter.step, values=values)


def _held_out_task(flags):
    """The held-out split the chief evaluates at the end (the dataset's
    validation or test split), found before the first step; `None` (said
    once) when `--dataset_dir` has none."""
    try:
        return _task.task(
            flags,
            split=_task.held_out_split(flags),
            batch_size=100,
            image_size=flags.train_image_size,
            is_training=False,
        )
    except datasets.MissingSplitError as error:
        _LOG.info("No held-out accuracy at the end: %s", error)
        return None


def _held_out(model, flags, task):
    """The accuracy on the held-out split, printed at the end of training."""
    if flags.moving_average_decay:
        model.optimizer.finalize_variable_values(model.trainable_variables)
    results = evaluation.evaluate(model, task.make_dataset(None))
    return results["accuracy"], results["count"]


def _keep_best_callbacks(flags, train, held_out):
    """`[KeepBest]` on the chief with `--keep_best`, its best so far read;
    else `[]`. Its network is built before the trained one, which is
    built after seeding: the training draws no other random numbers."""
    if not flags.keep_best:
        return []
    _best_checkpoint.check_metric(
        flags.best_metric, num_classes=train.num_classes
    )
    if held_out is None:
        raise ValueError(
            "flag --keep_best: the dataset has no held-out split to "
            f"evaluate (--dataset_dir={flags.dataset_dir!r})"
        )
    keeper = _best_checkpoint.BestCheckpoint.open(
        flags.train_dir, metric=flags.best_metric
    )
    network = nets.build(
        train.model_name,
        train.num_classes,
        image_size=train.image_size,
        channels=train.channels,
    )
    return [_keep_best.KeepBest(keeper, network=network, task=held_out)]


def _warm_start(flags):
    if not flags.checkpoint_path:
        return None
    name_map = None
    if checkpoints.checkpoint_format(flags.checkpoint_path) == "tf1":
        # A TF-Slim checkpoint: TF-Slim's names, not Keras's paths.
        try:
            name_map = nets.slim_name_map(flags.model_name)
        except ValueError:
            name_map = None  # names as they are (the paths)
    return WarmStart(
        flags.checkpoint_path,
        exclude=_scopes(flags, flags.checkpoint_exclude_scopes),
        ignore_missing=flags.ignore_missing_vars,
        name_map=name_map,
    )


def _labelled_for(model, make_dataset):
    """The dataset function, its labels given to each of the model's
    outputs (the logits and TF-Slim's AuxLogits)."""
    if len(model.outputs) == 1:
        return make_dataset

    def make(input_context=None):
        data = make_dataset(input_context)
        return data.map(lambda images, labels: (images, (labels, labels)))

    return make


def _activations(model, flags):
    """What `--summarize_activations` summarizes: a TF-Slim net's
    end_points, as train_image_classifier did, else every layer."""
    if not flags.summarize_activations:
        return False
    return tuple(getattr(model, "slim_end_points", ())) or True


def _train(model, data, flags, warm, config, progress, *, more=()):
    """`keras_slim.train` with the flags' arguments."""
    keras_slim.train(
        model,
        data,
        logdir=flags.train_dir,
        number_of_steps=flags.max_number_of_steps,
        log_every_n_steps=None if progress else flags.log_every_n_steps,
        save_summaries_secs=flags.save_summaries_secs,
        save_summaries_steps=flags.save_summaries_steps,
        summarize_variables=flags.summarize_variables,
        summarize_activations=_activations(model, flags),
        summarize_gradients=flags.summarize_gradients,
        save_interval_secs=flags.save_interval_secs,
        trace_every_n_steps=flags.trace_every_n_steps,
        keep_checkpoint_max=flags.keep_checkpoint_max,
        keep_checkpoint_every_n_hours=flags.keep_checkpoint_every_n_hours,
        rollback_on_nan=flags.rollback_on_nan,
        warm_start=warm,
        is_chief=config.is_chief,
        callbacks=[*progress, *more],
    )


@contextlib.contextmanager
def _dtype_policy(name):
    """Keras's global dtype policy `name` (`None`: unchanged) while the net
    is built and compiled; the layers and the optimizer keep it after."""
    if name is None:
        yield
        return
    before = keras.mixed_precision.global_policy()
    keras.mixed_precision.set_global_policy(name)
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy(before)


def _replicas(flags, strategy):
    """The clones whose batches make one batch of the input: a
    parameter-server worker's clones, else the strategy's replicas in
    sync; without a strategy (`--dry_run` of a cluster, which connects to
    none) the flags' clones on each of `--worker_replicas` workers."""
    if flags.num_ps_tasks:
        return flags.num_clones
    if strategy is None:
        return flags.num_clones * flags.worker_replicas
    return strategy.num_replicas_in_sync


def _summary(flags, config, batch, train, schedule, model, warm):
    """What the run will do (`_run_summary.summary`), resuming from the
    newest checkpoint of `--train_dir`, as the run's resume finds it."""
    return _run_summary.summary(
        flags,
        config=config,
        batch=batch,
        train=train,
        schedule=schedule,
        model=model,
        warm=warm,
        resumed=_run_summary.resume_step(flags.train_dir),
    )


def _say(text, flags):
    """Logs `text`; prints it on stdout too when the log goes to stderr."""
    _LOG.info("%s", text)
    if flags.alsologtostderr or flags.logtostderr:
        print(text)


def run(flags):
    """Trains as the flags say; returns the exit code."""
    # The data's shuffles draw from TensorFlow's global seed with their
    # own: seeded first, a run reads the same batches in any process (a
    # second `main` in one process too), as the model is built (`_build`).
    keras.utils.set_random_seed(0)
    config = _deployment(flags)
    if config.serves and not flags.dry_run:
        # A worker or ps task of Kubeflow's TFJob or a SLURM step: the
        # coordinator (the chief task) schedules the steps on it.
        return _cluster_env.serve(
            config.cluster_resolver,
            log=_LOG.info,
            watch_coordinator=config.cluster_source == "SLURM",
        )
    # A dry run of a cluster says what it would do from the flags alone.
    cluster = config.kind in ("multi_worker", "parameter_server")
    strategy = None
    if not (flags.dry_run and cluster):
        strategy = config.strategy()  # before TensorFlow's devices are used

    batch = _run_summary.batches(flags, _replicas(flags, strategy))
    train = _task.task(
        flags,
        split=flags.dataset_split_name,
        batch_size=batch.input_batch,
        image_size=flags.train_image_size,
        is_training=True,
    )
    schedule = _schedule(flags, train)
    if flags.keep_best:  # a dry run refuses a metric the run would refuse
        _best_checkpoint.check_metric(
            flags.best_metric, num_classes=train.num_classes
        )
    held_out, keep_best = None, []
    if config.is_chief and not flags.dry_run:
        held_out = _held_out_task(flags)
        # Before the model: KeepBest's network of its own is built first.
        keep_best = _keep_best_callbacks(flags, train, held_out)
    scope = strategy.scope() if strategy else contextlib.nullcontext()
    with scope, _dtype_policy(flags.mixed_precision):
        model = _build(flags, train, schedule=schedule)
    warm = _warm_start(flags)
    if config.is_chief or flags.dry_run:
        _say(
            _summary(flags, config, batch, train, schedule, model, warm), flags
        )
    else:
        _LOG.info("%s", config.describe())
    if flags.dry_run:
        return 0
    data = _labelled_for(model, train.make_dataset)
    if not flags.num_ps_tasks:
        data = data(None)  # parameter-server workers call the function
    progress = []
    if sys.stdout.isatty() and flags.max_number_of_steps:
        progress = [_Progress(flags.max_number_of_steps)]
    try:
        with _task.images_named(train):
            _train(model, data, flags, warm, config, progress, more=keep_best)
    except (
        keras_slim.NanLossDuringTrainingError,
        keras_slim.CheckpointSaveError,
    ) as error:
        print(f"keras-slim-train: {error}", file=sys.stderr)
        return 1
    except keras_slim.TrainingPreemptedError as error:
        print(f"keras-slim-train: {error}", file=sys.stderr)
        return PREEMPTED_EXIT_CODE
    if held_out is not None:
        with _task.images_named(held_out):
            accuracy, count = _held_out(model, flags, held_out)
        step = int(model.optimizer.iterations.numpy())
        what = "digits" if flags.dataset_dir is None else "images"
        print(
            f"held-out accuracy: {accuracy:.4f} on {count} {what} "
            f"(global step {step})"
        )
    if config.is_chief:
        print(f"TensorBoard: tensorboard --logdir {flags.train_dir}")
    return 0


def main(argv=None):
    """The console script `keras-slim-train`."""
    p = parser()
    flags = p.parse_args(argv)
    _console.check_backend(p)
    _check(p, flags)
    _flags.check_flags(p, flags, "--train_image_size")
    _console.configure(
        flags.verbosity, flags.alsologtostderr or flags.logtostderr
    )
    try:
        return run(flags)
    except (ValueError, FileNotFoundError) as error:
        # Raised before any step: an argument that does not fit.
        print(f"keras-slim-train: error: {error}", file=sys.stderr)
        return 2


__all__ = ["main", "parser"]


def console():
    """The console script `keras-slim-train`: `main()`, then the exit
    (`_console.exit_now`)."""
    _console.exit_now(main())


if __name__ == "__main__":
    console()
