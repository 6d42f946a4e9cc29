"""One share-partition's delivery state (KIP-932): which records are handed out to whom.

A share partition is a window over a topic partition's log, `[start_offset, end_offset)`.
Every record below `start_offset` is done with (acknowledged or archived); every record at
or past `end_offset` has never been handed out (Available, delivery count 0). Each record in
the window has a state of its own:

- Available: may be acquired by the next ShareFetch;
- Acquired: handed to one member, locked until its deadline
  (`group.share.record.lock.duration.ms`); its delivery count was raised when it was acquired;
- Acknowledged: accepted by its member, never delivered again;
- Archived: rejected, a gap, released past `group.share.delivery.count.limit`, or an aborted
  transaction's (a read_committed group never hands those out).

A release (the member's RELEASE, an expired lock, the member's departure) makes a record
Available again unless its delivery count has reached the limit, in which case it is
archived, as Kafka's SharePartition does. Whenever the records at the window's start are all
done, the window's start moves up past them.

Pure: the time comes in as an argument, and a change returns nothing but the new state; the
caller writes `snapshot()` to the coordinator log. A snapshot keeps acquired records as
Acquired, with their delivery counts (`of_snapshot` reads it back so); a lock does not survive
a restart, so `release_locks` then releases them as an expired lock would: a record acquired
but not acknowledged before a crash is delivered again with its count carried on, or archived
if that count reached the limit.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Final

# Record states, with Kafka's RecordState ids (they are what a snapshot stores).
AVAILABLE: Final = 0
ACQUIRED: Final = 1
ACKNOWLEDGED: Final = 2
ARCHIVED: Final = 4
STATE_NAMES: Final = {AVAILABLE: "Available", ACQUIRED: "Acquired"}
STATE_NAMES.update({ACKNOWLEDGED: "Acknowledged", ARCHIVED: "Archived"})

# Acknowledge types of ShareFetch / ShareAcknowledge (Kafka's AcknowledgeType).
GAP: Final = 0
ACCEPT: Final = 1
RELEASE: Final = 2
REJECT: Final = 3

# (first offset, last offset, state, delivery count): a run of records alike, as stored.
StateBatch = tuple[int, int, int, int]
# (first offset, last offset, delivery count): what one member acquired, as ShareFetch says.
Acquired = tuple[int, int, int]


@dataclass(slots=True)
class InFlight:
    state: int
    delivery_count: int
    member_id: str = ""  # who holds it while Acquired
    lock_deadline: int = 0  # when an Acquired record's lock expires (ms)


class InvalidRecordState(Exception):
    """An acknowledgement of a record the member does not hold (Kafka: INVALID_RECORD_STATE)."""


@dataclass(slots=True)
class SharePartition:
    start_offset: int
    records: dict[int, InFlight] = field(default_factory=dict)  # every offset of the window
    end_offset: int = -1  # set from start_offset when -1

    def __post_init__(self) -> None:
        if self.end_offset < self.start_offset:
            self.end_offset = self.start_offset

    # -- reading ------------------------------------------------------------------------

    def fetch_offset(self) -> int:
        """Where the next read of the log should start: the first Available record."""
        for offset in range(self.start_offset, self.end_offset):
            if self.records[offset].state == AVAILABLE:
                return offset
        return self.end_offset

    def in_flight(self) -> int:
        return self.end_offset - self.start_offset

    def unacknowledged(self, log_end_offset: int) -> int:
        """Records not done with yet: the share lag up to the log's end."""
        pending = sum(1 for r in self.records.values() if r.state in (AVAILABLE, ACQUIRED))
        return pending + max(0, log_end_offset - self.end_offset)

    def next_deadline(self) -> int | None:
        deadlines = [r.lock_deadline for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    # -- changes ------------------------------------------------------------------------

    def acquire(
        self,
        member_id: str,
        first: int,
        last: int,
        now: int,
        lock_ms: int,
        max_records: int,
        max_locks: int,
        aborted: Iterable[tuple[int, int]] = (),
    ) -> list[Acquired]:
        """Acquire the Available records of `[first, last]` (what a read of the log found)
        for `member_id`, at most `max_records` of them and no more than `max_locks` in the
        window; each one's delivery count goes up by one. Returns what was acquired.
        An Available record in one of the `aborted` ranges (an aborted transaction's, for a
        read_committed group) is archived instead, as Kafka's SharePartition does."""
        if last < first or max_records <= 0:
            return []
        skip = _offsets_in(aborted, first, last)
        first = max(first, self.start_offset)
        if first > self.end_offset:
            # the log's start moved past records never handed out (retention): skipped
            self._archive_unseen(first)
        taken: list[int] = []
        offset = first
        while offset <= last and len(taken) < max_records:
            if offset >= self.end_offset:
                if self.in_flight() >= max_locks:
                    break
                self.records[offset] = InFlight(AVAILABLE, 0)
                self.end_offset = offset + 1
            record = self.records[offset]
            if record.state == AVAILABLE and offset in skip:
                record.state = ARCHIVED
            elif record.state == AVAILABLE:
                record.state = ACQUIRED
                record.delivery_count += 1
                record.member_id = member_id
                record.lock_deadline = now + lock_ms
                taken.append(offset)
            offset += 1
        if skip:
            self._advance()
        return _runs(taken, self.records)

    def _archive_unseen(self, first: int) -> None:
        if not self.records:  # nothing in flight: the window simply starts later
            self.start_offset = self.end_offset = first
            return
        for offset in range(self.end_offset, first):
            self.records[offset] = InFlight(ARCHIVED, 0)
        self.end_offset = first

    def acknowledge(
        self, member_id: str, first: int, last: int, types: tuple[int, ...], limit: int
    ) -> None:
        """Acknowledge `[first, last]` for `member_id`: one type for the whole range, or one
        per record. Every record of it must be Acquired by that member (or, for a GAP, already
        Archived), else nothing changes and InvalidRecordState is raised."""
        count = last - first + 1
        if count <= 0 or len(types) not in (1, count) or any(t not in _ACK for t in types):
            raise InvalidRecordState(f"bad acknowledgement batch {first}-{last} {types}")
        if first < self.start_offset or last >= self.end_offset:  # (and no range to walk)
            raise InvalidRecordState(f"offsets {first}-{last} are not in flight")
        for offset in range(first, last + 1):
            record = self.records.get(offset)
            gap = types[0 if len(types) == 1 else offset - first] == GAP
            if record is None or record.state != ACQUIRED or record.member_id != member_id:
                if gap and record is not None and record.state == ARCHIVED:
                    continue  # a gap acknowledged twice is harmless
                raise InvalidRecordState(f"offset {offset} is not acquired by this member")
        for offset in range(first, last + 1):
            record = self.records[offset]
            kind = types[0 if len(types) == 1 else offset - first]
            if kind == ACCEPT:
                _settle(record, ACKNOWLEDGED)
            elif kind == RELEASE:
                _release(record, limit)
            else:  # REJECT, GAP
                _settle(record, ARCHIVED)
        self._advance()

    def release_expired(self, now: int, limit: int) -> int:
        """Release every record whose lock has expired; returns how many."""
        released = 0
        for record in self.records.values():
            if record.state == ACQUIRED and record.lock_deadline <= now:
                _release(record, limit)
                released += 1
        if released:
            self._advance()
        return released

    def release_member(self, member_id: str, limit: int) -> int:
        """Release everything a departed member holds; returns how many."""
        released = 0
        for record in self.records.values():
            if record.state == ACQUIRED and record.member_id == member_id:
                _release(record, limit)
                released += 1
        if released:
            self._advance()
        return released

    def _advance(self) -> None:
        records = self.records
        start = self.start_offset
        while start < self.end_offset and records[start].state in _DONE:
            del records[start]
            start += 1
        self.start_offset = start

    # -- what is stored -----------------------------------------------------------------

    def snapshot(self) -> tuple[StateBatch, ...]:
        """The window's records as runs of (first, last, state, delivery count), holders
        and locks left out (they are not durable)."""
        runs: list[StateBatch] = []
        for offset in range(self.start_offset, self.end_offset):
            record = self.records[offset]
            state = record.state
            if (
                runs
                and runs[-1][1] == offset - 1
                and runs[-1][2:] == (state, record.delivery_count)
            ):
                runs[-1] = (runs[-1][0], offset, state, record.delivery_count)
            else:
                runs.append((offset, offset, state, record.delivery_count))
        return tuple(runs)

    @classmethod
    def of_snapshot(cls, start_offset: int, batches: Iterable[StateBatch]) -> SharePartition:
        """The partition a snapshot describes; its Acquired records have no holder."""
        partition = cls(start_offset)
        for first, last, state, count in batches:
            for offset in range(max(first, start_offset), last + 1):
                partition.records[offset] = InFlight(state, count)
            partition.end_offset = max(partition.end_offset, last + 1)
        for offset in range(start_offset, partition.end_offset):  # holes: never handed out
            partition.records.setdefault(offset, InFlight(AVAILABLE, 0))
        partition._advance()
        return partition

    def release_locks(self, limit: int) -> None:
        """After a restart: every Acquired record is released (its lock is gone), with the
        delivery count `limit`."""
        for record in self.records.values():
            if record.state == ACQUIRED:
                _release(record, limit)
        self._advance()

    def acquired_by(self, member_id: str) -> Iterator[int]:
        for offset, record in self.records.items():
            if record.state == ACQUIRED and record.member_id == member_id:
                yield offset


_ACK: Final = frozenset({GAP, ACCEPT, RELEASE, REJECT})
_DONE: Final = frozenset({ACKNOWLEDGED, ARCHIVED})


def _settle(record: InFlight, state: int) -> None:
    record.state = state
    record.member_id = ""
    record.lock_deadline = 0


def _release(record: InFlight, limit: int) -> None:
    _settle(record, ARCHIVED if record.delivery_count >= limit else AVAILABLE)


def _offsets_in(ranges: Iterable[tuple[int, int]], first: int, last: int) -> frozenset[int]:
    """The offsets of `ranges` within `[first, last]`."""
    return frozenset(
        offset for low, high in ranges for offset in range(max(low, first), min(high, last) + 1)
    )


def _runs(offsets: list[int], records: dict[int, InFlight]) -> list[Acquired]:
    """Consecutive offsets with the same delivery count, as ShareFetch's AcquiredRecords."""
    runs: list[Acquired] = []
    for offset in offsets:
        count = records[offset].delivery_count
        if runs and runs[-1][1] == offset - 1 and runs[-1][2] == count:
            runs[-1] = (runs[-1][0], offset, count)
        else:
            runs.append((offset, offset, count))
    return runs
