"""`WarmStart`: initialise a model from another checkpoint before training."""

from keras_slim import _backend
from keras_slim.callbacks import _warm_start
from keras_slim.callbacks._run_callback import RunCallback


class WarmStart(_warm_start.WarmStartBase, RunCallback):
    """Initialises model variables from a checkpoint before the first step.

    TF-Slim's `init_fn` (`assign_from_checkpoint_fn`) and
    train_image_classifier's `--checkpoint_path`: fine-tune from a
    pretrained network. It acts once, just before the first training step
    (after every callback's `on_train_begin`), and only when no checkpoint
    was restored from the training directory by `Checkpoints`: resuming a
    run beats warm-starting it, as with `Supervisor`'s `init_fn`. The
    optimizer's state and the global step are never restored.

    Checkpoint keys: a variable's key is `name_map(path)`, by default
    - its path, for a TF1 name-based checkpoint (TF-Slim,
      `tf.compat.v1.train.Saver`);
    - its path below the `model` object, for a TF2 checkpoint whose root
      has one (the checkpoints `Checkpoints` writes); else the full object
      path;
    - the dataset Keras saved for the variable's layer (found by layer
      name) in a `.weights.h5` / `.keras` file; a `name_map` must then
      give dataset paths (`layers/dense/vars/0`).
    `keras_slim.checkpoints.list_variables` shows the keys a checkpoint
    holds.

    Args:
        checkpoint: A directory (its latest checkpoint), a checkpoint
            prefix, or a Keras `.weights.h5` / `.keras` file; `None` when
            only `values` are assigned.
        include: Pattern or list of patterns (`re.match` on
            `variable.path`): restore only these variables.
            Defaults to `None`.
        exclude: Pattern or list of patterns: do not restore these
            (`--checkpoint_exclude_scopes`).
            Defaults to `None`.
        name_map: How a variable path becomes a checkpoint key: a dict
            {regex: replacement} applied in order with `re.sub`, or a
            callable path -> key.
            Defaults to `None`.
        values: A dict {variable path: array} assigned directly, after the
            checkpoint (slim's `assign_from_values`).
            Defaults to `None`.
        ignore_missing: Skip selected variables the checkpoint lacks,
            instead of failing (`--ignore_missing_vars`).
            Defaults to `False`.
        ignore_shape_mismatch: Skip variables whose shape differs from the
            checkpoint's, instead of failing.
            Defaults to `False`.

    Attributes:
        report: After the warm start, a dict of lists of variable paths:
            `restored` (from the checkpoint or `values`), `missing` and
            `mismatched` (skipped); `None` before.
        resumed_from: The checkpoint `Checkpoints` resumed from, when that
            made the warm start step aside.

    Raises:
        ValueError: for an argument of the wrong type or an invalid
            pattern; before the first step, for selected variables missing
            from the checkpoint or of another shape (unless ignored), or a
            `values` path the model lacks.
        FileNotFoundError: at train begin, if `checkpoint` does not exist.
        ValueError: at train begin, or at the read before the first step,
            for a `checkpoint` that is not one, or a truncated or damaged
            one, naming it.
        RuntimeError: off Keras's TensorFlow backend (`KERAS_BACKEND=jax`),
            naming what to use there instead.

    Example:
    ```python
    warm = keras_slim.callbacks.WarmStart(
        "/tmp/pretrain",
        exclude="logits/",
        name_map={r"(.*)/kernel": r"\\1/weights", r"(.*)/bias": r"\\1/biases"},
    )
    model.fit(dataset, epochs=1, callbacks=[warm])
    print(warm.report["restored"])
    ```
    """

    def __init__(
        self,
        checkpoint,
        *,
        include=None,
        exclude=None,
        name_map=None,
        values=None,
        ignore_missing=False,
        ignore_shape_mismatch=False,
    ):
        _backend.require_tensorflow(
            "keras_slim.callbacks.WarmStart",
            "keras_slim.checkpoints.assign_from_checkpoint (a Keras weights "
            "file) or model.load_weights(..., skip_mismatch=True)",
        )
        super().__init__(
            checkpoint,
            include=include,
            exclude=exclude,
            name_map=name_map,
            values=values,
            ignore_missing=ignore_missing,
            ignore_shape_mismatch=ignore_shape_mismatch,
        )

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        self._check_checkpoint()

    def on_train_batch_begin(self, batch, logs=None):
        if not self._done:
            self._first_step(self.model, self._run.resumed_from)

    def apply(self, model):
        """Warm-starts `model` now (what the callback does at the first step).

        Args:
            model: A built Keras model.

        Returns:
            The report (also kept in `self.report`).

        Raises:
            ValueError: as the class says (a checkpoint that cannot be
                read too); nothing is assigned then.
            FileNotFoundError: if the checkpoint does not exist.
        """
        return self._warm_start(model)
