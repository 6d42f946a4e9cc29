"""Config values parsed and checked as Kafka's ConfigDef parses them, with its messages.

A value arrives as text; `parse` turns it into the text we store (what DescribeConfigs shows:
Kafka prints a parsed value back, so ``" 100 "`` is stored as ``100`` and ``TRUE`` as
``true``), or raises `InvalidConfig` with Kafka's message, which the config APIs answer as
INVALID_CONFIG. A `Rule` is one config's type and its validator (Kafka's Range, ValidString,
ValidList or one of its own validators).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# DescribeConfigs' config types (Kafka's ConfigType ids)
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_SHORT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = range(1, 8)
_TYPE_NAMES = {TYPE_INT: "INT", TYPE_LONG: "LONG", TYPE_DOUBLE: "DOUBLE"}
_INT_LIMITS = {TYPE_INT: 2**31, TYPE_LONG: 2**63}
LONG_MAX = 2**63 - 1


class InvalidConfig(ValueError):
    """A config name or value Kafka would refuse (INVALID_CONFIG), with Kafka's message."""


# A validator gets the parsed value (int, float, bool, str or list of str) and returns the
# reason it is refused, or None.
Check = Callable[[object], str | None]


@dataclass(frozen=True, slots=True)
class Rule:
    kind: int  # a TYPE_* above
    check: Check | None = None
    # a list's item refused names the item, not the list (Kafka's ValidList)
    per_item: bool = False


def parse(name: str, rule: Rule, value: str) -> str:
    """The text to store for `value`, or InvalidConfig with Kafka's message."""
    parsed = _parse_type(name, rule.kind, value)
    if rule.check is not None:
        items = parsed if rule.per_item and isinstance(parsed, list) else [parsed]
        for item in items:
            reason = rule.check(item)
            if reason is not None:
                # a whole list is shown as Java prints one
                shown = f"[{', '.join(item)}]" if isinstance(item, list) else _shown(item)
                raise InvalidConfig(f"Invalid value {shown} for configuration {name}: {reason}")
    return _shown(parsed)


def _parse_type(name: str, kind: int, value: str) -> object:
    text = value.strip()
    if kind == TYPE_BOOLEAN:
        if text.lower() not in ("true", "false"):
            raise InvalidConfig(
                f"Invalid value {value} for configuration {name}: Expected value to be either "
                "true or false"
            )
        return text.lower() == "true"
    if kind in (TYPE_INT, TYPE_LONG):
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not -_INT_LIMITS[kind] <= number < _INT_LIMITS[kind]:
            raise InvalidConfig(_not_a_number(name, kind, value))
        return number
    if kind == TYPE_DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise InvalidConfig(_not_a_number(name, kind, value)) from None
    if kind == TYPE_LIST:
        return [item.strip() for item in text.split(",")] if text else []
    return text


def _not_a_number(name: str, kind: int, value: str) -> str:
    kind_name = _TYPE_NAMES[kind]
    return f"Invalid value {value} for configuration {name}: Not a number of type {kind_name}"


def _shown(parsed: object) -> str:
    if isinstance(parsed, bool):
        return str(parsed).lower()
    if isinstance(parsed, list):
        return ",".join(parsed)
    return str(parsed)


def at_least(minimum: int) -> Check:
    def check(value: object) -> str | None:
        return None if value >= minimum else f"Value must be at least {minimum}"  # type: ignore[operator]

    return check


def between(minimum: int, maximum: int) -> Check:
    def check(value: object) -> str | None:
        if value < minimum:  # type: ignore[operator]
            return f"Value must be at least {minimum}"
        if value > maximum:  # type: ignore[operator]
            return f"Value must be no more than {maximum}"
        return None

    return check


def one_of(allowed: Sequence[str]) -> Check:
    """Kafka's ValidString.in (case-sensitive), also per item of a ValidList."""

    def check(value: object) -> str | None:
        return None if value in allowed else f"String must be one of: {', '.join(allowed)}"

    return check
