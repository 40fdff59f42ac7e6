"""`WarmStart`: initialise a model from another checkpoint before training."""

import logging
import re

from keras_slim import _backend
from keras_slim import _checkpoint_readers
from keras_slim import _keras
from keras_slim import _variable_maps
from keras_slim import checkpoints as checkpoints_lib
from keras_slim import checks
from keras_slim.callbacks._run_callback import RunCallback
from keras_slim.gradients import variable_path

logger = logging.getLogger("keras_slim")


def _name_map(value):
    """A callable path -> key from `None`, a dict of regexes, or a callable."""
    if value is None or callable(value):
        return value
    if not isinstance(value, dict):
        raise checks.invalid(
            "name_map",
            value,
            "a dict {regex: replacement}, a callable path -> key, or None",
        )
    rules = []
    for pattern, replacement in value.items():
        if not isinstance(pattern, str) or not isinstance(replacement, str):
            raise checks.invalid(
                "name_map", value, "a dict of str regex -> str replacement"
            )
        try:
            rules.append((re.compile(pattern), replacement))
        except re.error as error:
            raise ValueError(
                f"Invalid regular expression in `name_map`: {pattern!r} "
                f"({error})."
            ) from None

    def apply(path):
        for pattern, replacement in rules:
            path = pattern.sub(replacement, path)
        return path

    return apply


def _layers(model):
    # Every layer, nested ones included, as Keras's saving walks them.
    return _keras.flatten_layers(model)


class WarmStart(RunCallback):
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
        super().__init__()
        if checkpoint is None and values is None:
            raise checks.invalid(
                "checkpoint", checkpoint, "a checkpoint path (or `values`)"
            )
        self.checkpoint = (
            None
            if checkpoint is None
            else checks.path("checkpoint", checkpoint)
        )
        # Checked now, used at the first step.
        _variable_maps.compile_patterns("include", include)
        _variable_maps.compile_patterns("exclude", exclude)
        self.include = include
        self.exclude = exclude
        self._name_map = _name_map(name_map)
        if values is not None and not isinstance(values, dict):
            raise checks.invalid(
                "values", values, "a dict {variable path: array} or None"
            )
        self.values = values
        self.ignore_missing = checks.boolean("ignore_missing", ignore_missing)
        self.ignore_shape_mismatch = checks.boolean(
            "ignore_shape_mismatch", ignore_shape_mismatch
        )
        self.report = None
        self.resumed_from = None
        self._done = False

    def on_train_begin(self, logs=None):
        super().on_train_begin(logs)
        if not self._done and self.checkpoint is not None:
            # The path is checked before any step, also when a resume will
            # make the warm start step aside.
            _checkpoint_readers.resolve(self.checkpoint).close()

    def on_train_batch_begin(self, batch, logs=None):
        if self._done:
            return
        self._done = True
        resumed = self._run.resumed_from
        if resumed is not None:
            self.resumed_from = resumed
            self.report = {"restored": [], "missing": [], "mismatched": []}
            logger.info(
                "Warm start skipped: training resumed from %s.", resumed
            )
            return
        self.apply(self.model)

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
        report = {"restored": [], "missing": [], "mismatched": []}
        arrays = {}
        if self.values is not None:
            arrays, variables = _variable_maps.checked_values(
                model, self.values
            )
        if self.checkpoint is not None:
            report = self._from_checkpoint(model)
        for path, array in arrays.items():
            _variable_maps.assign(variables[path], array)
        report["restored"] = sorted(set(report["restored"]) | set(arrays))
        self.report = report
        return report

    def _var_map(self, model, reader):
        variables = checkpoints_lib.variables_to_restore(
            model, include=self.include, exclude=self.exclude
        )
        if self._name_map is not None:
            return {self._name_map(variable_path(v)): v for v in variables}
        keys = reader.default_keys(variables, _layers(model))
        # A variable with no default key (a Keras file without its layer)
        # is reported missing under its path.
        return {
            keys.get(variable_path(v), variable_path(v)): v for v in variables
        }

    def _from_checkpoint(self, model):
        reader = _checkpoint_readers.resolve(self.checkpoint)
        try:
            var_map = self._var_map(model, reader)
            found, missing, mismatched = _variable_maps.split(var_map, reader)
            self._check(reader, var_map, missing, mismatched)
            values = {
                key: reader.read(name) for key, (name, _) in found.items()
            }
        finally:
            reader.close()
        for key, (_, variable) in found.items():
            _variable_maps.assign(variable, values[key])
        report = {
            "restored": sorted(variable_path(v) for _, v in found.values()),
            "missing": sorted(variable_path(var_map[k]) for k in missing),
            "mismatched": sorted(variable_path(var_map[k]) for k in mismatched),
        }
        self._log(reader, report, var_map, missing, mismatched)
        return report

    def _check(self, reader, var_map, missing, mismatched):
        if missing and not self.ignore_missing:
            lines = "\n".join(
                f"  {variable_path(var_map[k])} (key {k!r})" for k in missing
            )
            raise ValueError(
                f"{len(missing)} variables to warm-start are not in the "
                f"{reader.format} {reader.path!r}:\n{lines}\nIt holds: "
                f"{_variable_maps.some(reader.entries)}. Pass "
                "`ignore_missing=True` to skip them, or `exclude` or "
                "`name_map` to select or rename them."
            )
        if mismatched and not self.ignore_shape_mismatch:
            raise ValueError(
                f"Shapes differ between the {reader.format} "
                f"{reader.path!r} and the model:\n"
                + _variable_maps.mismatch_lines(mismatched, var_map, reader)
                + "\nPass `ignore_shape_mismatch=True` to skip them, or "
                "`exclude` them."
            )

    def _log(self, reader, report, var_map, missing, mismatched):
        logger.info(
            "Warm start from %s (%s): %d restored, %d missing, %d mismatched.",
            reader.path,
            reader.format,
            len(report["restored"]),
            len(report["missing"]),
            len(report["mismatched"]),
        )
        for status, keys in (("missing", missing), ("mismatched", mismatched)):
            for key in keys:
                logger.info(
                    "  %-10s %s (key %r)",
                    status,
                    variable_path(var_map[key]),
                    key,
                )
