"""A hypothesis state machine drives one share partition (share_group/partition.py) against a
plain model: a dict of every offset's state, delivery count, holder and lock deadline.

Rules: members acquire what a read of the log found, acknowledge (ACCEPT, RELEASE, REJECT, GAP)
ranges they hold or do not hold, time passes and locks expire, a member leaves, and the
partition is replayed from its stored record (encoded and decoded as the coordinator log
does), which, like a broker restart, unlocks every acquired record and keeps its count.

Invariants, after every step: the partition's state equals the model's; a record accepted or
rejected is never acquired again; no delivery count goes past the limit; the window starts at
the first record not done with; the next fetch starts at the first Available record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from rafka_actors.ids import GroupKey
from rafka_actors.share_group import records as share_records
from rafka_actors.share_group.partition import (
    ACCEPT,
    ACKNOWLEDGED,
    ACQUIRED,
    ARCHIVED,
    AVAILABLE,
    GAP,
    REJECT,
    RELEASE,
    InvalidRecordState,
    SharePartition,
)
from rafka_actors.share_group.records import SharePartitionRecord
from rafka_actors.share_group.state import ShareGroup
from rafka_actors.storage.coordinator_records import decode_entry, encode_entry

LIMIT = 3
LOCK_MS = 100
MAX_LOCKS = 12
MEMBERS = ("m1", "m2", "m3")
KEY = GroupKey(0, "g")


@dataclass
class Model:
    state: int
    count: int
    member: str = ""
    deadline: int = 0


class SharePartitionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.partition = SharePartition(5)
        self.model: dict[int, Model] = {}  # every offset ever seen, from 5
        self.start = 5
        self.log_end = 5
        self.now = 1_000
        self.done: set[int] = set()  # accepted or archived: never to be acquired again

    # -- helpers ------------------------------------------------------------------------
    def _get(self, offset: int) -> Model:
        return self.model.setdefault(offset, Model(AVAILABLE, 0))

    def _release(self, m: Model) -> None:
        m.state = ARCHIVED if m.count >= LIMIT else AVAILABLE
        m.member, m.deadline = "", 0

    def _window_end(self) -> int:
        seen = [o for o, m in self.model.items() if m.count > 0 or m.state != AVAILABLE]
        return max(seen, default=self.start - 1) + 1

    # -- rules --------------------------------------------------------------------------
    @rule(n=st.integers(1, 8))
    def produce(self, n: int) -> None:
        self.log_end += n

    @rule(
        member=st.sampled_from(MEMBERS),
        skip=st.integers(0, 3),
        span=st.integers(0, 10),
        max_records=st.integers(1, 10),
        aborted=st.one_of(st.none(), st.tuples(st.integers(-2, 8), st.integers(0, 4))),
    )
    def acquire(
        self,
        member: str,
        skip: int,
        span: int,
        max_records: int,
        aborted: tuple[int, int] | None,
    ) -> None:
        """What a read found; with `aborted`, a run of it an aborted transaction's (a
        read_committed group), archived instead of acquired."""
        first = self.partition.fetch_offset() + skip
        last = min(first + span, self.log_end - 1)
        runs = [] if aborted is None else [(first + aborted[0], first + aborted[0] + aborted[1])]
        got = self.partition.acquire(
            member, first, last, self.now, LOCK_MS, max_records, MAX_LOCKS, runs
        )
        skipped = {o for low, high in runs for o in range(low, high + 1)}
        # the model: Available records of [first, last] in order, within the budgets
        expected: list[int] = []
        offset = max(first, self.start)
        end = self._window_end()
        if (
            last >= first and offset > end
        ):  # offsets the log no longer has (retention): archived, never read
            for gone in range(end, offset):
                self._get(gone).state = ARCHIVED
            self._settle()
            end = offset
        while offset <= last and len(expected) < max_records:
            if offset >= end:
                if end - self.start >= MAX_LOCKS:
                    break
                end = offset + 1
            m = self._get(offset)
            if m.state == AVAILABLE and offset in skipped:
                m.state = ARCHIVED
            elif m.state == AVAILABLE:
                expected.append(offset)
            offset += 1
        acquired = [o for f, la, _ in got for o in range(f, la + 1)]
        assert acquired == expected
        for o in expected:
            assert o not in self.done
            m = self._get(o)
            m.state, m.count, m.member, m.deadline = (
                ACQUIRED,
                m.count + 1,
                member,
                self.now + LOCK_MS,
            )
        for f, la, count in got:
            assert all(self.model[o].count == count for o in range(f, la + 1))
        self._settle()

    @rule(
        member=st.sampled_from(MEMBERS),
        data=st.data(),
        kind=st.sampled_from([ACCEPT, RELEASE, REJECT, GAP]),
        per_record=st.booleans(),
    )
    def acknowledge(self, member: str, data: st.DataObject, kind: int, per_record: bool) -> None:
        held = sorted(o for o, m in self.model.items() if m.state == ACQUIRED)
        candidates = held or [self.start]
        first = data.draw(st.sampled_from(candidates))
        last = first + data.draw(st.integers(0, 3))
        types = (kind,) * (last - first + 1) if per_record else (kind,)
        # every record held by this member; a GAP may also name a record already archived
        valid = all(
            (m := self.model.get(o)) is not None
            and (
                (m.state == ACQUIRED and m.member == member)
                or (kind == GAP and m.state == ARCHIVED)
            )
            for o in range(first, last + 1)
        )
        try:
            self.partition.acknowledge(member, first, last, types, LIMIT)
        except InvalidRecordState:
            assert not valid
            return
        assert valid
        for o in range(first, last + 1):
            m = self.model[o]
            if kind == ACCEPT:
                m.state, m.member, m.deadline = ACKNOWLEDGED, "", 0
            elif kind == RELEASE:
                self._release(m)
            else:
                m.state, m.member, m.deadline = ARCHIVED, "", 0
        self._settle()

    @rule(ms=st.integers(1, 150))
    def time_passes(self, ms: int) -> None:
        self.now += ms
        expected = self.partition.next_deadline()
        self.partition.release_expired(self.now, LIMIT)
        for m in self.model.values():
            if m.state == ACQUIRED and m.deadline <= self.now:
                self._release(m)
        self._settle()
        if expected is not None and expected > self.now:
            assert all(m.deadline > self.now for m in self.model.values() if m.state == ACQUIRED)

    @rule(member=st.sampled_from(MEMBERS))
    def member_leaves(self, member: str) -> None:
        self.partition.release_member(member, LIMIT)
        for m in self.model.values():
            if m.state == ACQUIRED and m.member == member:
                self._release(m)
        self._settle()

    @precondition(lambda self: True)
    @rule()
    def replay(self) -> None:
        """The broker restarts: the partition comes back from its stored record."""
        record = SharePartitionRecord(
            "g", "t", 0, self.partition.start_offset, self.partition.snapshot()
        )
        key, decoded = decode_entry(encode_entry(KEY, record))
        assert key == KEY and decoded == record
        assert isinstance(decoded, SharePartitionRecord)
        group = ShareGroup("g", "cgp_g")  # what start-up does with it (coordinator/apply.py)
        share_records.apply(group, decoded)
        share_records.on_loaded(group, LIMIT)
        self.partition = group.partitions[("t", 0)]
        for m in self.model.values():
            if m.state == ACQUIRED:
                self._release(m)  # count kept; archived at the limit
        self._settle()

    def _settle(self) -> None:
        for o, m in self.model.items():
            if m.state in (ACKNOWLEDGED, ARCHIVED):
                self.done.add(o)
        while self._get(self.start).state in (ACKNOWLEDGED, ARCHIVED):
            del self.model[self.start]
            self.start += 1

    # -- invariants ---------------------------------------------------------------------
    @invariant()
    def same_as_the_model(self) -> None:
        p = self.partition
        assert p.start_offset == self.start
        for offset in range(p.start_offset, p.end_offset):
            r, m = p.records[offset], self._get(offset)
            assert (r.state, r.delivery_count) == (m.state, m.count), offset
            if r.state == ACQUIRED:
                assert (r.member_id, r.lock_deadline) == (m.member, m.deadline)
        for offset, m in self.model.items():
            if offset >= p.end_offset:
                assert (m.state, m.count) == (AVAILABLE, 0)

    @invariant()
    def counts_within_the_limit(self) -> None:
        assert all(r.delivery_count <= LIMIT for r in self.partition.records.values())

    @invariant()
    def fetch_starts_at_the_first_available(self) -> None:
        p = self.partition
        available = [
            o for o in range(p.start_offset, p.end_offset) if p.records[o].state == AVAILABLE
        ]
        assert p.fetch_offset() == (available[0] if available else p.end_offset)

    @invariant()
    def the_window_starts_at_the_first_record_not_done(self) -> None:
        p = self.partition
        assert p.start_offset == p.end_offset or p.records[p.start_offset].state in (
            AVAILABLE,
            ACQUIRED,
        )


TestSharePartition = SharePartitionMachine.TestCase
TestSharePartition.settings = settings(
    max_examples=int(os.environ.get("RAFKA_PROPERTY_EXAMPLES", "100")),
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
