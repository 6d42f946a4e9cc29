"""Fuzzing the group state machine: random sequences of every op of group_common/ops.py, with
hostile field values and random time jumps, through the one pure entry point
`coordinator.machine.handle`, on both the classic and the KIP-848 consumer path (mixed in one
group, as a gateway may send both).

The clock moves as the group actor moves it: before each op, every deadline that falls due on
the way fires (`TimerFired`), each at its own time. Properties, after every step:

* `handle` never raises;
* every reply goes to a waiter that asked, at most once, and is the OpResp of that op's type;
* every record encodes with `encode_entry` and decodes back equal with `decode_entry`;
* replaying all records so far never raises, and gives a group of the same type with the
  same committed offsets and pending transactional offsets as the live one (a group that
  wrote no record yet replays to None);
* `next_deadline` is never in the past; firing due timers always ends (no group hangs).
"""

from __future__ import annotations

import uuid
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from rafka_actors.classic_group.consumer_protocol import encode_subscription
from rafka_actors.classic_group.state import ClassicGroup
from rafka_actors.consumer_group.ops import (
    ConsumerGroupDescribeOp,
    ConsumerGroupHeartbeatOp,
)
from rafka_actors.consumer_group.state import ConsumerGroup
from rafka_actors.coordinator import machine
from rafka_actors.coordinator.apply import replay
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    DeleteGroupOp,
    DescribeGroupOp,
    ExpireOffsetsOp,
    HeartbeatOp,
    JoinGroupOp,
    LeaveGroupOp,
    OffsetCommitOp,
    OffsetDeleteOp,
    OffsetFetchOp,
    SyncGroupOp,
    TimerFired,
    TxnMarkerOp,
    TxnOffsetCommitOp,
)
from rafka_actors.group_common.records import Record
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.group_common.txn_offsets import epochs_of, pending_of
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_records import decode_entry, encode_entry

from .budget import COUNTS, fuzz_settings

FOO = uuid.uuid5(uuid.NAMESPACE_DNS, "foo")
BAR = uuid.uuid5(uuid.NAMESPACE_DNS, "bar")
IMAGE = TopicImage.of(1, [TopicInfo("foo", FOO, 3), TopicInfo("bar", BAR, 1)])
MAX_TIMER_FIRINGS = 1000  # per step: more would mean a deadline that never moves on

# -- hostile values -----------------------------------------------------------------------
INT64 = st.integers(-(2**63), 2**63 - 1)
EDGE_INTS = st.sampled_from(
    [-(2**63), -(2**31), -3, -2, -1, 0, 1, 2, 999, 2**31 - 1, 2**31, 2**63 - 1]
)
INTS = st.one_of(EDGE_INTS, st.integers(-5, 50), INT64)
TIMEOUTS = st.one_of(st.sampled_from([1000, 6000, 10_000, 45_000, 300_000]), INTS)
NAMES = st.one_of(
    st.sampled_from(["", "a", "b", "m-1", "m-2", "ü😀\u0000", "x" * 300, "\ud7ff"]),
    st.text(max_size=12),
)
OPT_NAMES = st.none() | NAMES
TOPICS = st.one_of(st.sampled_from(["foo", "bar", "missing", ""]), st.text(max_size=8))
METADATA = st.one_of(
    st.just(encode_subscription(["foo", "bar"])),
    st.binary(max_size=64),
    st.just(b"\x00" * 100_000),
)
PROTOCOLS = st.lists(
    st.tuples(st.sampled_from(["range", "roundrobin", "", "ü"]) | NAMES, METADATA), max_size=3
).map(tuple)
REGEXES = st.one_of(
    st.sampled_from(["foo.*", ".*", "(", "[", "*", "(?P<", "a{99999999}", "(a+)+$", "\\"]),
    st.text(max_size=8),
)
UUIDS = st.one_of(st.sampled_from([FOO, BAR]), st.uuids())
OWNED = st.lists(
    st.tuples(UUIDS, st.lists(st.integers(-2, 5) | INTS, max_size=4).map(tuple)), max_size=3
).map(tuple)


def _member(data: st.DataObject, known: list[str]) -> str:
    return data.draw(st.sampled_from(known) | NAMES if known else NAMES)


def _epoch(data: st.DataObject, known: list[int]) -> int:
    return data.draw(st.sampled_from(known) | INTS if known else INTS)


