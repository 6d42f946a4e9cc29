"""Specialised encoders for kio entities, generated from their schemas.

kio's ``entity_writer`` interprets the schema on every call (one closure call
and one small ``BytesIO.write`` per field), which dominates the cost of
answering small requests. Here a kio dataclass is compiled once into plain
Python source, ``exec``-ed and cached:

* consecutive fixed-width fields (ints, bool, error codes, timedeltas,
  datetimes, uuids, array/legacy-string length prefixes, empty tagged-field
  sections) are merged into a single precompiled ``struct.pack`` call;
* nested entities are inlined, and entity arrays become plain ``for`` loops;
* primitive int arrays are packed with one ``struct.pack`` call;
* variable-length parts are appended to a list joined once at the end, so
  record batches are copied only into the final frame;
* tagged fields are written in tag order with their sizes, omitted when equal
  to their default, using the same defaults and comparisons as kio.

The output is byte-for-byte identical to kio's writer (the property tests
compare both over every request and response class the broker serves).
Generated sources are registered with :mod:`linecache`, and
:func:`encoder_source` returns them for inspection.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import Field, fields
from typing import Any, NamedTuple

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
from kio.static.constants import uuid_zero

from ._codegen import FunctionBuilder, Module, PartsEncoder, uvarint

# kafka_type -> struct code, for values struct can pack as they are.
_PLAIN = {
    "int8": "b", "int16": "h", "int32": "i", "int64": "q",
    "uint8": "B", "uint16": "H", "uint32": "I", "uint64": "Q",
    "float64": "d", "bool": "?", "error_code": "h",
}  # fmt: skip
# kafka_type -> (struct code, conversion template); same arithmetic as kio's writers.
_CONVERTED = {
    "timedelta_i32": ("i", "round({}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({}.timestamp() * 1000)"),
}
_BLOBS = frozenset({"string", "bytes", "records"})
_ENTITY_KINDS: dict[type, str] = {
    EntityField: "entity",
    EntityTupleField: "entity_array",
    PrimitiveTupleField: "primitive_array",
}
_OUT_PROLOGUE = ["_a = _out.append", "_ext = _out.extend"]


class _Spec(NamedTuple):
    """What the generator needs to know about one field."""

    name: str
    kind: str  # "primitive" | "primitive_array" | "entity" | "entity_array"
    kafka_type: str  # "" for entity kinds
    nullable: bool
    flexible: bool
    entity: type | None
    tag: int | None
    default: object  # tagged fields only


def _spec(owner: type, field: Field[Any]) -> _Spec:
    tag = get_field_tag(field)
    field_class = classify_field(field)
    kind = _ENTITY_KINDS.get(type(field_class), "primitive")
    entity = field_class.type_ if kind in ("entity", "entity_array") else None
    kafka_type = "" if entity is not None else get_schema_field_type(field)
    # Tagged fields are optional through the tag's absence; kio writes their values
    # with non-nullable writers, and so do we.
    nullable = tag is None and is_optional(field)
    default = get_tagged_field_default(field) if tag is not None else None
    flexible = bool(owner.__flexible__)  # type: ignore[attr-defined]
    return _Spec(field.name, kind, kafka_type, nullable, flexible, entity, tag, default)


def _emit_entity(fn: FunctionBuilder, cls: type, expr: str) -> None:
    var = expr
    if not expr.isidentifier():
        var = fn.temp("_e")
        fn.assign(f"{var} = {expr}")
    specs = [_spec(cls, field) for field in fields(cls)]
    for spec in specs:
        if spec.tag is None:
            _emit_value(fn, spec, f"{var}.{spec.name}")
    if cls.__flexible__:  # type: ignore[attr-defined]
        tagged = sorted((s for s in specs if s.tag is not None), key=lambda s: s.tag or 0)
        _emit_tags(fn, var, tagged)


def _emit_value(fn: FunctionBuilder, spec: _Spec, expr: str) -> None:
    entity = spec.entity
    if spec.kind == "entity" and entity is not None:
        if spec.nullable:
            _emit_nullable_entity(fn, entity, expr)
        else:
            _emit_entity(fn, entity, expr)
    elif spec.kind == "entity_array" and entity is not None:

        def loop(items: str) -> None:
            item = fn.temp("_i")
            with fn.block(f"for {item} in {items}:"):
                _emit_entity(fn, entity, item)

        _emit_array(fn, spec.flexible, expr, loop)
    elif spec.kind == "primitive_array":
        _emit_primitive_array(fn, spec, expr)
    else:
        _emit_primitive(fn, spec.kafka_type, spec.flexible, spec.nullable, expr)


def _emit_nullable_entity(fn: FunctionBuilder, cls: type, expr: str) -> None:
    # KIP-893 nullable structs: an int8 marker, -1 for null, 1 before the struct.
    var = fn.temp("_e")
    fn.assign(f"{var} = {expr}")
    with fn.block(f"if {var} is None:"):
        fn.fixed("b", "-1")
    with fn.block("else:"):
        fn.fixed("b", "1")
        _emit_entity(fn, cls, var)


def _emit_array(
    fn: FunctionBuilder, flexible: bool, expr: str, emit_items: Callable[[str], None]
) -> None:
    # Like kio, every array writer accepts None and writes the null length.
    items = fn.temp("_l")
    fn.assign(f"{items} = {expr}")
    with fn.block(f"if {items} is None:"):
        if flexible:
            fn.fixed("B", "0")
        else:
            fn.fixed("i", "-1")
    with fn.block("else:"):
        if flexible:
            fn.append(f"_uv(len({items}) + 1)")
        else:
            fn.fixed("i", f"len({items})")
        emit_items(items)


def _emit_primitive_array(fn: FunctionBuilder, spec: _Spec, expr: str) -> None:
    code = _PLAIN.get(spec.kafka_type)

    def pack_all(items: str) -> None:
        fn.append(f"_pack('>%d{code}' % len({items}), *{items})")

    def loop(items: str) -> None:
        item = fn.temp("_i")
        with fn.block(f"for {item} in {items}:"):
            _emit_primitive(fn, spec.kafka_type, spec.flexible, False, item)

    _emit_array(fn, spec.flexible, expr, pack_all if code else loop)


def _emit_primitive(
    fn: FunctionBuilder, kafka_type: str, flexible: bool, nullable: bool, expr: str
) -> None:
    if kafka_type in _PLAIN and not nullable:
        fn.fixed(_PLAIN[kafka_type], expr)
    elif kafka_type in _CONVERTED and not nullable:
        code, template = _CONVERTED[kafka_type]
        fn.fixed(code, template.format(expr))
    elif kafka_type == "datetime_i64":
        w = fn.temp("_w")
        fn.fixed("q", f"-1 if ({w} := {expr}) is None else round({w}.timestamp() * 1000)")
    elif kafka_type == "uuid":
        # kio writes the zero uuid for None whether or not the field is nullable.
        w, zero = fn.temp("_w"), fn.module.const(uuid_zero.bytes)
        fn.fixed("16s", f"{zero} if ({w} := {expr}) is None else {w}.bytes")
    elif kafka_type in _BLOBS:
        _emit_blob(fn, kafka_type == "string", flexible, nullable, expr)
    else:
        raise NotImplementedError(f"no encoder for {kafka_type=} {flexible=} {nullable=}")


def _emit_blob(
    fn: FunctionBuilder, is_string: bool, flexible: bool, nullable: bool, expr: str
) -> None:
    encode = ".encode()" if is_string else ""
    if flexible and nullable:
        value = fn.temp("_v")
        fn.assign(f"{value} = {expr}")
        with fn.block(f"if {value} is None:"):
            fn.fixed("B", "0")
        with fn.block("else:"):
            _emit_compact(fn, is_string, f"{value}{encode}")
    elif flexible:
        _emit_compact(fn, is_string, f"{expr}{encode}")
    else:
        data, code = fn.temp("_b"), "h" if is_string else "i"
        if nullable:
            w = fn.temp("_w")
            fn.assign(f"{data} = None if ({w} := {expr}) is None else {w}{encode}")
            fn.fixed(code, f"-1 if {data} is None else len({data})")
            with fn.block(f"if {data} is not None:"):
                fn.append(data)
        else:
            fn.assign(f"{data} = {expr}{encode}")
            fn.fixed(code, f"len({data})")
            fn.append(data)


def _emit_compact(fn: FunctionBuilder, is_string: bool, expr: str) -> None:
    data = fn.temp("_b")
    fn.assign(f"{data} = {expr}")
    if is_string:  # short: one concatenation beats two list appends
        fn.append(f"_uv(len({data}) + 1) + {data}")
    else:  # possibly a large record batch: never copy it here
        fn.append(f"_uv(len({data}) + 1)")
        fn.append(data)


def _emit_tags(fn: FunctionBuilder, var: str, tagged: list[_Spec]) -> None:
    if not tagged:
        fn.fixed("B", "0")
        return
    parts = fn.temp("_p")
    fn.assign(f"{parts} = []")
    for spec in tagged:
        encode = _tagged_value_function(fn.module, spec)
        default = fn.module.const(spec.default, "_d")
        prefix = fn.module.const(uvarint(spec.tag or 0), "_g")
        value, data = fn.temp("_v"), fn.temp("_b")
        fn.assign(f"{value} = {var}.{spec.name}")
        # Same test as kio: a field equal to its default is left out.
        with fn.block(f"if not {value} == {default}:"):
            fn.assign(f"{data} = {encode}({value})")
            fn.assign(f"{parts}.append({prefix} + _uv(len({data})) + {data})")
    fn.append(f"_uv(len({parts}))")
    fn.statement(f"_ext({parts})")


def _tagged_value_function(module: Module, spec: _Spec) -> str:
    """Generate a function returning a tagged field's encoded value (its size is needed)."""
    name = module.fresh("_tagged")
    fn = FunctionBuilder(module, f"{name}(_v)", ["_out = []", *_OUT_PROLOGUE])
    _emit_value(fn, spec, "_v")
    fn.finish(['return b"".join(_out)'])
    return name


