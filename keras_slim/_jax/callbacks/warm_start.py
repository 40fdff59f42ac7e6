"""`WarmStart` on JAX: initialise a model from another checkpoint before
the first step."""

from keras_slim._jax.callbacks._base import RunCallback
from keras_slim.callbacks import _warm_start


class WarmStart(_warm_start.WarmStartBase, RunCallback):
    """Initialises model variables from a checkpoint before the first step.

    `keras_slim.callbacks.WarmStart` on JAX, with its arguments, keys,
    report and errors (TF-Slim's `init_fn`, train_image_classifier's
    `--checkpoint_path`). It acts once, just before the first training
    step, and only when `Checkpoints` did not resume the run from the
    training directory: resuming a run beats warm-starting it. The
    optimizer's state and the global step are never restored.

    What it reads:
    - a Keras `.weights.h5` / `.keras` file, always (h5py; no
      TensorFlow);
    - a TF1 name-based checkpoint (TF-Slim, `tf.compat.v1.train.Saver`)
      or a TF2 object-based one (a TensorFlow run's `Checkpoints`), when
      TensorFlow is installed: it is imported then, to read the values
      as NumPy arrays, and nothing else of the run uses it.

    Args:
        checkpoint: A directory (its latest TF checkpoint), a checkpoint
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
            from the checkpoint or of another shape (unless ignored), a
            `values` path the model lacks, or a model that is not a
            `keras_slim.SlimModel`.
        FileNotFoundError: at train begin, if `checkpoint` does not exist.
        ValueError: at train begin, or at the read before the first step,
            for a `checkpoint` that is not one, or a truncated or damaged
            one, naming it.
        ImportError: at train begin, for a TF checkpoint when TensorFlow
            cannot be imported, saying that reading it needs TensorFlow.

    Example:
    ```python
    warm = keras_slim.callbacks.WarmStart(
        "/tmp/pretrain/model.weights.h5", exclude="logits/"
    )
    model.fit(x, y, epochs=1, callbacks=[warm])
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
        # Keras's JAX fit takes the first step's state from the variables
        # after this hook, so assigning them here is what the step sees;
        # by now every `on_train_begin` ran, `Checkpoints`' restore too.
        if not self._done:
            self._first_step(self._model, self.run.resumed_from)

    def apply(self, model):
        """Warm-starts `model` now (what the callback does at the first step).

        Args:
            model: A built Keras model whose variables hold their values
                (not inside a `fit`'s epoch).

        Returns:
            The report (also kept in `self.report`).

        Raises:
            ValueError: as the class says (a checkpoint that cannot be
                read too); nothing is assigned then.
            FileNotFoundError: if the checkpoint does not exist.
            ImportError: for a TF checkpoint without TensorFlow.
        """
        return self._warm_start(model)
