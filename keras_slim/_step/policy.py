"""The Policy stage, and the in-step Summaries that see its gradients."""


class Policy:
    """Select, multiply, clip: the resolved `PolicyPlan`.

    Args:
        plan: The `PolicyPlan`.
        scale: The loss-scale factor the gradients still carry (a
            `LossScaleOptimizer`'s scale, or `loss_scale_factor`), or
            `None`: the clip thresholds are scaled by it.

    Example:
    ```python
    stage = Policy(model_policy_plan, scale=None)
    ```
    """

    name = "policy"

    def __init__(self, plan, scale):
        self.plan = plan
        self.scale = scale

    def describe(self):
        """One line: what the policy does (its table is below the plan)."""
        plan = self.plan
        parts = [f"{_count(len(plan.variables), 'variable')} trained"]
        multiplied = sum(m is not None for m in plan.multipliers)
        if multiplied:
            parts.append(f"{_count(multiplied, 'gradient')} multiplied")
        if plan.clip_norm is not None:
            parts.append(f"each gradient's norm clipped to {plan.clip_norm:g}")
        if plan.clip_global_norm is not None:
            parts.append(f"global norm clipped to {plan.clip_global_norm:g}")
        return f"{self.name:<12}select, multiply, clip: {', '.join(parts)}"

    def update(self, step, then):
        """Runs the policy on the update's gradients, then the rest."""
        grads = self.plan.apply(
            step.grads, scale=self.scale, squares=step.squares
        )
        return then(step.replace(grads=grads))


class Summaries:
    """Gradient and activation summaries written from inside the step.

    Args:
        hook: The `StepSummaries` a `Summaries` callback declared.
        model: The model.
        variables: The policy's variables, one per gradient.
    """

    name = "summaries"

    def __init__(self, hook, model, variables):
        self.hook = hook
        self.model = model
        self.variables = variables

    def describe(self):
        """One line: what is written."""
        what = [
            name
            for name, on in (
                ("gradients", self.hook.gradients),
                ("activations", self.hook.activations),
            )
            if on
        ]
        return (
            f"{self.name:<12}write {' and '.join(what) or 'nothing'} "
            "on the steps the Summaries callback records"
        )

    def update(self, step, then):
        """Adds the summary ops, then runs the rest."""
        self.hook(
            self.model,
            step.x,
            step.grads,
            self.variables,
            step.activations,
        )
        return then(step)


def _count(n, noun):
    """`"1 gradient"`, `"2 gradients"`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
