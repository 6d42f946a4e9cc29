"""Guard against kio's unbounded array pre-allocation.

kio's native reader sizes each array with ``Vec::with_capacity(count)``,
``count`` straight from the wire, before reading any element. A forged count
(a compact array length goes up to 2**35) makes that allocation fail, and a
failed allocation in Rust *aborts the process*: one bad frame would kill the
broker. So before a frame reaches the native reader, a validator generated
per schema class (see :func:`guard_source`) walks the same structure and
raises :class:`MalformedRequest` for any array count larger than the bytes
left (every element of every schema takes at least one byte, so no valid
frame is rejected), and for a null array where the schema allows none (kio
would decode it as None, a value no handler expects; Kafka refuses to parse
such a request).

The walk mirrors the native reader step by step: same field order, same
skipping of strings and bytes, nullable-struct marker ``-1`` for null, and a
known tagged field is walked structurally with its declared size ignored,
exactly as the native reader does. The native reader raises ``KeyError`` at
the first unknown tag, so the walk stops there too; the tolerant decoder that
then takes over bounds its own arrays. Where the walk and the reader could
diverge, the reader is about to fail on that frame anyway.

Fixed-size runs are skipped with one constant addition, and arrays of
fixed-size items in O(1), so the cost is a few operations per string and per
variable-size array element.
"""

from __future__ import annotations

import contextlib
import functools
import struct
from collections.abc import Callable, Iterator
from dataclasses import Field, fields
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.serial.readers import read_unsigned_varint

from ._codegen import Module
from .errors import MalformedRequest

_FIXED_SIZES = {
    "int8": 1, "int16": 2, "int32": 4, "int64": 8,
    "uint8": 1, "uint16": 2, "uint32": 4, "uint64": 8,
    "float64": 8, "bool": 1, "error_code": 2, "uuid": 16,
    "timedelta_i32": 4, "timedelta_i64": 8, "datetime_i64": 8,
}  # fmt: skip


def _uv(buf: Any, pos: int) -> tuple[int, int]:
    """(value, new pos); kio's own varint reader, so limits and errors match it."""
    value, size = read_unsigned_varint(buf, pos)
    return value, pos + size


def _skip_compact(buf: Any, pos: int) -> int:
    length, pos = _uv(buf, pos)
    return pos + length - 1 if length else pos


def _too_long(count: int) -> MalformedRequest:
    return MalformedRequest(f"array length {count} exceeds the frame")


def _null_array() -> MalformedRequest:
    # Kafka refuses to parse such a request ("non-nullable field was serialized as null");
    # kio would hand the handler None where the schema promises a tuple.
    return MalformedRequest("a non-nullable array is null")


_HELPERS = {
    "_uv": _uv,
    "_skip_compact": _skip_compact,
    "_too_long": _too_long,
    "_null_array": _null_array,
    "_h": struct.Struct(">h").unpack_from,
    "_i": struct.Struct(">i").unpack_from,
}


class _Walker:
    """Emits the body of one validator; constant skips are accumulated lazily."""

    def __init__(self, module: Module) -> None:
        self.module = module
        self.lines = ["def check(buf, pos):"]
        self._indent = 1
        self._skip = 0

    def skip(self, size: int) -> None:
        self._skip += size

    def stmt(self, code: str) -> None:
        """A statement that reads at ``pos``: apply pending skips first."""
        if self._skip:
            self.lines.append("    " * self._indent + f"pos += {self._skip}")
            self._skip = 0
        self.lines.append("    " * self._indent + code)

    @contextlib.contextmanager
    def block(self, header: str) -> Iterator[None]:
        self.stmt(header)
        self._indent += 1
        mark = len(self.lines)
        yield
        if len(self.lines) == mark and not self._skip:
            self.stmt("pass")
        self.stmt("")  # applies a pending skip inside the block; blank lines are dropped
        self._indent -= 1


@functools.cache
def _fixed_size(cls: type) -> int | None:
    """Wire size of ``cls`` if it never varies (non-flexible, fixed fields only)."""
    if cls.__flexible__:  # type: ignore[attr-defined]
        return None
    total = 0
    for field in fields(cls):
        field_class = classify_field(field)
        size: int | None = None
        if isinstance(field_class, EntityField) and not is_optional(field):
            size = _fixed_size(field_class.type_)
        elif not isinstance(field_class, EntityField | EntityTupleField | PrimitiveTupleField):
            size = _FIXED_SIZES.get(get_schema_field_type(field))
        if size is None:
            return None
        total += size
    return total


def _walk_entity(w: _Walker, cls: type) -> None:
    for field in fields(cls):
        if get_field_tag(field) is None:
            _walk_field(w, cls, field, is_tag=False)
    if cls.__flexible__:  # type: ignore[attr-defined]
        _walk_tags(w, cls)


