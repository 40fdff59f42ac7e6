"""TF-Slim's gradient functions on lists of `(gradient, variable)` pairs."""

import re
import sys

import keras
import numpy as np
from keras import ops

__all__ = [
    "squared_norms",
    "squared_global_norm",
    "clip_by_global_norm",
    "clip_gradient_norms",
    "freeze_gradients_matching_regex",
    "multiply_and_clip",
    "multiply_gradients",
    "multiply_gradients_matching_regex",
    "variable_path",
]


def variable_path(variable):
    """Returns the path that names `variable` in keras_slim's patterns.

    Args:
        variable: A `keras.Variable` or a `tf.Variable`.

    Returns:
        `variable.path` for a Keras variable; for a `tf.Variable`, its name
        without the `:0` output suffix (TF-Slim's `var.op.name`).

    Example:
    ```python
    layer = keras.layers.Dense(2, name="fc1")
    layer.build((None, 3))
    variable_path(layer.kernel)  # "fc1/kernel"
    ```
    """
    path = getattr(variable, "path", None)
    if isinstance(path, str):
        return path
    name = variable.name
    return name[:-2] if name.endswith(":0") else name


def _tensorflow():
    """TensorFlow if this process has imported it, else `None`: sparse
    gradients (`tf.IndexedSlices`) and `tf.Variable`s exist only then, and
    the JAX backend never imports it."""
    return sys.modules.get("tensorflow")


def _is_sparse(grad):
    tf = _tensorflow()
    return tf is not None and isinstance(grad, tf.IndexedSlices)


def _scale(grad, multiplier):
    if _is_sparse(grad):
        values = grad.values * ops.cast(multiplier, grad.values.dtype)
        return type(grad)(values, grad.indices, grad.dense_shape)
    return grad * ops.cast(multiplier, grad.dtype)


def _values(grad):
    return grad.values if _is_sparse(grad) else grad


def _is_one(multiplier):
    return isinstance(multiplier, (int, float)) and multiplier == 1.0


def squared_norms(grads):
    """The squared L2 norm of each gradient, as one float32 vector.

    On TensorFlow one `l2_loss` per gradient (`sum(v ** 2) / 2` in one
    kernel; the values of an `IndexedSlices`), and one `stack`; on other
    backends `keras.ops`' sum of squares per gradient. On XLA's CPU
    backend (Keras on JAX without an accelerator), where each of those
    sums is two or three kernels (XLA:CPU splits a reduction of more than
    32 elements in two and fuses the squares into neither), the same sums
    are taken over all the gradients at once (`_squared_norms_by_blocks`,
    three kernels in all), unless a layout map shards the variables. The
    clip stage and the numeric check of a step share one such vector.

    Args:
        grads: List of gradients (tensors or `IndexedSlices`), no `None`.

    Returns:
        A float32 vector, one entry per gradient.

    Example:
    ```python
    squared_norms([tf.constant([3.0, 4.0])])  # [25.0]
    ```
    """
    if keras.backend.backend() == "tensorflow":  # one multiply, as before
        tf = _tensorflow()
        return 2.0 * tf.stack(
            [tf.nn.l2_loss(tf.cast(_values(g), tf.float32)) for g in grads]
        )
    if _on_xla_cpu():
        return _squared_norms_by_blocks(grads)
    return ops.stack(
        [ops.sum(ops.square(ops.cast(_values(g), "float32"))) for g in grads]
    )


def _on_xla_cpu():
    """Whether Keras runs on JAX, JAX on its CPU backend, and no layout
    map shards the variables (under `ModelParallel` one array of every
    gradient would gather each gradient's shards on every device)."""
    if keras.backend.backend() != "jax":
        return False
    import jax

    distribution = keras.distribution.distribution()
    sharded = distribution is not None and not isinstance(
        distribution, keras.distribution.DataParallel
    )
    return jax.default_backend() == "cpu" and not sharded


