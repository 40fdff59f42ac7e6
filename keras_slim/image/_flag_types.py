"""What the commands' flags take: converters from a flag's text to its value."""

import math
import re


def _syntax(text):
    """Names what a converter takes, for `--help` (absl's syntactic help)."""

    def mark(convert):
        convert.syntax = text
        return convert

    return mark


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"must be an integer: {text!r}") from None


def _float(text):
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"must be a number: {text!r}") from None


@_syntax("a positive integer")
def positive_int(text):
    value = _int(text)
    if value <= 0:
        raise ValueError(f"must be a positive integer: {text}")
    return value


@_syntax("a non-negative integer")
def non_negative_int(text):
    value = _int(text)
    if value < 0:
        raise ValueError(f"must be >= 0: {text}")
    return value


@_syntax("a number")
def finite_float(text):
    value = _float(text)
    if not math.isfinite(value):
        raise ValueError(f"must be a finite number: {text}")
    return value


@_syntax("a positive number")
def positive_float(text):
    value = finite_float(text)
    if not value > 0:
        raise ValueError(f"must be a positive number: {text}")
    return value


@_syntax("a number in [0, 1)")
def fraction(text):
    value = finite_float(text)
    if not 0 <= value < 1:
        raise ValueError(f"must be in [0, 1): {text}")
    return value


@_syntax("a non-negative number")
def non_negative_float(text):
    value = finite_float(text)
    if not value >= 0:
        raise ValueError(f"must be >= 0: {text}")
    return value


@_syntax("comma-separated scopes (regular expressions)")
def scopes(text):
    """`a,b/c` -> ['a', 'b/c'] (slim's comma-separated scopes)."""
    scopes = [s.strip() for s in text.split(",") if s.strip()]
    for scope in scopes:
        try:
            re.compile(scope)
        except re.error as error:
            raise ValueError(f"invalid pattern {scope!r}: {error}") from None
    return scopes


@_syntax("pattern=value,...")
def multipliers(text):
    """`pattern=value,...` -> {pattern: value}."""
    result = {}
    for item in scopes(text):
        pattern, sep, value = item.rpartition("=")
        try:
            result[pattern] = float(value)
        except ValueError:
            sep = ""
        if not sep or not pattern:
            raise ValueError(f"expected pattern=value, got {item!r}")
        if not math.isfinite(result[pattern]):
            # As GradientPolicy: NaN and inf are errors, negatives follow
            # TF-Slim (allowed).
            raise ValueError(
                f"the multiplier of {pattern!r} must be a finite number, "
                f"got {value!r}"
            )
    return result


@_syntax("pattern=value,... with positive values")
def lr_multipliers(text):
    """`pattern=value,...` -> {pattern: value}, each value positive."""
    result = multipliers(text)
    for pattern, value in result.items():
        if value <= 0:
            raise ValueError(
                f"the learning-rate multiplier of {pattern!r} must be a "
                f"positive number, got {value!r}"
            )
    return result


@_syntax("digits, such as 0-4 or 5,7")
def labels(text):
    """`0-4` or `5,6,7` -> a list of digits."""
    labels = []
    for part in text.split(","):
        first, _, last = part.strip().partition("-")
        try:
            labels += list(range(int(first), int(last or first) + 1))
        except ValueError:
            raise ValueError(
                f"expected digits like 0-4 or 5,7: {text!r}"
            ) from None
    if not labels or any(not 0 <= d <= 9 for d in labels):
        raise ValueError(f"digits must be 0-9: {text!r}")
    if len(set(labels)) != len(labels) or len(labels) < 2:
        raise ValueError(f"need at least 2 distinct digits: {text!r}")
    return labels


@_syntax("N,M: integers, or N,M with M a number")
def randaugment(text):
    """`N,M` (timm's `rand-mM-nN`) -> `(N, M)`; ranges are checked by
    `datasets.load` (`Augmentation`)."""
    parts = text.split(",")
    if len(parts) != 2:
        raise ValueError(
            f"must be N,M (operations per image, magnitude 0-10): {text!r}"
        )
    return _int(parts[0].strip()), _float(parts[1].strip())
