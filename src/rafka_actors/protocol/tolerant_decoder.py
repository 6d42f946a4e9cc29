"""Schema-driven decoder that skips unknown tagged fields.

KIP-482 requires a reader to skip tagged fields it does not know (newer
clients may send tags introduced after our schema), but kio's native decoder
raises ``KeyError('Unknown tagged field tag: N')`` instead. This module is
the fallback :mod:`.codec` uses when that happens; it is slower (Python per
struct) but only ever runs on such frames.

It walks the kio dataclass fields the way kio does. Primitive fields and
array elements are read with kio's native readers, so their values are
identical to the fast path; arrays (whose counts are checked against the
bytes left, see :mod:`.frame_guard`), structs and struct arrays are read
here, recursively, so unknown tags are skipped at every nesting level. A
known tag is decoded within (a view bounded by) its declared size, and the
read resumes at the end of that size.

Readers follow kio's convention: ``read(buffer, offset) -> (value, size)``,
where size is the number of bytes consumed.

An int64 duration (OffsetCommit v2-v4's ``retention_time``) is read here too: kio's
native reader refuses more than 2**63 microseconds (about 292 000 years) although its
own type admits up to ``timedelta.max`` less a day and Kafka any int64; beyond that
type's range the value is clamped to it (nothing acts on such a duration). So is a
negative timestamp (Kafka's -1 for "no time"), which kio's native reader refuses.

Null arrays are returned as ``None`` even for non-nullable fields, matching
kio's native decoder. Structural violations raise :class:`MalformedRequest`;
kio's own decode errors propagate for :mod:`.codec` to wrap.
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Callable
from dataclasses import MISSING, Field, fields
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial._parse import get_field_reader, get_reader
from kio.serial.readers import (
    read_compact_array_length,
    read_int8,
    read_int64,
    read_legacy_array_length,
    read_unsigned_varint,
)
from kio.static.primitive import i64_timedelta_max, i64_timedelta_min

from .errors import MalformedRequest

Reader = Callable[[Any, int], tuple[Any, int]]
_Tagged = dict[int, tuple[str, Reader]]


@functools.cache
def tolerant_reader(cls: type) -> Reader:
    """``read(buffer, offset) -> (entity, size)`` for the kio dataclass ``cls``."""
    flexible = bool(cls.__flexible__)  # type: ignore[attr-defined]
    plain: list[tuple[str, Reader]] = []
    tagged: _Tagged = {}
    implicit: dict[str, object] = {}  # tagged fields whose dataclass has no default
    for field in fields(cls):
        tag = get_field_tag(field)
        reader = _field_reader(cls, field, is_tag=tag is not None)
        if tag is None:
            plain.append((field.name, reader))
            continue
        tagged[tag] = (field.name, reader)
        if field.default is MISSING and field.default_factory is MISSING:
            implicit[field.name] = get_tagged_field_default(field)

    def read(buffer: Any, offset: int) -> tuple[Any, int]:
        values: dict[str, Any] = {}
        pos = offset
        for name, field_reader in plain:
            values[name], size = field_reader(buffer, pos)
            pos += size
        if flexible:
            pos = _read_tagged_fields(buffer, pos, tagged, values)
            for name, default in implicit.items():
                values.setdefault(name, default)
        return cls(**values), pos - offset

    return read


def _read_tagged_fields(buffer: Any, offset: int, tagged: _Tagged, values: dict[str, Any]) -> int:
    """Read a tagged-field section at ``offset``; returns the offset after it."""
    count, offset = _uvarint(buffer, offset)
    view = memoryview(buffer)
    for _ in range(count):
        tag, offset = _uvarint(buffer, offset)
        size, offset = _uvarint(buffer, offset)
        end = offset + size
        if end > len(buffer):
            raise MalformedRequest(f"tagged field {tag} overruns the frame")
        known = tagged.get(tag)
        if known is not None:
            name, reader = known
            # The view bounds the read by the declared size; offsets stay absolute.
            values[name], _ = reader(view[:end], offset)
        offset = end
    return offset


def _uvarint(buffer: Any, offset: int) -> tuple[int, int]:
    value, size = read_unsigned_varint(buffer, offset)
    return value, offset + size


def _field_reader(owner: type, field: Field[Any], *, is_tag: bool) -> Reader:
    field_class = classify_field(field)
    if isinstance(field_class, EntityField):
        entity = tolerant_reader(field_class.type_)
        # Tagged structs are optional by their tag's absence, never by a marker.
        return entity if is_tag or not is_optional(field) else _nullable(entity)
    flexible = bool(owner.__flexible__)  # type: ignore[attr-defined]
    if isinstance(field_class, EntityTupleField):
        return _array(tolerant_reader(field_class.type_), flexible)
    if isinstance(field_class, PrimitiveTupleField):
        # Not kio's array reader: it pre-allocates from the unchecked wire count.
        item: Reader = get_reader(get_schema_field_type(field), flexible, False)
        return _array(item, flexible)
    if get_schema_field_type(field) == "timedelta_i64":
        return _read_timedelta_i64
    if get_schema_field_type(field) == "datetime_i64" and not is_optional(field):
        return _read_datetime_i64
    reader: Reader = get_field_reader(owner, field, False, is_tag)
    return reader


_MS = datetime.timedelta(milliseconds=1)
_MS_MIN, _MS_MAX = i64_timedelta_min // _MS, i64_timedelta_max // _MS


def _read_timedelta_i64(buffer: Any, offset: int) -> tuple[datetime.timedelta, int]:
    ms, size = read_int64(buffer, offset)
    return datetime.timedelta(milliseconds=min(max(ms, _MS_MIN), _MS_MAX)), size


def _read_datetime_i64(buffer: Any, offset: int) -> tuple[datetime.datetime, int]:
    """A timestamp, negative ones too (Kafka's -1 for "none"), which kio refuses."""
    ms, size = read_int64(buffer, offset)
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC), size


def _nullable(entity: Reader) -> Reader:
    """KIP-893 nullable struct: an int8 marker, negative for null."""

    def read(buffer: Any, offset: int) -> tuple[Any, int]:
        marker, size = read_int8(buffer, offset)
        if marker < 0:
            return None, size
        value, entity_size = entity(buffer, offset + size)
        return value, size + entity_size

    return read


def _array(item: Reader, flexible: bool) -> Reader:
    def read(buffer: Any, offset: int) -> tuple[Any, int]:
        length: int | None
        if flexible:
            length, pos = read_compact_array_length(buffer, offset)
        else:
            length, pos = read_legacy_array_length(buffer, offset)
            if length == -1:
                length = None
        pos += offset
        if length is None:
            return None, pos - offset
        # Every element takes at least one byte: reject absurd counts up front.
        if length < 0 or length > len(buffer) - pos:
            raise MalformedRequest(f"array length {length} exceeds the frame")
        items = []
        for _ in range(length):
            value, size = item(buffer, pos)
            items.append(value)
            pos += size
        return tuple(items), pos - offset

    return read