def _walk_field(w: _Walker, owner: type, field: Field[Any], *, is_tag: bool) -> None:
    field_class = classify_field(field)
    flexible = bool(owner.__flexible__)  # type: ignore[attr-defined]
    if isinstance(field_class, EntityField):
        entity = field_class.type_
        if is_tag or not is_optional(field):
            _walk_entity(w, entity)
            return
        marker = w.module.fresh("_m")
        w.stmt(f"{marker} = buf[pos]")
        w.skip(1)
        with w.block(f"if {marker} != 255:"):  # int8 -1 marks null
            _walk_entity(w, entity)
    elif isinstance(field_class, EntityTupleField):
        entity = field_class.type_
        _walk_array(
            w, flexible, _fixed_size(entity), lambda: _walk_entity(w, entity), is_optional(field)
        )
    else:
        kafka_type = get_schema_field_type(field)
        walk_one = functools.partial(_walk_primitive, w, kafka_type, flexible)
        if isinstance(field_class, PrimitiveTupleField):
            _walk_array(w, flexible, _FIXED_SIZES.get(kafka_type), walk_one, is_optional(field))
        else:
            walk_one()


def _walk_primitive(w: _Walker, kafka_type: str, flexible: bool) -> None:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        w.skip(size)
    elif flexible:  # compact string/bytes/records; a one-byte length is the common case
        c = w.module.fresh("_c")
        w.stmt(f"pos = pos + ({c} or 1) if ({c} := buf[pos]) < 128 else _skip_compact(buf, pos)")
    elif kafka_type == "string":
        w.stmt("pos += 2 + max(0, _h(buf, pos)[0])")
    else:
        w.stmt("pos += 4 + max(0, _i(buf, pos)[0])")


def _walk_array(
    w: _Walker,
    flexible: bool,
    item_size: int | None,
    walk_item: Callable[[], None],
    nullable: bool,
) -> None:
    count = w.module.fresh("_n")
    if flexible:  # compact length: count + 1, 0 for null; one byte is the common case
        with w.block(f"if ({count} := buf[pos]) < 128:"):
            w.stmt(f"{count} -= 1")
            w.skip(1)
        with w.block("else:"):
            w.stmt(f"{count}, pos = _uv(buf, pos)")
            w.stmt(f"{count} -= 1")
    else:
        w.stmt(f"{count} = _i(buf, pos)[0]")
        w.skip(4)
    w.stmt(f"if {count} > len(buf) - pos: raise _too_long({count})")
    if not nullable:
        w.stmt(f"if {count} < 0: raise _null_array()")
    if item_size is not None:
        w.stmt(f"if {count} > 0: pos += {count} * {item_size}")
        return
    with w.block(f"for _ in range({count}):"):
        walk_item()


def _walk_tags(w: _Walker, cls: type) -> None:
    count, tag = w.module.fresh("_n"), w.module.fresh("_g")
    with w.block("if buf[pos] == 0:"):  # the common case: no tagged fields
        w.skip(1)
    with w.block("else:"):
        w.stmt(f"{count}, pos = _uv(buf, pos)")
        with w.block(f"for _ in range({count}):"):
            _walk_tag(w, cls, tag)


def _walk_tag(w: _Walker, cls: type, tag: str) -> None:
    w.stmt(f"{tag}, pos = _uv(buf, pos)")
    w.stmt("pos = _uv(buf, pos)[1]")  # declared size: ignored, like the native reader
    tagged = [(get_field_tag(f), f) for f in fields(cls) if get_field_tag(f) is not None]
    for index, (number, field) in enumerate(tagged):
        with w.block(f"{'el' if index else ''}if {tag} == {number}:"):
            _walk_field(w, cls, field, is_tag=True)
    # The native reader raises KeyError at an unknown tag, before reading further.
    if not tagged:
        w.stmt("return")
        return
    with w.block("else:"):
        w.stmt("return")


@functools.cache
def frame_guard(cls: type) -> Callable[[Any, int], None]:
    """``check(buffer, offset)``: raise MalformedRequest if kio could over-allocate."""
    module = Module()
    module.namespace.update(_HELPERS)
    w = _Walker(module)
    _walk_entity(w, cls)
    w.stmt("return")  # the body must not be empty (e.g. ListGroupsRequest v0)
    module.sources.append("\n".join(line for line in w.lines if line.strip()))
    _SOURCES[cls] = module.sources[0]
    check: Callable[[Any, int], None] = module.compile(
        f"guard {cls.__module__}.{cls.__qualname__}"
    )["check"]
    return check


_SOURCES: dict[type, str] = {}


def guard_source(cls: type) -> str:
    """The generated validator source for ``cls`` (for debugging and review)."""
    frame_guard(cls)
    return _SOURCES[cls]
