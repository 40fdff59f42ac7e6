"""`GradientPolicy`: what happens to gradients between backprop and update."""

import dataclasses
import logging
import math
import numbers
import re

import keras

from keras_slim import gradients as gradients_lib
from keras_slim.checks import invalid

__all__ = ["GradientPolicy", "PolicyPlan"]

logger = logging.getLogger("keras_slim")


def _check_pattern(name, pattern):
    if not isinstance(pattern, str):
        raise invalid(name, pattern, "a regular expression string")
    try:
        re.compile(pattern)
    except re.error as e:
        raise ValueError(
            f"Invalid value for argument `{name}`: {pattern!r} is not a valid "
            f"regular expression ({e})."
        ) from None
    return pattern


def _ignore_empty(name):
    logger.warning(
        "GradientPolicy ignores the empty pattern in `%s`, as TF-Slim's "
        "regex functions do (it would match every variable).",
        name,
    )


def _check_patterns(name, value):
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)):
        raise invalid(name, value, "a list of regular expression strings")
    patterns = tuple(_check_pattern(name, p) for p in value)
    if "" in patterns:
        _ignore_empty(name)
    return tuple(p for p in patterns if p)


def _is_number(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _check_multipliers(value, name="multipliers", positive=False):
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise invalid(name, value, "a dict mapping patterns to numbers")
    kind = "positive" if positive else "finite"
    checked = {}
    for pattern, multiplier in value.items():
        _check_pattern(name, pattern)
        if (
            not _is_number(multiplier)
            or not math.isfinite(multiplier)
            or (positive and multiplier <= 0)
        ):
            raise ValueError(
                f"Invalid value for argument `{name}`: the multiplier "
                f"for {pattern!r} must be a {kind} number. Received: "
                f"{multiplier!r}."
            )
        if pattern == "":
            _ignore_empty(name)
            continue
        checked[pattern] = float(multiplier)
    return checked


def _check_layer_decay(value, layer_groups):
    if value is None:
        if layer_groups is not None:
            raise ValueError(
                "`layer_groups` orders the layers for `layer_decay`, which "
                f"is not set. Received: layer_groups={layer_groups!r}, "
                "layer_decay=None."
            )
        return None
    if not _is_number(value) or not math.isfinite(value):
        raise invalid("layer_decay", value, "a number in (0, 1] or None")
    if not 0 < value <= 1:
        raise invalid("layer_decay", value, "a number in (0, 1] or None")
    return float(value)


def _check_clip(name, value):
    if value is None:
        return None
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise invalid(name, value, "a positive number or None")
    return float(value)


def _or_none(multipliers):
    """`None` for a tuple of nothing but `None`s."""
    return multipliers if any(m is not None for m in multipliers) else None


@dataclasses.dataclass(frozen=True)
class PolicyPlan:
    """A `GradientPolicy` resolved against one model's variables.

    Made by `GradientPolicy.resolve(model)`; `SlimModel` makes one each time
    it builds its train function, so patterns are matched once, not on every
    step.

    Attributes:
        variables: The variables to train, in model order.
        multipliers: One float or `None` (no multiplication) per variable.
        clip_norm: Per-tensor clip threshold, or `None`.
        clip_global_norm: Global-norm clip threshold, or `None`.
        check_numerics: Whether a non-finite loss or gradient skips the
            step.
        lr_multipliers: One float or `None` (the optimizer's learning
            rate) per variable, or `None` when no variable has one: the
            optimizer then runs untouched.
    """

    variables: tuple
    multipliers: tuple
    clip_norm: float = None
    clip_global_norm: float = None
    check_numerics: bool = True
    lr_multipliers: tuple = None

    def apply(self, grads, scale=None, squares=None):
        """Runs the `multiply` and `clip` stages on summed gradients.

        `keras_slim.gradients.multiply_and_clip`: both stages fold into one
        scalar factor per gradient, computed for all gradients at once.

        Args:
            grads: One gradient (tensor, `IndexedSlices` or `None`) per
                variable of `self.variables`.
            scale: Optional loss-scale factor the gradients still carry; the
                clip thresholds are scaled by it, which gives the same update
                as clipping the unscaled gradients.
            squares: Optional `gradients.squared_norms` of the gradients
                that are not `None`, already computed for the numeric check.

        Returns:
            The list of transformed gradients.
        """
        multipliers = {
            gradients_lib.variable_path(v): m
            for v, m in zip(self.variables, self.multipliers)
            if m is not None
        }
        pairs = gradients_lib.multiply_and_clip(
            list(zip(grads, self.variables)),
            multipliers,
            clip_norm=self.clip_norm,
            clip_global_norm=self.clip_global_norm,
            scale=scale,
            squares=squares,
        )
        return [grad for grad, _ in pairs]


@keras.saving.register_keras_serializable(package="keras_slim")
class GradientPolicy:
    """Per-variable gradient control, applied after the cross-replica sum.

    Args:
        multipliers: Dict mapping a pattern to a number. Each trainable
            variable whose path the pattern `re.match`es has its gradient
            multiplied; when several patterns match, their multipliers
            multiply (TF-Slim's `gradient_multipliers`).
            Defaults to `None`.
        freeze: List of patterns (an empty one is ignored, as in
            TF-Slim). Matching variables are not updated at all:
            no gradient, no weight decay, no momentum; they stay bitwise
            unchanged (object_detection's `freeze_gradients_matching_regex`).
            Defaults to `None`.
        trainable: List of patterns. When given, only matching variables
            train (TF-Slim's `variables_to_train`, `--trainable_scopes`).
            Defaults to `None`.
        clip_norm: Positive number. Clips each gradient to this L2 norm
            (TF-Slim's `clip_gradient_norm`); `IndexedSlices` stay sparse.
            Defaults to `None`.
        clip_global_norm: Positive number. Clips all gradients together by
            their global norm. Only one of `clip_norm` and `clip_global_norm`
            can be set.
            Defaults to `None`.
        check_numerics: Boolean. If `True` (the default), a step whose loss
            or global gradient norm (of the summed gradients) is not finite
            changes no variable and training stops with
            `keras_slim.NanLossDuringTrainingError` (with
            `NanLossGuard(fail=False)`, the step is skipped and training
            goes on).
            Defaults to `True`.
        lr_multipliers: Dict mapping a pattern to a positive number. Each
            matching variable is updated as the optimizer would update it
            at its learning rate (a schedule's value at this step) times
            the multiplier: momentum, Adam's and RMSProp's running
            averages and AdamW's decoupled weight decay included, which a
            gradient multiplier is not under an adaptive optimizer
            (Adam divides it out). Several matching patterns multiply.
            Defaults to `None`.
        layer_decay: Number in (0, 1]: layer-wise learning-rate decay, as
            timm's `param_groups_layer_decay`. The variables at depth `d`
            get a learning-rate multiplier `layer_decay ** (d_max - d)`:
            the deepest (the head) trains at the full rate, each layer
            below it `layer_decay` times slower. Depth is the position,
            from the input, of the variable's layer among the model's
            top-level layers that have trainable variables (`model.layers`
            order), or, with `layer_groups`, of the first pattern that
            matches it. `d_max` is the largest depth of a trainable
            variable. It multiplies with `lr_multipliers`.
            Defaults to `None`.
        layer_groups: List of patterns in depth order, input first, for
            `layer_decay` (for a nested backbone, say): a variable's depth
            is the index of the first pattern that matches its path; a
            variable no pattern matches is at the top (depth
            `len(layer_groups)`, as timm puts the head). Defaults to
            `None` (one depth per top-level layer).

    Raises:
        ValueError: if `multipliers` is not a dict of patterns to finite
            numbers, `lr_multipliers` not a dict of patterns to positive
            numbers, a pattern is not a valid regular expression, a clip
            threshold is not a positive number, both clip thresholds are
            set, `check_numerics` is not a boolean, `layer_decay` is not
            in (0, 1], or `layer_groups` is set without `layer_decay`.

    Example:
    ```python
    policy = keras_slim.GradientPolicy(
        multipliers={r".*/bias": 2.0, "logits/.*": 10.0},
        freeze=["conv1/.*"],
        clip_norm=1.0,
        lr_multipliers={"conv2/.*": 0.1},
    )
    model = keras_slim.SlimModel(inputs, outputs, gradient_policy=policy)
    print(policy.describe(model))
    ```
    """

    def __init__(
        self,
        multipliers=None,
        freeze=None,
        *,
        trainable=None,
        clip_norm=None,
        clip_global_norm=None,
        check_numerics=True,
        lr_multipliers=None,
        layer_decay=None,
        layer_groups=None,
    ):
        self.multipliers = _check_multipliers(multipliers)
        self.lr_multipliers = _check_multipliers(
            lr_multipliers, "lr_multipliers", positive=True
        )
        self.layer_decay = _check_layer_decay(layer_decay, layer_groups)
        self.layer_groups = _check_patterns("layer_groups", layer_groups)
        self.freeze = _check_patterns("freeze", freeze) or ()
        self.trainable = _check_patterns("trainable", trainable)
        self.clip_norm = _check_clip("clip_norm", clip_norm)
        self.clip_global_norm = _check_clip(
            "clip_global_norm", clip_global_norm
        )
        if self.clip_norm is not None and self.clip_global_norm is not None:
            raise ValueError(
                "Only one of `clip_norm` and `clip_global_norm` can be set. "
                f"Received: clip_norm={clip_norm}, "
                f"clip_global_norm={clip_global_norm}."
            )
        if not isinstance(check_numerics, bool):
            raise invalid("check_numerics", check_numerics, "True or False")
        self.check_numerics = check_numerics

    def get_config(self):
        """Returns the policy's arguments as a JSON-serializable dict."""
        return {
            "multipliers": dict(self.multipliers),
            "freeze": list(self.freeze),
            "trainable": (
                None if self.trainable is None else list(self.trainable)
            ),
            "clip_norm": self.clip_norm,
            "clip_global_norm": self.clip_global_norm,
            "check_numerics": self.check_numerics,
            "lr_multipliers": dict(self.lr_multipliers),
            "layer_decay": self.layer_decay,
            "layer_groups": (
                None if self.layer_groups is None else list(self.layer_groups)
            ),
        }

    @classmethod
    def from_config(cls, config):
        """Creates a policy from `get_config()`'s output."""
        return cls(**config)

    def __eq__(self, other):
        if not isinstance(other, GradientPolicy):
            return NotImplemented
        return self.get_config() == other.get_config()

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())
        return f"GradientPolicy({args})"

    def resolve(self, model):
        """Matches the patterns against `model`'s trainable variables.

        Args:
            model: A built `keras.Model` (or anything with
                `trainable_variables`).

        Returns:
            A `PolicyPlan` for the variables that train.

        Raises:
            ValueError: if a pattern matches no trainable variable (the
                message names it and lists the variable paths), or the policy
                leaves no variable to train.
        """
        variables = list(model.trainable_variables)
        paths = [gradients_lib.variable_path(v) for v in variables]
        self._check_all_match(paths, model)
        scales = self._layer_scales(model, variables, paths)
        rows = [self._row(path, scale) for path, scale in zip(paths, scales)]
        kept = [i for i, row in enumerate(rows) if row["update"] == "train"]
        if not kept:
            raise ValueError(
                f"The gradient policy leaves no variable of model "
                f"'{getattr(model, 'name', model)}' to train: {self!r}. "
                f"Trainable variable paths: {paths}."
            )
        return PolicyPlan(
            variables=tuple(variables[i] for i in kept),
            multipliers=tuple(
                None if rows[i]["multiplier"] == 1.0 else rows[i]["multiplier"]
                for i in kept
            ),
            clip_norm=self.clip_norm,
            clip_global_norm=self.clip_global_norm,
            check_numerics=self.check_numerics,
            lr_multipliers=_or_none(
                tuple(
                    None if rows[i]["lr"] == 1.0 else rows[i]["lr"]
                    for i in kept
                )
            ),
        )

    def _check_all_match(self, paths, model):
        named = [("multipliers", p) for p in self.multipliers]
        named += [("freeze", p) for p in self.freeze]
        named += [("trainable", p) for p in self.trainable or ()]
        named += [("lr_multipliers", p) for p in self.lr_multipliers]
        named += [("layer_groups", p) for p in self.layer_groups or ()]
        for argument, pattern in named:
            if not any(re.match(pattern, path) for path in paths):
                raise ValueError(
                    f"The `{argument}` pattern {pattern!r} of the gradient "
                    "policy matches no trainable variable of model "
                    f"'{getattr(model, 'name', model)}'. Patterns are matched "
                    "with re.match against these variable paths: "
                    f"{paths}."
                )

    def _depths(self, model, variables, paths):
        """The depth of each variable for `layer_decay` (see Args)."""
        if self.layer_groups is not None:
            top = len(self.layer_groups)
            return [
                next(
                    (
                        depth
                        for depth, pattern in enumerate(self.layer_groups)
                        if re.match(pattern, path)
                    ),
                    top,
                )
                for path in paths
            ]
        owners = [
            layer
            for layer in getattr(model, "layers", ())
            if layer.trainable_variables
        ]
        by_id = {}
        for depth, layer in enumerate(owners):
            for variable in layer.trainable_variables:
                by_id.setdefault(id(variable), depth)
        return [by_id.get(id(v), len(owners)) for v in variables]

    def _layer_scales(self, model, variables, paths):
        """`layer_decay ** (d_max - d)` per variable, or ones."""
        if self.layer_decay is None or not variables:
            return [1.0] * len(variables)
        depths = self._depths(model, variables, paths)
        top = max(depths)
        return [self.layer_decay ** (top - depth) for depth in depths]

    def _row(self, path, layer_scale=1.0):
        """Returns what each stage does to the variable at `path`."""
        freezers = [p for p in self.freeze if re.match(p, path)]
        if freezers:
            update = f"frozen by {freezers[0]!r}"
        elif self.trainable is not None and not any(
            re.match(p, path) for p in self.trainable
        ):
            update = "not in `trainable`"
        else:
            update = "train"
        multiplier = 1.0
        for pattern, value in self.multipliers.items():
            if re.match(pattern, path):
                multiplier *= value
        lr = layer_scale
        for pattern, value in self.lr_multipliers.items():
            if re.match(pattern, path):
                lr *= value
        return {"update": update, "multiplier": multiplier, "lr": lr}

    def _clip_text(self):
        if self.clip_norm is not None:
            return f"norm <= {self.clip_norm:g}"
        if self.clip_global_norm is not None:
            return f"global norm <= {self.clip_global_norm:g}"
        return "-"

    def describe(self, model):
        """Returns a table of what the policy does to each variable of `model`.

        One row per variable of the model, with its shape and what each
        stage does: `select` (train, frozen, not in `trainable`, or not
        trainable in Keras), `multiply` (the effective gradient
        multiplier), `lr` (the effective learning-rate multiplier, from
        `lr_multipliers` and `layer_decay`) and `clip`.

        Args:
            model: A built `keras.Model`.

        Returns:
            The table, as a string.

        Raises:
            ValueError: if the model is not built, or a pattern matches no
                trainable variable.

        Example:
        ```python
        print(policy.describe(model))
        # variable     shape    select               multiply  lr   clip
        # fc1/kernel   (4, 8)   frozen by 'fc1/.*'   -         -    -
        # fc2/kernel   (8, 1)   train                2         0.1  norm <= 1
        ```
        """
        if not getattr(model, "built", True) or not model.variables:
            raise ValueError(
                f"Model '{model.name}' has no variables yet. Build it first "
                "(call it on data, or create it with a `keras.Input`)."
            )
        variables = list(model.trainable_variables)
        paths = [gradients_lib.variable_path(v) for v in variables]
        self._check_all_match(sorted(paths), model)
        scales = dict(zip(paths, self._layer_scales(model, variables, paths)))
        table = [("variable", "shape", "select", "multiply", "lr", "clip")]
        for variable in model.variables:
            path = gradients_lib.variable_path(variable)
            shape = str(tuple(variable.shape))
            if path not in scales:
                table.append((path, shape, "not trainable", "-", "-", "-"))
                continue
            row = self._row(path, scales[path])
            if row["update"] != "train":
                table.append((path, shape, row["update"], "-", "-", "-"))
                continue
            table.append(
                (
                    path,
                    shape,
                    "train",
                    f"{row['multiplier']:g}",
                    f"{row['lr']:g}",
                    self._clip_text(),
                )
            )
        widths = [max(len(r[i]) for r in table) for i in range(6)]
        lines = [
            "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()
            for r in table
        ]
        return "\n".join(lines)
