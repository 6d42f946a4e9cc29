"""Start-up replay of the coordinator log into a view of encoded entries, offsets in bulk.

The durable log keeps what a compacted log holds (`LatestRecords`, coordinator/latest.py) as the
payloads the records were written as: about a third of the memory of record objects, and
nothing to build at start-up for the many entries a later one supersedes. A group's payloads
are decoded when its actor starts (`decode_trusted`: they were checked when read or written).

Replay feeds the view from the segments (`CoordinatorSegments.open`): each strictly decoded entry
through `apply_entry`, and runs of offset entries recognised in bulk (`OFFSET_ENTRY_PATTERN`)
through `apply_run`, which does no more per entry than one ``dict.update`` keyed by the entry's
key bytes, so the last entry of a key wins, as in the log. `settle` then moves the survivors
into the view under their (group, (topic, partition)) keys, decoding only their keys; it runs at
the end, and before a group tombstone, the one non-offset record that deletes offsets.

Key bytes stand for keys only if no key was written in two ways (a non-minimal integer, or an
offset record whose group id is not its key's). cbor2 never does either, and `settle` checks:
two survivors with one key raise `AmbiguousKeys`, and the caller replays strictly.
"""

from __future__ import annotations

import cbor2

from ..coordinator.latest import LatestRecords
from ..group_common.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record
from ..ids import GroupKey
from .coordinator_records import OFFSET_ENTRY_PATTERN, RecordType, offset_key_bytes
from .coordinator_segments import Bulk

__all__ = ["AmbiguousKeys", "EntryReplay"]

_TOMBSTONE = RecordType.OFFSET_TOMBSTONE


class AmbiguousKeys(Exception):
    """Two offset entries have one key but different key bytes: replay strictly instead."""


class EntryReplay:
    """Replays decoded entries and runs of offset entries into ``view``, in log order."""

    def __init__(self, view: LatestRecords[bytes], *, bulk: bool = True) -> None:
        self.view = view
        self._offsets: dict[bytes, bytes] = {}  # key bytes -> latest offset entry, unsettled
        self.bulk = Bulk(OFFSET_ENTRY_PATTERN, self.apply_run) if bulk else None

    def apply_run(self, keys: list[bytes], payloads: list[bytes]) -> None:
        self._offsets.update(zip(keys, payloads, strict=True))

    def apply_entry(self, entry: tuple[GroupKey, Record, bytes]) -> None:
        key, record, payload = entry
        if self.bulk is not None and isinstance(record, OffsetCommitRecord | OffsetTombstone):
            self._offsets[offset_key_bytes(key, record)] = payload
            return
        if type(record) is GroupTombstone:
            self.settle()
        self.view.apply(key, (record,), (payload,))

    def settle(self) -> None:
        """Move the offsets replayed in bulk so far into the view."""
        offsets, self._offsets = self._offsets, {}
        if not offsets:
            return
        # Each key is 5 CBOR items (org, group, group id, topic, partition): one array each.
        keys = cbor2.loads(b"\x9f\x85" + b"\x85".join(offsets) + b"\xff")
        if len({(k[0], k[1], k[3], k[4]) for k in keys}) != len(keys):
            raise AmbiguousKeys(f"{len(keys)} offset keys written in more than one way")
        self.view.put_offsets(
            (org, group, topic, partition, None if payload[1] == _TOMBSTONE else payload)
            for (org, group, _, topic, partition), payload in zip(
                keys, offsets.values(), strict=True
            )
        )
