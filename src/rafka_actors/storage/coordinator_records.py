"""Coordinator log entries: a group's records as CBOR, their compaction keys, and the live view.

Encoding
--------
An entry is one record of one group, as a CBOR array
``[record_type, version, org_id, group_id, *fields]`` where ``fields`` are the record
dataclass's fields in declaration order (so ``GroupMetadataRecord.members`` is an array of
8-element arrays). Type tags follow Kafka's ``__consumer_offsets`` api keys where Kafka has one:
1 OffsetCommit, 2 GroupMetadata, 3 OffsetTombstone, 4 GroupTombstone. Every type is at version
0; a change of a type's fields is a new version, never a reinterpretation of an old one.

Decoding is strict, because a frame that passed its CRC but does not decode is either damage the
CRC missed or a bug: the payload must be exactly one array of the declared arity and field types
(arrays come back as tuples, so a decoded record equals the one that was encoded). A malformed
payload raises `CoordinatorRecordError` (a ValueError: the segment reader treats the frame as
damaged); an entry of a type or version this broker does not know raises
`UnsupportedRecordError`, which is fatal on purpose: it was written by a newer broker, and
treating it as a torn tail would throw acknowledged state away on a downgrade.

Compaction keys
---------------
`compaction_key` gives each entry a hierarchical key: ``(org, group, topic, partition)`` for
offsets, ``(org, group)`` for the group record. A tombstone deletes every earlier entry whose key
starts with its own, so a GroupTombstone wipes the group record and all of the group's offsets.

The live view
-------------
`LatestRecords` is what a fully compacted log holds, in memory: per group the latest group record
and the latest committed offset per partition. ``records_of`` returns the group record first,
then the offsets, which `group.replay` turns back into the group. Tombstones are applied, not
kept: replaying a deleted offset's absence is the same as replaying its tombstone, and the view
then stays as small as the live state.
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Hashable, Iterable
from enum import IntEnum
from typing import Any

import cbor2

from ..group.records import (
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from ..ids import GroupKey
from .coordinator_segments import CoordinatorLogError

__all__ = [
    "RECORD_VERSION",
    "CompactionKey",
    "CoordinatorRecordError",
    "LatestRecords",
    "RecordType",
    "UnsupportedRecordError",
    "compaction_key",
    "decode_entry",
    "encode_entry",
    "entry_compaction_key",
]

RECORD_VERSION = 0
CompactionKey = tuple[Hashable, ...]


class RecordType(IntEnum):
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    OFFSET_TOMBSTONE = 3
    GROUP_TOMBSTONE = 4


class CoordinatorRecordError(CoordinatorLogError, ValueError):
    """A payload that is not a well-formed coordinator entry."""


class UnsupportedRecordError(CoordinatorLogError):
    """A well-formed entry of a record type or version this broker does not know."""


# Field schemas: the exact types each field may decode to (so a bool is not an int).
_Kinds = frozenset[type]
_STR: _Kinds = frozenset({str})
_OPT_STR: _Kinds = frozenset({str, type(None)})
_INT: _Kinds = frozenset({int})
_BYTES: _Kinds = frozenset({bytes})
_MEMBERS: _Kinds = frozenset()  # marker (by identity): GroupMetadataRecord's member rows
_MEMBER_ROW = (_STR, _OPT_STR, _STR, _STR, _INT, _INT, _BYTES, _BYTES)
_Schema = tuple[_Kinds, ...]
_SCHEMAS: dict[type, tuple[RecordType, _Schema]] = {
    OffsetCommitRecord: (
        RecordType.OFFSET_COMMIT,
        (_STR, _STR, _INT, _INT, _INT, _OPT_STR, _INT),
    ),
    GroupMetadataRecord: (
        RecordType.GROUP_METADATA,
        (_STR, _STR, _OPT_STR, _INT, _OPT_STR, _OPT_STR, _INT, _MEMBERS, _STR),
    ),
    OffsetTombstone: (RecordType.OFFSET_TOMBSTONE, (_STR, _STR, _INT)),
    GroupTombstone: (RecordType.GROUP_TOMBSTONE, (_STR,)),
}
_BY_TAG: dict[int, tuple[type, _Schema]] = {tag: (cls, s) for cls, (tag, s) in _SCHEMAS.items()}
_FIELDS: dict[type, tuple[str, ...]] = {
    cls: tuple(f.name for f in dataclasses.fields(cls)) for cls in _SCHEMAS
}


def encode_entry(key: GroupKey, record: Record) -> bytes:
    cls = type(record)
    tag, _ = _SCHEMAS[cls]
    fields = [getattr(record, name) for name in _FIELDS[cls]]
    return cbor2.dumps([int(tag), RECORD_VERSION, key.org_id, key.group_id, *fields])


def decode_entry(payload: bytes) -> tuple[GroupKey, Record]:
    cls, schema, items = _unpack(payload)
    record: Record = cls(*_checked(items[4:], schema, cls.__name__))
    return GroupKey(items[2], items[3]), record


def _unpack(payload: bytes) -> tuple[type, _Schema, list[Any]]:
    """The record class, its schema and the array of an entry whose header checks out."""
    items = _load_exactly(payload)
    if type(items) is not list or len(items) < 4:
        raise CoordinatorRecordError(f"not a coordinator entry: {_preview(items)}")
    tag, version, org_id, group_id = items[:4]
    if type(tag) is not int or tag not in _BY_TAG:
        raise UnsupportedRecordError(f"unknown coordinator record type {tag!r}")
    cls, schema = _BY_TAG[tag]
    if version != RECORD_VERSION:
        raise UnsupportedRecordError(f"unknown version {version!r} of {cls.__name__}")
    if type(org_id) is not int or type(group_id) is not str:
        raise CoordinatorRecordError(f"bad entry key ({org_id!r}, {group_id!r})")
    return cls, schema, items


def _load_exactly(payload: bytes) -> Any:
    stream = io.BytesIO(payload)
    try:
        value = cbor2.CBORDecoder(stream).decode()
    except (cbor2.CBORError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise CoordinatorRecordError(f"undecodable CBOR: {exc}") from exc
    if stream.tell() != len(payload):
        raise CoordinatorRecordError(f"{len(payload) - stream.tell()} bytes after the entry")
    return value


def _checked(values: list[Any], schema: _Schema, what: str) -> list[Any]:
    """``values`` with their types checked against ``schema`` and arrays turned into tuples."""
    if len(values) != len(schema):
        raise CoordinatorRecordError(f"{what} has {len(values)} fields, not {len(schema)}")
    for i, (value, kinds) in enumerate(zip(values, schema, strict=True)):
        if kinds is _MEMBERS:
            if type(value) is not list:
                raise CoordinatorRecordError(f"{what}: members are {_preview(value)}")
            values[i] = tuple(_member_row(row) for row in value)
        elif type(value) not in kinds:
            raise CoordinatorRecordError(f"{what}: field {i} is {_preview(value)}")
    return values


def _member_row(row: Any) -> tuple[Any, ...]:
    if type(row) is not list:
        raise CoordinatorRecordError(f"member row {_preview(row)} is not an array")
    return tuple(_checked(row, _MEMBER_ROW, "member row"))


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- compaction ------------------------------------------------------------------------------


def compaction_key(key: GroupKey, record: Record) -> tuple[CompactionKey, bool]:
    """(hierarchical key, is a tombstone) of one entry."""
    if isinstance(record, OffsetCommitRecord | OffsetTombstone):
        entry_key: CompactionKey = (key.org_id, key.group_id, record.topic, record.partition)
        return entry_key, isinstance(record, OffsetTombstone)
    return (key.org_id, key.group_id), isinstance(record, GroupTombstone)


def entry_compaction_key(payload: bytes) -> tuple[CompactionKey, bool]:
    """`compaction_key` of an encoded entry, for `CoordinatorSegments.compact_sealed`.

    Compaction reads every sealed entry, so this checks only what it uses and builds no record.
    """
    cls, _, items = _unpack(payload)
    if cls is OffsetCommitRecord or cls is OffsetTombstone:
        topic, partition = items[5:7] if len(items) >= 7 else (None, None)
        if type(topic) is not str or type(partition) is not int:
            raise CoordinatorRecordError(f"bad offset key ({topic!r}, {partition!r})")
        return (items[2], items[3], topic, partition), cls is OffsetTombstone
    return (items[2], items[3]), cls is GroupTombstone


# -- the live view ---------------------------------------------------------------------------


class _GroupLatest:
    __slots__ = ("group", "offsets")

    def __init__(self) -> None:
        self.group: GroupMetadataRecord | None = None
        self.offsets: dict[tuple[str, int], OffsetCommitRecord] = {}


class LatestRecords:
    """The latest group record and latest offset per partition of every group."""

    def __init__(self) -> None:
        self._groups: dict[GroupKey, _GroupLatest] = {}

    def apply(self, key: GroupKey, records: Iterable[Record]) -> None:
        latest = self._groups.get(key) or _GroupLatest()
        for record in records:
            if isinstance(record, GroupTombstone):
                latest = _GroupLatest()
            elif isinstance(record, OffsetCommitRecord):
                latest.offsets[(record.topic, record.partition)] = record
            elif isinstance(record, OffsetTombstone):
                latest.offsets.pop((record.topic, record.partition), None)
            else:
                latest.group = record
        if latest.group is None and not latest.offsets:
            self._groups.pop(key, None)
        else:
            self._groups[key] = latest

    def records_of(self, key: GroupKey) -> list[Record]:
        latest = self._groups.get(key)
        if latest is None:
            return []
        head: list[Record] = [latest.group] if latest.group is not None else []
        return head + list(latest.offsets.values())

    def keys(self) -> list[GroupKey]:
        return list(self._groups)

    def __len__(self) -> int:
        return len(self._groups)