def _squared_norms_by_blocks(grads):
    """`squared_norms` in one pass over all the gradients: each is cut
    into blocks of `_BLOCK` elements (its last one padded with zeros),
    all of them in one array; one partial sum of squares per block, then
    each gradient's partials summed (`ops.segment_sum`)."""
    parts, owners = [], []
    for i, grad in enumerate(grads):
        flat = ops.reshape(ops.cast(_values(grad), "float32"), (-1,))
        blocks = -(-flat.shape[0] // _BLOCK)
        padding = blocks * _BLOCK - flat.shape[0]
        parts.append(ops.pad(flat, [(0, padding)]) if padding else flat)
        owners += [i] * blocks
    rows = ops.reshape(ops.concatenate(parts), (-1, _BLOCK))
    partials = ops.sum(ops.square(rows), axis=1)
    return ops.segment_sum(
        partials,
        np.asarray(owners, np.int32),
        num_segments=len(grads),
        sorted=True,
    )


# The elements of one partial sum of `_squared_norms_by_blocks`: the
# longest reduction XLA:CPU makes one kernel of, the squares fused in.
_BLOCK = 32


def squared_global_norm(grads):
    """The squared L2 norm of all the gradients together, as one scalar.

    `ops.sum(squared_norms(grads))` up to rounding, computed as one
    reduction over the gradients concatenated, without the per-gradient
    sums: for the numeric check when no clip needs them.

    Args:
        grads: List of gradients (tensors or `IndexedSlices`), no `None`.

    Returns:
        A float32 scalar.

    Example:
    ```python
    squared_global_norm([ops.array([3.0]), ops.array([4.0])])  # 25.0
    ```
    """
    flat = [ops.reshape(ops.cast(_values(g), "float32"), (-1,)) for g in grads]
    return ops.sum(ops.square(ops.concatenate(flat)))


def _factors(
    values, multipliers, clip_norm, clip_global_norm, scale, squares=None
):
    """One scalar factor (or `None` for 1) per gradient: multiply, clip."""
    threshold = clip_norm if clip_norm is not None else clip_global_norm
    if threshold is None or not values:
        return [None if _is_one(m) else m for m in multipliers]
    threshold = ops.cast(threshold, "float32")
    if scale is not None:
        threshold = threshold * ops.cast(scale, "float32")
    if all(isinstance(m, (int, float)) for m in multipliers):
        # One constant, not N.
        m = ops.convert_to_tensor(np.asarray(multipliers, np.float32))
    else:
        m = ops.stack([ops.cast(m, "float32") for m in multipliers])
    if squares is None:
        squares = squared_norms(values)
    if clip_norm is not None:
        norms = ops.sqrt(squares) * ops.abs(m)
    else:
        norms = ops.sqrt(ops.sum(squares * ops.square(m)))
    factors = m * threshold / ops.maximum(norms, threshold)
    return ops.unstack(factors, num=len(values))


def multiply_and_clip(
    grads_and_vars,
    multipliers=None,
    *,
    clip_norm=None,
    clip_global_norm=None,
    scale=None,
    squares=None,
):
    """Multiplies gradients, then clips them, in one pass.

    The result equals `clip_gradient_norms(multiply_gradients(pairs,
    multipliers), clip_norm)` (or `clip_by_global_norm` with
    `clip_global_norm`) up to rounding: each gradient is scaled once, by
    its multiplier times its clip factor. A multiplier of `0.0` zeroes the
    gradient; a negative one flips it (its norm counts as positive).

    Args:
        grads_and_vars: List of `(gradient, variable)` pairs. `None`
            gradients pass through unchanged.
        multipliers: Dict mapping a variable path (or a `tf.Variable`'s
            `ref()`) to a float or scalar tensor; variables not in it keep
            a multiplier of 1. Defaults to `None` (no multiplication).
        clip_norm: Positive float or scalar tensor: clip each gradient to
            this L2 norm (`tf.clip_by_norm`'s semantics). Defaults to
            `None`.
        clip_global_norm: Positive float or scalar tensor: scale all the
            gradients so their global norm is at most this
            (`tf.clip_by_global_norm`'s semantics). Defaults to `None`.
        scale: Optional loss-scale factor the gradients still carry; the
            thresholds are scaled by it, which gives the same update as
            clipping the unscaled gradients. Defaults to `None`.
        squares: Optional `squared_norms` of the gradients that are not
            `None`, in order, already computed (by the step's numeric
            check), so the clip does not compute them again. Defaults to
            `None`.

    Returns:
        A new list of `(gradient, variable)` pairs.

    Raises:
        ValueError: if both `clip_norm` and `clip_global_norm` are given.

    Example:
    ```python
    pairs = multiply_and_clip(pairs, {"logits/kernel": 10.0}, clip_norm=1.0)
    ```
    """
    if clip_norm is not None and clip_global_norm is not None:
        raise ValueError(
            "Only one of `clip_norm` and `clip_global_norm` can be set. "
            f"Received: clip_norm={clip_norm}, "
            f"clip_global_norm={clip_global_norm}."
        )
    pairs = list(grads_and_vars)
    present = [i for i, (g, _) in enumerate(pairs) if g is not None]
    multipliers = multipliers or {}
    chosen = []
    for i in present:
        found, multiplier = _lookup(multipliers, pairs[i][1])
        chosen.append(multiplier if found else 1.0)
    factors = _factors(
        [_values(pairs[i][0]) for i in present],
        chosen,
        clip_norm,
        clip_global_norm,
        scale,
        squares,
    )
    for i, factor in zip(present, factors):
        if factor is not None:
            pairs[i] = (_scale(pairs[i][0], factor), pairs[i][1])
    return pairs


def clip_gradient_norms(grads_and_vars, max_norm):
    """Clips each gradient to a maximum L2 norm (TF-Slim's function).

    For an `IndexedSlices` gradient the norm is that of its values, as in
    TF-Slim and `tf.clip_by_norm`; the result keeps the same indices.

    Args:
        grads_and_vars: List of `(gradient, variable)` pairs. `None` gradients
            pass through unchanged.
        max_norm: Positive float or scalar tensor, the largest norm allowed.

    Returns:
        A new list of `(gradient, variable)` pairs.

    Example:
    ```python
    clipped = clip_gradient_norms([(tf.constant([3.0, 4.0]), v)], 1.0)
    # the gradient becomes [0.6, 0.8]
    ```
    """
    return multiply_and_clip(grads_and_vars, clip_norm=max_norm)


def clip_by_global_norm(grads_and_vars, clip_norm):
    """Scales all gradients so that their global L2 norm is at most `clip_norm`.

    The global norm is `sqrt(sum(norm(g) ** 2))` over every non-`None`
    gradient (`tf.clip_by_global_norm`); `IndexedSlices` stay sparse.

    Args:
        grads_and_vars: List of `(gradient, variable)` pairs.
        clip_norm: Positive float or scalar tensor.

    Returns:
        A new list of `(gradient, variable)` pairs.

    Example:
    ```python
    pairs = clip_by_global_norm([(tf.constant([3.0]), a),
                                 (tf.constant([4.0]), b)], 1.0)
    # gradients become [0.6] and [0.8]: the global norm was 5
    ```
    """
    return multiply_and_clip(grads_and_vars, clip_global_norm=clip_norm)


def _lookup(gradient_multipliers, var):
    path = variable_path(var)
    if path in gradient_multipliers:
        return True, gradient_multipliers[path]
    tf = _tensorflow()
    if tf is not None and isinstance(var, tf.Variable):
        ref = var.ref()
        if ref in gradient_multipliers:
            return True, gradient_multipliers[ref]
    return False, None


def multiply_gradients(grads_and_vars, gradient_multipliers):
    """Multiplies the gradients of chosen variables (TF-Slim's function).

    Args:
        grads_and_vars: List of `(gradient, variable)` pairs.
        gradient_multipliers: Non-empty dict mapping a variable path (a
            `tf.Variable` may also be keyed by `variable.ref()`) to a float or
            a scalar tensor.

    Returns:
        A new list of `(gradient, variable)` pairs; the gradients of
        variables without a multiplier are unchanged.

    Raises:
        ValueError: as TF-Slim does: `grads_and_vars` is not a list,
            `gradient_multipliers` is empty or not a dict, or a multiplier is
            given for a variable whose gradient is `None`.

    Example:
    ```python
    pairs = multiply_gradients(pairs, {"fc1/kernel": 0.1, "fc2/bias": 2.0})
    ```
    """
    if not isinstance(grads_and_vars, list):
        raise ValueError(
            "`grads_and_vars` must be a list. "
            f"Received: {type(grads_and_vars).__name__}"
        )
    if not gradient_multipliers:
        raise ValueError("`gradient_multipliers` is empty.")
    if not isinstance(gradient_multipliers, dict):
        raise ValueError(
            "`gradient_multipliers` must be a dict. "
            f"Received: {type(gradient_multipliers).__name__}"
        )
    for grad, var in grads_and_vars:
        found, _ = _lookup(gradient_multipliers, var)
        if found and grad is None:
            raise ValueError(
                "Requested multiple of `None` gradient for variable "
                f"'{variable_path(var)}'."
            )
    return multiply_and_clip(grads_and_vars, gradient_multipliers)


def _matching(grads_and_vars, regex_list):
    patterns = [re.compile(p) for p in regex_list if p]
    return [
        any(p.match(variable_path(var)) for p in patterns)
        for _, var in grads_and_vars
    ]


def multiply_gradients_matching_regex(grads_and_vars, regex_list, multiplier):
    """Multiplies the gradients of variables whose path matches a regex.

    object_detection's `variables_helper` function: a pattern matches with
    `re.match` against the variable path.

    Args:
        grads_and_vars: List of `(gradient, variable)` pairs.
        regex_list: List of patterns.
        multiplier: Float, the multiplier for every matching variable.

    Returns:
        A new list of `(gradient, variable)` pairs.

    Raises:
        ValueError: when no variable matches (TF-Slim's "`gradient_multipliers`
            is empty"), or a matching variable has a `None` gradient.

    Example:
    ```python
    pairs = multiply_gradients_matching_regex(pairs, [r".*/bias"], 2.0)
    ```
    """
    matches = _matching(grads_and_vars, regex_list)
    multipliers = {
        variable_path(var): float(multiplier)
        for (_, var), hit in zip(grads_and_vars, matches)
        if hit
    }
    return multiply_gradients(list(grads_and_vars), multipliers)


def freeze_gradients_matching_regex(grads_and_vars, regex_list):
    """Drops the pairs whose variable path matches a regex.

    object_detection's `variables_helper` function: the matching variables
    get no update at all, because the optimizer never sees them.

    Args:
        grads_and_vars: List of `(gradient, variable)` pairs.
        regex_list: List of patterns (`re.match` on the variable path).

    Returns:
        The pairs whose variable matches none of the patterns.

    Example:
    ```python
    pairs = freeze_gradients_matching_regex(pairs, [r"conv\\d/.*"])
    ```
    """
    matches = _matching(grads_and_vars, regex_list)
    return [pair for pair, hit in zip(grads_and_vars, matches) if not hit]