def _op(data: st.DataObject, gid: str, members: list[str], epochs: list[int]) -> Any:
    kind = data.draw(st.integers(0, 15), label="op kind")
    draw = data.draw
    if kind == 0:
        return JoinGroupOp(
            gid,
            _member(data, members),
            draw(st.sampled_from(["consumer", "", "connect"]) | NAMES),
            draw(TIMEOUTS),
            draw(PROTOCOLS),
            draw(TIMEOUTS),
            draw(OPT_NAMES),
            draw(NAMES),
            draw(NAMES),
            draw(st.booleans()),
            draw(NAMES),
            draw(OPT_NAMES),
        )
    if kind == 1:
        assignments = st.lists(st.tuples(NAMES | st.sampled_from(members or [""]), METADATA))
        return SyncGroupOp(
            gid,
            _member(data, members),
            _epoch(data, epochs),
            tuple(draw(assignments.filter(lambda a: len(a) <= 3))),
            draw(OPT_NAMES),
            draw(st.none() | st.sampled_from(["consumer", ""])),
            draw(st.none() | st.sampled_from(["range", "x"])),
        )
    if kind == 2:
        return HeartbeatOp(gid, _member(data, members), _epoch(data, epochs), draw(OPT_NAMES))
    if kind == 3:
        leavers = st.tuples(NAMES | st.sampled_from(members or [""]), OPT_NAMES, OPT_NAMES)
        return LeaveGroupOp(gid, tuple(draw(st.lists(leavers, max_size=3))))
    if kind == 4:
        row = st.tuples(TOPICS, st.integers(-2, 4) | INTS, INTS, INTS, st.none() | NAMES)
        return OffsetCommitOp(
            gid,
            tuple(draw(st.lists(row, max_size=4))),
            _member(data, members),
            _epoch(data, epochs),
            draw(OPT_NAMES),
            draw(st.integers(0, 9) | INTS),
        )
    partitions = st.lists(st.tuples(TOPICS, st.integers(-2, 4) | INTS), max_size=4).map(tuple)
    if kind == 5:
        return OffsetFetchOp(
            gid,
            draw(st.none() | partitions),
            draw(st.booleans()),
            draw(st.none() | st.sampled_from(members or [""]) | NAMES),
            _epoch(data, epochs),
        )
    if kind == 6:
        return DescribeGroupOp(gid)
    if kind == 7:
        return DeleteGroupOp(gid)
    if kind == 8:
        return OffsetDeleteOp(gid, draw(partitions))
    if kind == 9:
        return ExpireOffsetsOp(draw(TIMEOUTS))
    if kind == 10:
        return ConsumerGroupDescribeOp(gid)
    if kind == 11:
        return TimerFired()
    producers = st.sampled_from([1, 2]) | INTS
    if kind == 12:  # producers' offsets: pending until their transaction's marker
        row = st.tuples(TOPICS, st.integers(-2, 4) | INTS, INTS, INTS, st.none() | NAMES)
        return TxnOffsetCommitOp(
            gid,
            draw(producers),
            draw(st.integers(0, 2) | INTS),
            tuple(draw(st.lists(row, max_size=4))),
            _member(data, members),
            _epoch(data, epochs),
            draw(OPT_NAMES),
            draw(st.integers(0, 6) | INTS),
            draw(NAMES),
        )
    if kind == 13:
        return TxnMarkerOp(draw(producers), draw(st.integers(0, 2) | INTS), draw(st.booleans()))
    return ConsumerGroupHeartbeatOp(
        gid,
        _member(data, members),
        draw(st.sampled_from([0, -1, -2]) | st.sampled_from(epochs or [0]) | INTS),
        draw(OPT_NAMES),
        draw(OPT_NAMES),
        draw(TIMEOUTS),
        draw(st.none() | st.lists(TOPICS, max_size=3).map(tuple)),
        draw(st.none() | REGEXES),
        draw(st.none() | st.sampled_from(["uniform", "range", "bogus", ""])),
        draw(st.none() | OWNED),
        draw(NAMES),
        draw(NAMES),
        draw(NAMES),
        draw(st.sampled_from([0, 1]) | INTS),
    )


