"""Coordinator log entries: a group's records as CBOR, their compaction keys, and the live view.

Encoding
--------
An entry is one record of one group, as a CBOR array
``[record_type, version, org_id, group_id, *fields]`` where ``fields`` are the record
dataclass's fields in declaration order (so ``GroupMetadataRecord.members`` is an array of
8-element arrays). Type tags follow Kafka's ``__consumer_offsets`` api keys where Kafka has one:
1 OffsetCommit, 2 GroupMetadata, 3 OffsetTombstone, 4 GroupTombstone; the KIP-848 consumer-group
records keep Kafka's numbers where they are free (5 member metadata, 6 target-assignment
metadata, 7 target-assignment member, 8 current member assignment) and take 9 (group metadata),
10 (member tombstone) and 11 (consumer-state tombstone). Transactional offsets take 20 (a
pending transactional offset), 21 (a transaction's end marker), 22 (a deleted pending
offset) and 23 (a producer's latest marker epoch). KIP-932 share groups take 30 (group
metadata), 31 (a share partition's state) and 32 (its tombstone). A change of a type's fields
is a new version, never a reinterpretation of an old one: new fields go at the end, the newest
version is written, and an older version still decodes (the fields it lacks take their
defaults).
GroupMetadata is at version 1 (it added when the rebalance began and who departed), consumer
member metadata at version 1 (it added a classic-protocol member's session timeout and
protocols, for online migration), the transaction record at version 1 (it added the client's
transaction version and the previous and next producer ids, for transactions v2); every other
type is at version 0.
Type 25 is a transactional id's state (transaction/records.py), stored in the transaction log,
a log of its own (see docs/transactions.md).

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
offsets, ``(org, group)`` for the group record (classic or consumer: one group record per group),
``(org, group, 0, 0)`` for a consumer group's target-assignment metadata and
``(org, group, 0, 1, member, kind)`` for its member records, ``(org, group, 20, producer, topic,
partition)`` for a pending transactional offset, ``(org, group, 23, producer)`` for a producer's
latest marker epoch. A tombstone deletes every earlier
entry whose key starts with its own, so a GroupTombstone wipes the group record and all of the
group's offsets, a ConsumerMemberTombstone ``(org, group, 0, 1, member)`` a member's three
records, a ConsumerStateTombstone ``(org, group, 0)`` all consumer-group records, and a
TxnMarkerRecord ``(org, group, 20, producer)`` the producer's pending offsets.

The live view
-------------
`LatestRecords` (coordinator/latest.py) is what a fully compacted log holds, in memory, with the
same keys: per group the latest group record, the latest consumer-group record per key and the
latest committed offset per partition. ``records_of`` returns the group record first, then the
consumer-group records, then the offsets, which `coordinator.apply.replay` folds into the group.
Tombstones are applied, not kept: replaying a deleted offset's absence is the same as replaying
its tombstone, and the view then stays as small as the live state.
"""

from __future__ import annotations

import dataclasses
import io
import re
from collections.abc import Callable, Iterable
from enum import IntEnum
from operator import attrgetter
from typing import Any

import cbor2

from ..classic_group.records import GroupMetadataRecord
from ..consumer_group.records import (
    ConsumerCurrentAssignmentRecord,
    ConsumerGroupMetadataRecord,
    ConsumerMemberMetadataRecord,
    ConsumerMemberTombstone,
    ConsumerStateTombstone,
    ConsumerTargetMemberRecord,
    ConsumerTargetMetadataRecord,
)
from ..coordinator.latest import (
    MEMBER_KIND,
    PENDING_TXN,
    PRODUCER_EPOCH,
    TARGET_METADATA_TAIL,
    CompactionKey,
    GroupRecords,
    LatestRecords,
    is_tombstone,
    key_tail,
)
from ..group_common.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record
from ..group_common.txn_offsets import (
    TxnMarkerRecord,
    TxnOffsetCommitRecord,
    TxnOffsetTombstone,
    TxnProducerEpochRecord,
)
from ..ids import GroupKey, LogKey
from ..share_group.records import (
    SHARE_PARTITION_TAIL,
    ShareGroupMetadataRecord,
    SharePartitionRecord,
    SharePartitionTombstone,
)
from ..transaction.records import TransactionRecord
from .coordinator_segments import CoordinatorLogError

__all__ = [
    "OFFSET_ENTRY_PATTERN",
    "RECORD_VERSION",
    "CompactionKey",
    "CoordinatorRecordError",
    "GroupRecords",
    "LatestRecords",
    "RecordType",
    "UnsupportedRecordError",
    "compaction_key",
    "decode_entry",
    "decode_stored",
    "decode_trusted",
    "encode_entry",
    "entry_compaction_key",
    "offset_key_bytes",
]

