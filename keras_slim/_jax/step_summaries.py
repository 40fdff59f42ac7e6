"""What `Summaries` writes from inside the JAX train step: the gradients
the optimizer is given and the layers' outputs of the step's own forward
pass, returned by a second compiled step that runs only on the calls
that write."""

import dataclasses

import keras

__all__ = ["SummaryPlan", "forward", "outputs", "plan_for"]


@dataclasses.dataclass(frozen=True)
class SummaryPlan:
    """What a summarizing step returns beside its usual outputs.

    Attributes:
        gradients: Whether it returns the gradients the optimizer is
            given (after the policy, unscaled).
        names: The names of the layers whose outputs it returns, in the
            order of `probe`'s second output.
        probe: The functional model giving the model's outputs and those
            layers' (`activation_probe`), or `None` for no activations.
    """

    gradients: bool
    names: tuple
    probe: object

    @property
    def key(self):
        """What tells one compiled summarizing step from another."""
        return (self.gradients, self.names)


def plan_for(model, gradients, activations):
    """The `SummaryPlan` of `Summaries(gradients=, activations=)`.

    Args:
        model: The functional `SlimModel` (when `activations`).
        gradients: Whether to return the gradients.
        activations: `True`, `False`, or a tuple of layer names.

    Returns:
        A `SummaryPlan`, or `None` when neither is asked for.

    Example:
    ```python
    plan = plan_for(model, gradients=True, activations=("fc1",))
    ```
    """
    if not (gradients or activations):
        return None
    if not activations:
        return SummaryPlan(gradients=bool(gradients), names=(), probe=None)
    # The probe is TensorFlow's too (no TensorFlow in it: Keras only).
    from keras_slim.callbacks._step_summaries import activation_probe

    only = activations if isinstance(activations, tuple) else None
    names, probe = activation_probe(model, only)
    return SummaryPlan(
        gradients=bool(gradients), names=tuple(names), probe=probe
    )


def forward(
    model, plan, trainable_variables, non_trainable_variables,
    metrics_variables, x, y, sample_weight, training=False,
    optimizer_variables=None,
):  # fmt: skip
    """Keras's `JAXTrainer.compute_loss_and_updates`, the forward pass
    through `plan.probe`: the same loss, gradient and updates (the probe
    shares the model's layers and variables), and the summarized layers'
    outputs of this very pass (no second forward pass).

    Args:
        model: The `SlimModel`.
        plan: Its `SummaryPlan`, with a probe.
        trainable_variables: The model's trainable values, in its order.
        non_trainable_variables: Its non-trainable values.
        metrics_variables: Its metrics' values.
        x: The batch's inputs.
        y: Its targets.
        sample_weight: Its sample weights, or `None`.
        training: The `training` argument of the layers' calls.
        optimizer_variables: The optimizer's values (its loss scale).

    Returns:
        `(loss, (unscaled loss, y_pred, non-trainable values, metrics
        values, layer outputs))`, for `jax.value_and_grad(has_aux=True)`.
    """
    probe = plan.probe
    trainable = _values(model.trainable_variables, trainable_variables)
    held = _values(model.non_trainable_variables, non_trainable_variables)
    (y_pred, activations), probe_held, losses = probe.stateless_call(
        [trainable[id(v)] for v in probe.trainable_variables],
        [held[id(v)] for v in probe.non_trainable_variables],
        x,
        return_losses=True,
        training=training,
    )
    held.update(_values(probe.non_trainable_variables, probe_held))
    non_trainable_variables = [
        held[id(v)] for v in model.non_trainable_variables
    ]
    # As Keras's: the forward pass's losses (activity regularizers) reach
    # `compute_loss` through the model's override list.
    if losses:
        model._losses_override.clear()
        model._losses_override = losses
    loss, variables = model.stateless_compute_loss(
        trainable_variables,
        non_trainable_variables,
        metrics_variables,
        x=x,
        y=y,
        y_pred=y_pred,
        sample_weight=sample_weight,
        training=training,
    )
    if losses:
        model._losses_override.clear()
    _, non_trainable_variables, metrics_variables = variables
    unscaled = loss
    if training and model.optimizer is not None:
        mapping = list(zip(model.optimizer.variables, optimizer_variables))
        with keras.StatelessScope(state_mapping=mapping):
            loss = model.optimizer.scale_loss(loss)
    return loss, (
        unscaled,
        y_pred,
        non_trainable_variables,
        metrics_variables,
        list(activations),
    )


def _values(variables, values):
    """`{id(variable): value}`."""
    return {id(v): value for v, value in zip(variables, values)}


def outputs(plan, gradients, activations):
    """What a summarizing step returns beside its usual outputs.

    Args:
        plan: The `SummaryPlan`.
        gradients: The gradients the optimizer was given, one per variable
            the policy trains.
        activations: `[layer outputs]` from `forward`, or `[]`.

    Returns:
        `{"gradients": [...], "activations": [...]}`, empty lists where
        not asked for.
    """
    return {
        "gradients": list(gradients) if plan.gradients else [],
        "activations": list(activations[0]) if activations else [],
    }