class _Encoders(NamedTuple):
    into: PartsEncoder
    whole: Callable[[Any], bytes]
    source: str


@functools.cache
def _build(cls: type) -> _Encoders:
    module = Module()
    into = FunctionBuilder(module, "encode_into(_o, _out)", _OUT_PROLOGUE)
    _emit_entity(into, cls, "_o")
    into.finish()
    # The bytes-returning variant inlines the body too, saving a call on tiny messages.
    whole = FunctionBuilder(module, "encode(_o)", ["_out = []", *_OUT_PROLOGUE])
    _emit_entity(whole, cls, "_o")
    whole.finish(['return b"".join(_out)'])
    namespace = module.compile(f"encoder {cls.__module__}.{cls.__qualname__}")
    return _Encoders(namespace["encode_into"], namespace["encode"], "\n\n".join(module.sources))


def parts_encoder(cls: type) -> PartsEncoder:
    """``f(entity, parts)`` appending the encoding of a ``cls`` instance to ``parts``."""
    return _build(cls).into


def encoder(cls: type) -> Callable[[Any], bytes]:
    """``f(entity) -> bytes``: the encoding of a ``cls`` instance (no size, no header)."""
    return _build(cls).whole


def encoder_source(cls: type) -> str:
    """The generated Python source for ``cls`` (for debugging and review)."""
    return _build(cls).source