RECORD_VERSION = 0  # the version of every type but GroupMetadata (see the module docstring)


class RecordType(IntEnum):
    OFFSET_COMMIT = 1
    GROUP_METADATA = 2
    OFFSET_TOMBSTONE = 3
    GROUP_TOMBSTONE = 4
    CONSUMER_MEMBER_METADATA = 5
    CONSUMER_TARGET_METADATA = 6
    CONSUMER_TARGET_MEMBER = 7
    CONSUMER_CURRENT_ASSIGNMENT = 8
    CONSUMER_GROUP_METADATA = 9
    CONSUMER_MEMBER_TOMBSTONE = 10
    CONSUMER_STATE_TOMBSTONE = 11
    # transactional offsets (20-24)
    TXN_OFFSET_COMMIT = 20
    TXN_MARKER = 21
    TXN_OFFSET_TOMBSTONE = 22
    TXN_PRODUCER_EPOCH = 23
    # transactions (the transaction log): 25-29
    TRANSACTION = 25
    # KIP-932 share groups (share_group/records.py): 30-39
    SHARE_GROUP_METADATA = 30
    SHARE_PARTITION_STATE = 31
    SHARE_PARTITION_TOMBSTONE = 32


class CoordinatorRecordError(CoordinatorLogError, ValueError):
    """A payload that is not a well-formed coordinator entry."""


class UnsupportedRecordError(CoordinatorLogError):
    """A well-formed entry of a record type or version this broker does not know."""


# Field schemas: the exact types each field may decode to (so a bool is not an int).
_Kinds = frozenset[type]
_STR: _Kinds = frozenset({str})
_OPT_STR: _Kinds = frozenset({str, type(None)})
_INT: _Kinds = frozenset({int})
_BOOL: _Kinds = frozenset({bool})
_BYTES: _Kinds = frozenset({bytes})
_MEMBERS: _Kinds = frozenset()  # marker (by identity): GroupMetadataRecord's member rows
_MEMBER_ROW = (_STR, _OPT_STR, _STR, _STR, _INT, _INT, _BYTES, _BYTES)
_NAMES: _Kinds = frozenset()  # marker: an array of strings
_PARTITIONS: _Kinds = frozenset()  # marker: [[topic id (16 bytes), [partition, ...]], ...]
_DEPARTED: _Kinds = frozenset()  # marker: [[member id, why], ...]
_TXN_PARTITIONS: _Kinds = frozenset()  # marker: [[topic name, [partition, ...]], ...]
_PROTOCOLS: _Kinds = frozenset()  # marker: [[protocol name, metadata bytes], ...]
_MEMBER_METADATA_V0 = (_STR, _STR, _OPT_STR, _OPT_STR, _STR, _STR, _NAMES, _OPT_STR, _INT, _OPT_STR)
_STATE_BATCHES: _Kinds = frozenset()  # marker: [[first, last, state, delivery count], ...]
_Schema = tuple[_Kinds, ...]
_GROUP_METADATA_V0 = (_STR, _STR, _OPT_STR, _INT, _OPT_STR, _OPT_STR, _INT, _MEMBERS, _STR)
_TRANSACTION_V0 = (_STR, _INT, _INT, _INT, _INT, _STR, _TXN_PARTITIONS, _NAMES, _INT, _INT)
# The schema of every version of a type, oldest first; a record is written at its last.
_SCHEMAS: dict[type, tuple[RecordType, tuple[_Schema, ...]]] = {
    OffsetCommitRecord: (
        RecordType.OFFSET_COMMIT,
        ((_STR, _STR, _INT, _INT, _INT, _OPT_STR, _INT),),
    ),
    GroupMetadataRecord: (
        RecordType.GROUP_METADATA,
        (_GROUP_METADATA_V0, (*_GROUP_METADATA_V0, _INT, _DEPARTED)),
    ),
    OffsetTombstone: (RecordType.OFFSET_TOMBSTONE, ((_STR, _STR, _INT),)),
    GroupTombstone: (RecordType.GROUP_TOMBSTONE, ((_STR,),)),
    ConsumerMemberMetadataRecord: (
        RecordType.CONSUMER_MEMBER_METADATA,
        (_MEMBER_METADATA_V0, (*_MEMBER_METADATA_V0, _INT, _PROTOCOLS)),
    ),
    ConsumerTargetMetadataRecord: (RecordType.CONSUMER_TARGET_METADATA, ((_STR, _INT, _INT),)),
    ConsumerTargetMemberRecord: (
        RecordType.CONSUMER_TARGET_MEMBER,
        ((_STR, _STR, _PARTITIONS),),
    ),
    ConsumerCurrentAssignmentRecord: (
        RecordType.CONSUMER_CURRENT_ASSIGNMENT,
        ((_STR, _STR, _INT, _INT, _INT, _PARTITIONS, _PARTITIONS),),
    ),
    ConsumerGroupMetadataRecord: (
        RecordType.CONSUMER_GROUP_METADATA,
        ((_STR, _STR, _INT, _INT, _STR, _INT),),
    ),
    ConsumerMemberTombstone: (RecordType.CONSUMER_MEMBER_TOMBSTONE, ((_STR, _STR),)),
    ConsumerStateTombstone: (RecordType.CONSUMER_STATE_TOMBSTONE, ((_STR,),)),
    TxnOffsetCommitRecord: (
        RecordType.TXN_OFFSET_COMMIT,
        ((_STR, _INT, _INT, _STR, _INT, _INT, _INT, _OPT_STR, _INT),),
    ),
    TxnMarkerRecord: (RecordType.TXN_MARKER, ((_STR, _INT, _INT, _BOOL),)),
    TxnOffsetTombstone: (RecordType.TXN_OFFSET_TOMBSTONE, ((_STR, _INT, _STR, _INT),)),
    TxnProducerEpochRecord: (RecordType.TXN_PRODUCER_EPOCH, ((_STR, _INT, _INT),)),
    TransactionRecord: (
        RecordType.TRANSACTION,
        (_TRANSACTION_V0, (*_TRANSACTION_V0, _INT, _INT, _INT)),
    ),
    ShareGroupMetadataRecord: (RecordType.SHARE_GROUP_METADATA, ((_STR, _STR, _INT),)),
    SharePartitionRecord: (
        RecordType.SHARE_PARTITION_STATE,
        ((_STR, _STR, _INT, _INT, _STATE_BATCHES),),
    ),
    SharePartitionTombstone: (RecordType.SHARE_PARTITION_TOMBSTONE, ((_STR, _STR, _INT),)),
}
_BY_TAG: dict[int, tuple[type, tuple[_Schema, ...]]] = {
    tag: (cls, schemas) for cls, (tag, schemas) in _SCHEMAS.items()
}


