"""What a client can observe of a response, without what differs between any two brokers.

`Normaliser.plain(entity)` turns a decoded kio entity into plain JSON values (dicts, lists,
strings, numbers): error codes by name, durations in milliseconds, records decoded. Values a
broker picks for itself (member ids, producer ids, topic ids, cluster ids, hosts, ports,
times it stamps) become placeholders numbered in order of first sight, so the same member id
twice in a scenario is still seen as the same (`<member 1>`), but no two brokers' ids are
compared. So do the epochs of KIP-848 and share groups, which a client only compares with
the ones it was given (Kafka's first is 2, ours 1: a scenario records that once, raw), also
where an error message quotes them. Throttle times are left out.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import re
import uuid
from typing import Any

from rafka_actors.storage.record_batch import parse_header, split_batches

from ..batch_builder import decode_batches

# field name -> placeholder kind, for fields kio types as plain strings or integers
_CHOSEN_BY_BROKER = {
    "member_id": "member",
    "leader": "member",  # JoinGroup's leader is a member id
    "assigned_member_id": "member",
    "producer_id": "producer",
    "cluster_id": "cluster",
    "host": "host",
    "client_host": "host",
    "port": "port",
    "last_timestamp": "time",  # DescribeProducers: the producer's last batch, stamped by the client
    "member_epoch": "epoch",
    "group_epoch": "epoch",
    "assignment_epoch": "epoch",
}
_QUOTED_NUMBER = re.compile(r"\((\d+)\)")
_LEFT_OUT = frozenset({"throttle_time"})
_NIL_UUID = uuid.UUID(int=0)


class Normaliser:
    """One per broker and scenario: its placeholders are numbered within the scenario."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, object], str] = {}

    def placeholder(self, kind: str, value: object) -> str:
        key = (kind, value)
        if key not in self._seen:
            count = sum(1 for seen_kind, _ in self._seen if seen_kind == kind)
            self._seen[key] = f"<{kind} {count + 1}>"
        return self._seen[key]

    def plain(self, value: Any, name: str = "", kafka_type: str = "") -> Any:
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._entity(value)
        if isinstance(value, tuple | list):
            return [self.plain(item, name, kafka_type) for item in value]
        return self._leaf(value, name, kafka_type)

    def _entity(self, entity: Any) -> dict[str, Any]:
        out = {}
        for field in dataclasses.fields(entity):
            if field.name in _LEFT_OUT:
                continue
            kafka_type = field.metadata.get("kafka_type", "")
            out[field.name] = self.plain(getattr(entity, field.name), field.name, kafka_type)
        return out

    def _leaf(self, value: Any, name: str, kafka_type: str) -> Any:
        if value is None:
            return None
        if isinstance(value, enum.Enum):
            return value.name
        if isinstance(value, uuid.UUID):
            return "<nil uuid>" if value == _NIL_UUID else self.placeholder("uuid", value)
        if isinstance(value, datetime.datetime):  # a time the broker stamped, or -1 for none
            ms = round(value.timestamp() * 1000)
            return ms if ms <= 0 else self.placeholder("time", ms)
        if isinstance(value, datetime.timedelta):
            return round(value.total_seconds() * 1000)
        if kafka_type == "records":
            return [self._batch(batch) for batch in split_batches(value)]
        if isinstance(value, bytes):
            return value.hex()
        if name == "error_message" and isinstance(value, str):
            return _QUOTED_NUMBER.sub(self._quoted_epoch, value)
        kind = _CHOSEN_BY_BROKER.get(name)
        if kind == "host" and isinstance(value, str) and value.startswith("/"):
            return "/" + self.placeholder(kind, value[1:])  # Kafka's "/127.0.0.1"
        if kind is not None and value not in ("", -1) and not (kind == "epoch" and value <= 0):
            return self.placeholder(kind, value)
        return value

    def _quoted_epoch(self, match: re.Match[str]) -> str:
        known = self._seen.get(("epoch", int(match[1])))
        return f"({known})" if known else match[0]

    def _batch(self, batch: memoryview) -> dict[str, Any]:
        """A stored batch as a client reads it: its producer, flags, and records (a control
        batch's marker; its time is the broker's)."""
        header = parse_header(batch)
        control = bool(header.attributes & _CONTROL)
        records = decode_batches(bytes(batch))
        out: dict[str, Any] = {
            "offsets": [header.base_offset, header.base_offset + header.last_offset_delta],
            "producer": self._leaf(header.producer_id, "producer_id", ""),
            "epoch": header.producer_epoch,
            "sequence": header.base_sequence,
            "transactional": bool(header.attributes & _TRANSACTIONAL),
        }
        if control:
            out["markers"] = [_MARKERS.get(bytes(r.key or b"")[2:], r.key) for r in records]
        else:
            out["records"] = [
                [r.offset, r.timestamp, _text(r.key), _text(r.value)] for r in records
            ]
        return out


_TRANSACTIONAL, _CONTROL = 0x10, 0x20
_MARKERS = {b"\x00\x00": "abort", b"\x00\x01": "commit"}


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="backslashreplace")
