"""TF-Slim's flags as keyword arguments, each over TF-Slim's default."""


def with_defaults(given, defaults, function):
    """The flags `given`, over `defaults`.

    Args:
        given: The flags passed, by name.
        defaults: Every flag `function` reads, with TF-Slim's default.
        function: The name of the function, for the message.

    Returns:
        A dict of every flag of `defaults`: the given value, else the
        default.

    Raises:
        TypeError: for a name of `given` not in `defaults`, listing the
            valid names.

    Example:
    ```python
    f = with_defaults({"batch_size": 8}, {"batch_size": 32}, "configure")
    f["batch_size"]  # 8
    ```
    """
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise TypeError(
            f"{function}() got unknown flags {unknown}. Expected TF-Slim's "
            f"flag names: {sorted(defaults)}."
        )
    return {**defaults, **given}