def _field_getter(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    """A record's fields as a tuple, in one C call (attrgetter of one name is no tuple)."""
    names = [f.name for f in dataclasses.fields(cls)]
    if len(names) == 1:
        one: Callable[[Any], Any] = attrgetter(names[0])
        return lambda record: (one(record),)
    return attrgetter(*names)


# An entry's head (type tag, schema version) and field getter per class: every commit
# encodes one entry, so nothing here is looked up or converted per call.
_ENCODING: dict[type, tuple[int, int, Callable[[Any], tuple[Any, ...]]]] = {
    cls: (int(tag), len(schemas) - 1, _field_getter(cls))
    for cls, (tag, schemas) in _SCHEMAS.items()
}


def encode_entry(key: LogKey, record: Record) -> bytes:
    tag, version, fields = _ENCODING[type(record)]
    return cbor2.dumps((tag, version, key[0], key[1], *fields(record)))


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
    cls, schemas = _BY_TAG[tag]
    if type(version) is not int or not 0 <= version < len(schemas):
        raise UnsupportedRecordError(f"unknown version {version!r} of {cls.__name__}")
    schema = schemas[version]
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
        elif kinds is _NAMES:
            values[i] = _names(value, what)
        elif kinds is _PARTITIONS:
            values[i] = _partition_rows(value, what)
        elif kinds is _DEPARTED:
            values[i] = _departed(value, what)
        elif kinds is _TXN_PARTITIONS:
            values[i] = _txn_partitions(value, what)
        elif kinds is _PROTOCOLS:
            values[i] = _protocols(value, what)
        elif kinds is _STATE_BATCHES:
            values[i] = _state_batches(value, what)
        elif type(value) not in kinds:
            raise CoordinatorRecordError(f"{what}: field {i} is {_preview(value)}")
    return values


def _member_row(row: Any) -> tuple[Any, ...]:
    if type(row) is not list:
        raise CoordinatorRecordError(f"member row {_preview(row)} is not an array")
    return tuple(_checked(row, _MEMBER_ROW, "member row"))


def _names(value: Any, what: str) -> tuple[str, ...]:
    if type(value) is not list or any(type(v) is not str for v in value):
        raise CoordinatorRecordError(f"{what}: names are {_preview(value)}")
    return tuple(value)


def _departed(value: Any, what: str) -> tuple[tuple[str, str], ...]:
    if type(value) is not list or any(
        type(row) is not list or len(row) != 2 or any(type(v) is not str for v in row)
        for row in value
    ):
        raise CoordinatorRecordError(f"{what}: departed are {_preview(value)}")
    return tuple((row[0], row[1]) for row in value)


def _txn_partitions(value: Any, what: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    if type(value) is not list or any(
        type(row) is not list
        or len(row) != 2
        or type(row[0]) is not str
        or type(row[1]) is not list
        or any(type(p) is not int for p in row[1])
        for row in value
    ):
        raise CoordinatorRecordError(f"{what}: partitions are {_preview(value)}")
    return tuple((row[0], tuple(row[1])) for row in value)


def _protocols(value: Any, what: str) -> tuple[tuple[str, bytes], ...]:
    if type(value) is not list or any(
        type(row) is not list
        or len(row) != 2
        or type(row[0]) is not str
        or type(row[1]) is not bytes
        for row in value
    ):
        raise CoordinatorRecordError(f"{what}: protocols are {_preview(value)}")
    return tuple((row[0], row[1]) for row in value)


def _state_batches(value: Any, what: str) -> tuple[tuple[int, int, int, int], ...]:
    if type(value) is not list or any(
        type(row) is not list or len(row) != 4 or any(type(v) is not int for v in row)
        for row in value
    ):
        raise CoordinatorRecordError(f"{what}: state batches are {_preview(value)}")
    return tuple((row[0], row[1], row[2], row[3]) for row in value)


def _partition_rows(value: Any, what: str) -> tuple[tuple[bytes, tuple[int, ...]], ...]:
    if type(value) is not list:
        raise CoordinatorRecordError(f"{what}: partitions are {_preview(value)}")
    rows = []
    for row in value:
        if (
            type(row) is not list
            or len(row) != 2
            or type(row[0]) is not bytes
            or len(row[0]) != 16
            or type(row[1]) is not list
            or any(type(p) is not int for p in row[1])
        ):
            raise CoordinatorRecordError(f"{what}: partition row {_preview(row)}")
        rows.append((row[0], tuple(row[1])))
    return tuple(rows)


# -- bulk recognition (start-up replay) -----------------------------------------------------
#
# Replay reads every entry, and most of a log is OffsetCommit entries superseded later on; one C
# pass of a regular expression over a segment recognises them far faster than decoding each
# (see CoordinatorSegments.open's ``bulk``). The pattern accepts only what `decode_entry`
# accepts: the exact arity, type and version, ints where the schema has ints, and text strings of
# definite length (under 256 bytes) that are ASCII, so valid UTF-8. Anything else (longer or
# non-ASCII strings, big numbers as tags, other types) is left to `decode_entry`.


def _either(arms: Iterable[bytes]) -> bytes:
    return b"(?:" + b"|".join(arms) + b")"


def _ascii_text(head: bytes, length: int) -> bytes:
    return re.escape(head) + rb"[\x00-\x7f]" + b"{%d}" % length


_INT_RE = _either(
    [
        rb"[\x00-\x17\x20-\x37]",  # major types 0 and 1, value in the head
        rb"[\x18\x38].",
        rb"[\x19\x39].{2}",
        rb"[\x1a\x3a].{4}",
        rb"[\x1b\x3b].{8}",
    ]
)
_TEXT_RE = _either(
    [_ascii_text(bytes([0x60 + n]), n) for n in range(24)]
    + [rb"\x78" + _either(_ascii_text(bytes([n]), n) for n in range(24, 256))]
)
_NULL_RE = rb"\xf6"


def _head(cls: type) -> bytes:
    """Array header, type tag and version of an entry of ``cls`` (single bytes for these)."""
    tag, schemas = _SCHEMAS[cls]
    arity = 4 + len(schemas[-1])
    assert arity < 24 and tag < 24 and len(schemas) == 1
    return re.escape(bytes([0x80 + arity, tag, 0]))


# (org, group, group id, topic, partition): the part of an offset entry that makes its key
_OFFSET_KEY_RE = _INT_RE + _TEXT_RE * 3 + _INT_RE
OFFSET_ENTRY_PATTERN = (
    _either([_head(OffsetCommitRecord), b"(?P<tombstone>" + _head(OffsetTombstone) + b")"])
    + b"(?P<key>"
    + _OFFSET_KEY_RE
    + b")(?(tombstone)|"
    + _INT_RE * 2  # offset, leader epoch
    + _either([_TEXT_RE, _NULL_RE])  # metadata
    + _INT_RE  # commit timestamp
    + b")"
)
"""One OffsetCommit or OffsetTombstone payload that `decode_entry` accepts; the group ``key``
is its (org, group, group id, topic, partition) as encoded: `offset_key_bytes`."""


def offset_key_bytes(key: GroupKey, record: OffsetCommitRecord | OffsetTombstone) -> bytes:
    """The ``key`` group of `OFFSET_ENTRY_PATTERN` for an offset entry, as cbor2 encodes it."""
    fields = (key.org_id, key.group_id, record.group_id, record.topic, record.partition)
    return b"".join(map(cbor2.dumps, fields))


def decode_stored(payload: bytes) -> tuple[GroupKey, Record, bytes]:
    """`decode_entry`, keeping the payload (for a view of encoded entries)."""
    key, record = decode_entry(payload)
    return key, record, payload


def decode_trusted(payloads: list[bytes]) -> list[Record]:
    """The records of payloads that decoded (or were encoded) before: one CBOR pass for all,
    with OffsetCommit records built directly and any other type through `decode_entry`."""
    if not payloads:
        return []
    rows = cbor2.loads(b"\x9f" + b"".join(payloads) + b"\xff")  # an indefinite array
    return [
        OffsetCommitRecord(*row[4:]) if row[0] == _OFFSET_COMMIT else decode_entry(payload)[1]
        for row, payload in zip(rows, payloads, strict=True)
    ]


_OFFSET_COMMIT = int(RecordType.OFFSET_COMMIT)


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


# -- compaction ------------------------------------------------------------------------------


def compaction_key(key: GroupKey, record: Record) -> tuple[CompactionKey, bool]:
    """(hierarchical key, is a tombstone) of one entry."""
    return (key.org_id, key.group_id, *key_tail(record)), is_tombstone(record)


_TRANSACTIONAL = frozenset(
    {TxnOffsetCommitRecord, TxnMarkerRecord, TxnOffsetTombstone, TxnProducerEpochRecord}
)


def entry_compaction_key(payload: bytes) -> tuple[CompactionKey, bool]:
    """`compaction_key` of an encoded entry, for `CoordinatorSegments.compact_sealed`.

    Compaction reads every sealed entry, so this checks only what it uses and builds no record.
    """
    cls, _, items = _unpack(payload)
    head = (items[2], items[3])
    if cls is OffsetCommitRecord or cls is OffsetTombstone:
        topic, partition = items[5:7] if len(items) >= 7 else (None, None)
        if type(topic) is not str or type(partition) is not int:
            raise CoordinatorRecordError(f"bad offset key ({topic!r}, {partition!r})")
        return (*head, topic, partition), cls is OffsetTombstone
    if cls in MEMBER_KIND or cls is ConsumerMemberTombstone:
        member_id = items[5] if len(items) >= 6 else None
        if type(member_id) is not str:
            raise CoordinatorRecordError(f"bad member key {member_id!r}")
        if cls is ConsumerMemberTombstone:
            return (*head, 0, 1, member_id), True
        return (*head, 0, 1, member_id, MEMBER_KIND[cls]), False
    if cls is ConsumerTargetMetadataRecord:
        return (*head, *TARGET_METADATA_TAIL), False
    if cls is ConsumerStateTombstone:
        return (*head, 0), True
    if cls in _TRANSACTIONAL:
        producer_id = items[5] if len(items) >= 6 else None
        if type(producer_id) is not int:
            raise CoordinatorRecordError(f"bad producer id {producer_id!r}")
        if cls is TxnProducerEpochRecord:
            return (*head, PRODUCER_EPOCH, producer_id), False
        if cls is TxnMarkerRecord:
            return (*head, PENDING_TXN, producer_id), True
        at = 7 if cls is TxnOffsetCommitRecord else 6  # after the producer epoch, if any
        topic, partition = items[at : at + 2] if len(items) >= at + 2 else (None, None)
        if type(topic) is not str or type(partition) is not int:
            raise CoordinatorRecordError(f"bad pending offset key ({topic!r}, {partition!r})")
        tombstone = cls is TxnOffsetTombstone
        return (*head, PENDING_TXN, producer_id, topic, partition), tombstone
    if cls is SharePartitionRecord or cls is SharePartitionTombstone:
        topic, partition = items[5:7] if len(items) >= 7 else (None, None)
        if type(topic) is not str or type(partition) is not int:
            raise CoordinatorRecordError(f"bad share partition key ({topic!r}, {partition!r})")
        return (*head, SHARE_PARTITION_TAIL, topic, partition), cls is SharePartitionTombstone
    return head, cls is GroupTombstone
