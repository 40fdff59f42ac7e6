"""What `WarmStart` does on either backend: its arguments checked, the
model's variables matched to checkpoint keys, the values read (as NumPy)
and assigned, and the report."""

import logging
import re

from keras_slim import _checkpoint_readers
from keras_slim import _keras
from keras_slim import _variable_maps
from keras_slim import checkpoints as checkpoints_lib
from keras_slim import checks
from keras_slim.gradients import variable_path

logger = logging.getLogger("keras_slim")


def compile_name_map(value):
    """A callable path -> key from `None`, a dict of regexes, or a callable.

    Args:
        value: `None`, a dict {regex: replacement} applied in order with
            `re.sub`, or a callable path -> key.

    Returns:
        `None` or a callable path -> key.

    Raises:
        ValueError: for another type, or a pattern that does not compile.
    """
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


def empty_report():
    """The report of a warm start that assigned nothing."""
    return {"restored": [], "missing": [], "mismatched": []}


def _layers(model):
    # Every layer, nested ones included, as Keras's saving walks them.
    return _keras.flatten_layers(model)


class WarmStartBase:
    """The backend-neutral part of `WarmStart`, a mixin put before the
    backend's `RunCallback`: the arguments, the warm start itself and its
    report. Each backend's class adds its hooks, which find the model and
    whether the run resumed, and calls `_check_checkpoint` at train begin
    and `_first_step` before the first step.

    Args: as `keras_slim.callbacks.WarmStart`.
    """

    def __init__(
        self,
        checkpoint,
        *,
        include,
        exclude,
        name_map,
        values,
        ignore_missing,
        ignore_shape_mismatch,
    ):
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
        self._name_map = compile_name_map(name_map)
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

    def _check_checkpoint(self):
        """Opens the checkpoint once at train begin, so that a bad path
        fails before any step, also when a resume makes the warm start
        step aside."""
        if not self._done and self.checkpoint is not None:
            _checkpoint_readers.resolve(self.checkpoint).close()

    def _first_step(self, model, resumed):
        """Steps aside for a run that resumed from `resumed` (a path, or
        `None`), else warm-starts `model`. Hooks call it while `_done` is
        false: once."""
        self._done = True
        if resumed is not None:
            self.resumed_from = resumed
            self.report = empty_report()
            logger.info(
                "Warm start skipped: training resumed from %s.", resumed
            )
            return
        self._warm_start(model)

    def _warm_start(self, model):
        """What `apply` does: the checkpoint, then `values`; the report."""
        report = empty_report()
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