class Run:
    """One group fed by the fuzzer, with everything needed to check the properties."""

    def __init__(self, gid: str, config: GroupConfig, now: int) -> None:
        self.key = GroupKey(0, gid)
        self.config = config
        self.now = now
        self.group: Any = None
        self.records: list[Record] = []
        self.asked: dict[int, Any] = {}  # waiter -> its op, until answered
        self.next_waiter = 1
        self.members: list[str] = []
        self.epochs: list[int] = []

    def step(self, op: Any, waiter: int) -> None:
        result = machine.handle(
            self.group,
            op,
            self.now,
            waiter,
            config=self.config,
            fresh_cgp_id=f"cgp_{waiter:026d}",
            topics=IMAGE,
        )
        COUNTS[f"group: {type(op).__name__}"] += 1
        if self.group is None and result.group is not None:  # it minted an id only for these
            assert machine.creates_group(op), f"{type(op).__name__} created a group"
        self.group = result.group
        for answered, response in result.replies:
            expected = self.asked.pop(answered, None)
            assert expected is not None, f"reply {response!r} to waiter {answered} that never asked"
            assert type(response) is type(expected.error_reply(0)), (expected, response)
            self._learn(response)
        for record in result.records:
            payload = encode_entry(self.key, record)
            assert decode_entry(payload) == (self.key, record)
            COUNTS["group: records round-tripped"] += 1
        self.records.extend(result.records)

    def _learn(self, response: Any) -> None:
        member = getattr(response, "member_id", None)
        if member and member not in self.members:
            self.members.append(member)
        for name in ("generation_id", "member_epoch"):
            epoch = getattr(response, name, None)
            if isinstance(epoch, int) and epoch not in self.epochs:
                self.epochs.append(epoch)

    def advance(self, to: int) -> None:
        """Fire every deadline due up to `to`, each at its own time, then set the clock."""
        for _ in range(MAX_TIMER_FIRINGS):
            deadline = machine.next_deadline(self.group)
            if deadline is None or deadline > to:
                break
            self.now = max(self.now, deadline)
            self.step(TimerFired(), -1)
        else:
            raise AssertionError(f"deadline {machine.next_deadline(self.group)} never moves on")
        self.now = to
        deadline = machine.next_deadline(self.group)
        assert deadline is None or deadline > self.now

    def send(self, op: Any) -> None:
        waiter = self.next_waiter
        self.next_waiter += 1
        if not isinstance(op, TimerFired):
            self.asked[waiter] = op
        self.step(op, waiter if not isinstance(op, TimerFired) else -1)
        deadline = machine.next_deadline(self.group)
        assert deadline is None or deadline >= self.now, (deadline, self.now)

    def check_replay(self) -> None:
        replayed = replay(self.records, self.now)
        live_offsets = {} if self.group is None else self.group.offsets
        if replayed is None:
            assert not live_offsets
            return
        assert self.group is not None, f"deleted group replays as {type(replayed).__name__}"
        assert type(replayed) is type(self.group)
        assert replayed.offsets == live_offsets
        assert {p: (t.producer_epoch, t.offsets) for p, t in pending_of(replayed).items()} == {
            p: (t.producer_epoch, t.offsets) for p, t in pending_of(self.group).items()
        }
        assert epochs_of(replayed) == epochs_of(self.group)
        COUNTS["group: replays compared"] += 1


GROUP_IDS = st.one_of(st.sampled_from(["g", "", "ü😀", "x" * 1000]), st.text(max_size=10))
JUMPS = st.one_of(
    st.just(0),
    st.integers(0, 100),
    st.sampled_from([999, 1000, 3000, 5000, 6000, 10_000, 45_000, 300_000]),
    st.integers(0, 2**40),
)


@fuzz_settings(300, deadline_ms=None)
@given(
    st.data(),
    GROUP_IDS,
    st.sampled_from([0, 3000]),
    st.sampled_from([0, 1000]),
    st.integers(0, 2**41),
)
def test_group_machine_survives_hostile_op_sequences(
    data: st.DataObject, gid: str, delay: int, assignment_interval: int, start: int
) -> None:
    config = GroupConfig(
        initial_rebalance_delay_ms=delay,
        min_session_timeout_ms=1000,
        consumer_assignment_interval_ms=assignment_interval,
        consumer_max_size=data.draw(st.sampled_from([2**31 - 1, 2])),
        max_size=data.draw(st.sampled_from([2**31 - 1, 2])),
    )
    run = Run(gid, config, start)
    COUNTS["group: sequences"] += 1
    for _ in range(data.draw(st.integers(1, 25), label="steps")):
        run.advance(run.now + data.draw(JUMPS, label="time jump"))
        run.send(_op(data, gid, run.members, run.epochs))
        run.check_replay()
    assert isinstance(run.group, ClassicGroup | ConsumerGroup | None)
