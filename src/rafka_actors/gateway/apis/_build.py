"""Building kio response entities for whatever version the client asked for.

kio has one dataclass per (api, version), and fields come and go between versions. Handlers
are written once, against the newest shape: `make(cls, **values)` keeps only the values the
class at hand has (cached per class), and `nested(response_cls)` finds the version's nested
classes (e.g. `MetadataResponseTopic`) in the same generated module.
"""

from __future__ import annotations

import datetime
import sys
from functools import cache
from types import ModuleType
from typing import Any

from kio.schema.errors import ErrorCode

from ...protocol.messages import response_class

_ZERO = datetime.timedelta(0)
_ERROR_CODES = {int(code): code for code in ErrorCode}


@cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(cls.__dataclass_fields__)  # type: ignore[attr-defined]


def make(cls: type, **values: Any) -> Any:
    names = _field_names(cls)
    if names.issuperset(values):  # the usual case: no new dict to build
        return cls(**values)
    return cls(**{k: v for k, v in values.items() if k in names})


def error_code(value: int) -> ErrorCode:
    """`ErrorCode(value)`: a dict lookup for a known code, a fifth of the enum's own call."""
    try:
        return _ERROR_CODES[value]
    except KeyError:
        return ErrorCode(value)  # raises ValueError for a code kio does not know


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


@cache
def schema(api_key: int, version: int) -> ModuleType:
    """The generated kio module holding the response classes of this version."""
    return sys.modules[response_class(api_key, version).__module__]


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value) if value else _ZERO


def to_ms(value: datetime.timedelta | int) -> int:
    """kio decodes *_ms fields as timedeltas; the protocol means integer milliseconds."""
    if isinstance(value, datetime.timedelta):
        return (value.days * 86_400_000) + (value.seconds * 1000) + value.microseconds // 1000
    return int(value)


NO_THROTTLE = _ZERO
