"""Variables by path, and what the checkpoint functions share about them."""

import re

import numpy as np

from keras_slim import checks
from keras_slim.gradients import variable_path


def model_variables(model):
    """The model's variables keyed by path, in model order.

    Raises:
        ValueError: if two variables share a path.
    """
    by_path = {}
    for variable in model.variables:
        path = variable_path(variable)
        if path in by_path and by_path[path] is not variable:
            raise ValueError(
                f"Two variables of model {model.name!r} share the path "
                f"{path!r}, so a checkpoint cannot tell them apart. Give "
                "their layers distinct names."
            )
        by_path[path] = variable
    return by_path


def compile_patterns(name, value):
    """`None`, a pattern or a list of patterns, compiled."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else value
    try:
        items = list(items)
    except TypeError:
        raise checks.invalid(
            name, value, "a regular expression, a list of them, or None"
        ) from None
    compiled = []
    for item in items:
        if not isinstance(item, str):
            raise checks.invalid(
                name, value, "a regular expression, a list of them, or None"
            )
        try:
            compiled.append(re.compile(item))
        except re.error as error:
            raise ValueError(
                f"Invalid regular expression in `{name}`: {item!r} ({error})."
            ) from None
    return compiled


def is_seed_state(path):
    """Whether a path is a random seed generator's state (not a weight)."""
    return path.rsplit("/", 1)[-1] == "seed_generator_state"


def as_var_map(var_map):
    """A {key: variable} map; a list of variables is keyed by path."""
    if isinstance(var_map, dict):
        return dict(var_map)
    if isinstance(var_map, (list, tuple)):
        return {variable_path(v): v for v in var_map}
    raise checks.invalid(
        "var_map",
        type(var_map).__name__,
        "a dict {checkpoint key: variable} or a list of variables",
    )


def shape_of(variable):
    """A variable's shape as a tuple of ints."""
    return tuple(int(d) for d in variable.shape)


def split(var_map, reader):
    """(found {key: (name, variable)}, missing keys, mismatched keys)."""
    found, missing, mismatched = {}, [], []
    for key, variable in var_map.items():
        name = reader.lookup(key)
        if name is None:
            missing.append(key)
        elif reader.entries[name][0] != shape_of(variable):
            mismatched.append(key)
        else:
            found[key] = (name, variable)
    return found, missing, mismatched


def mismatch_lines(keys, var_map, reader):
    """One line per mismatched key: the checkpoint's shape and the
    variable's."""
    return "\n".join(
        f"  {key}: checkpoint {reader.entries[reader.lookup(key)][0]}, "
        f"variable {variable_path(var_map[key])} {shape_of(var_map[key])}"
        for key in keys
    )


def assign(variable, value):
    """Assigns an array to a variable, cast to its dtype."""
    variable.assign(np.asarray(value).astype(variable.dtype))


def some(names, limit=10):
    """At most `limit` names, sorted, for an error message."""
    names = sorted(names)
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def checked_values(model, values):
    """({path: array}, {path: variable}) once every path and shape is valid."""
    if not isinstance(values, dict):
        raise checks.invalid(
            "values", type(values).__name__, "a dict {variable path: array}"
        )
    variables = model_variables(model)
    unknown = sorted(set(values) - set(variables))
    if unknown:
        raise ValueError(
            f"The model {model.name!r} has no variables {unknown}. Its "
            f"variables are: {some(variables)}"
        )
    arrays = {path: np.asarray(value) for path, value in values.items()}
    for path, array in arrays.items():
        if array.shape != shape_of(variables[path]):
            raise ValueError(
                f"The value for {path!r} has shape {array.shape}; the "
                f"variable has shape {shape_of(variables[path])}."
            )
    return arrays, variables
