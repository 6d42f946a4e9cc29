"""A test context for the pure classic-group state machine, after Kafka's
GroupMetadataManagerTestContext.

It holds the group (None until a command creates it), a fake clock `now`, and a counter of
waiter tokens. `send(op)` hands the op to `machine.handle` under a fresh token and returns
the token; every reply is filed under its token, so a parked JoinGroup/SyncGroup is simply a
token with no reply yet. `sleep(ms)` moves the clock forward and fires every deadline that
falls due on the way, each at its own time and in order, exactly as the group actor would.

The request helpers fill in sensible defaults (consumer protocol, one "range" protocol with
a real ConsumerProtocolSubscription) so that a test only spells out what it is about.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from rafka_actors.classic_group.consumer_protocol import encode_subscription
from rafka_actors.classic_group.state import ClassicGroup, GroupState
from rafka_actors.coordinator import machine
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    DeleteGroupOp,
    DeleteGroupOpResp,
    DescribeGroupOp,
    DescribeGroupOpResp,
    HeartbeatOp,
    HeartbeatOpResp,
    JoinGroupOp,
    JoinGroupOpResp,
    LeaveGroupOp,
    LeaveGroupOpResp,
    OffsetCommitOp,
    OffsetCommitOpResp,
    OffsetDeleteOp,
    OffsetDeleteOpResp,
    OffsetFetchOp,
    OffsetFetchOpResp,
    Protocols,
    SyncGroupOp,
    TimerFired,
)
from rafka_actors.group_common.records import Record

GROUP_ID = "group-id"
CGP_ID = "cgp_x"
SESSION_TIMEOUT_MS = 10_000
REBALANCE_TIMEOUT_MS = 20_000
TIMER_TOKEN = -1  # the waiter passed with TimerFired: the machine never answers it

# Kafka's own defaults, except that the minimum session timeout is lowered so the tests can
# use short sessions (Kafka's test context does the same).
DEFAULT_CONFIG = GroupConfig(min_session_timeout_ms=1000)


def protocols(*names: str, topics: Sequence[str] = ("foo",)) -> Protocols:
    """Consumer-protocol JoinGroup protocols: every name with the same subscription."""
    metadata = encode_subscription(list(topics))
    return tuple((name, metadata) for name in names)


DEFAULT_PROTOCOLS = protocols("range")


def deadlines(group: Any) -> dict[tuple[str, str], int]:
    """Every deadline a classic group holds, by what it is for."""
    if not isinstance(group, ClassicGroup):
        return {}
    held = {("heartbeat", m.member_id): m.heartbeat_deadline for m in group.members.values()}
    held |= {("pending", member_id): at for member_id, at in group.pending_members.items()}
    held |= {("join", ""): group.join_deadline, ("sync", ""): group.sync_deadline}
    return {key: at for key, at in held.items() if at is not None}


@dataclass
class Joined:
    """A member that completed a join: its id and the JoinGroup answer it got."""

    member_id: str
    response: JoinGroupOpResp

    @property
    def generation(self) -> int:
        return self.response.generation_id


@dataclass
class GroupHarness:
    config: GroupConfig = DEFAULT_CONFIG
    group_id: str = GROUP_ID
    cgp_id: str = CGP_ID
    now: int = 0
    group: ClassicGroup | None = None
    # every reply ever sent, by token, in order (a correct machine sends at most one)
    replies: dict[int, list[Any]] = field(default_factory=dict)
    issued: list[int] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)  # everything ever emitted
    events: list[Any] = field(default_factory=list)
    last: machine.Result | None = None  # the Result of the latest handle()
    # the group actor's wake-up time, kept as it keeps it (machine.deadline_after)
    wake_bound: int | None = None
    _tokens: Iterable[int] = field(default_factory=lambda: itertools.count(1))
    _ids: Iterable[int] = field(default_factory=lambda: itertools.count(1))

    # -- driving the machine --------------------------------------------------------------
    def handle(self, op: Any, waiter: int = TIMER_TOKEN) -> machine.Result:
        before = deadlines(self.group)
        result = machine.handle(
            self.group, op, self.now, waiter, config=self.config, fresh_cgp_id=self.cgp_id
        )
        # The contract `machine.deadline_after` rests on: every deadline a step sets is
        # reported as set (through Effects.deadline_in), so none is earlier than the report.
        for key, at in deadlines(result.group).items():
            if before.get(key) != at:
                earliest = result.earliest_deadline
                assert earliest is not None and earliest <= at, (type(op).__name__, key, at)
        self.group = result.group
        self.wake_bound = machine.deadline_after(result, op, self.wake_bound)
        for token, response in result.replies:
            self.replies.setdefault(token, []).append(response)
        self.records.extend(result.records)
        self.events.extend(result.events)
        self.last = result
        return result

    def send(self, op: Any) -> int:
        token = next(self._tokens)  # type: ignore[call-overload]
        self.issued.append(token)
        self.handle(op, token)
        return token

    def call(self, op: Any) -> Any:
        """Send a request the machine must answer at once; return that answer."""
        token = self.send(op)
        assert self.answered(token), f"{type(op).__name__} was parked"
        return self.reply(token)

    def replies_for(self, token: int) -> list[Any]:
        return self.replies.get(token, [])

    def answered(self, token: int) -> bool:
        return bool(self.replies_for(token))

    def reply(self, token: int) -> Any:
        """The one answer to `token` (None while it is parked)."""
        got = self.replies_for(token)
        assert len(got) <= 1, f"token {token} answered {len(got)} times: {got}"
        return got[0] if got else None

    def sleep(self, ms: int) -> list[Record]:
        """Advance the clock by `ms`, firing every deadline on the way at its own time."""
        target = self.now + ms
        emitted: list[Record] = []
        for _ in range(10_000):
            deadline = machine.next_deadline(self.group)
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            emitted.extend(self.handle(TimerFired()).records)
        else:  # pragma: no cover - a livelock in the machine
            raise AssertionError("timers keep firing at the same instant")
        self.now = target
        return emitted

    def new_member_id(self, prefix: str = "member") -> str:
        return f"{prefix}-{next(self._ids)}"  # type: ignore[call-overload]

    # -- state shortcuts ------------------------------------------------------------------
    @property
    def g(self) -> ClassicGroup:
        assert self.group is not None, "the group does not exist"
        return self.group

    @property
    def state(self) -> GroupState | None:
        return None if self.group is None else self.group.state

    @property
    def generation(self) -> int:
        return self.g.generation

    def member_ids(self) -> list[str]:
        return list(self.g.members)

    # -- requests ---------------------------------------------------------------------------
    def join_op(
        self,
        member_id: str = "",
        *,
        instance_id: str | None = None,
        protocol_type: str = "consumer",
        protocols: Protocols = DEFAULT_PROTOCOLS,
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        rebalance_timeout_ms: int = REBALANCE_TIMEOUT_MS,
        require_known_member_id: bool = True,
        new_member_id: str | None = None,
        client_id: str = "client",
        client_host: str = "/127.0.0.1",
    ) -> JoinGroupOp:
        if new_member_id is None:
            new_member_id = self.new_member_id(instance_id or "member") if not member_id else ""
        return JoinGroupOp(
            group_id=self.group_id,
            member_id=member_id,
            protocol_type=protocol_type,
            session_timeout_ms=session_timeout_ms,
            protocols=protocols,
            rebalance_timeout_ms=rebalance_timeout_ms,
            group_instance_id=instance_id,
            client_id=client_id,
            client_host=client_host,
            require_known_member_id=require_known_member_id,
            new_member_id=new_member_id,
        )

    def join(self, member_id: str = "", **kw: Any) -> int:
        return self.send(self.join_op(member_id, **kw))

    def join_new_member(self, *, instance_id: str | None = None, **kw: Any) -> tuple[str, int]:
        """JoinGroup v4+ as a new member: for a dynamic member, the MEMBER_ID_REQUIRED dance
        first. Returns the member id and the token of the (usually parked) real join."""
        new_id = kw.pop("new_member_id", None) or self.new_member_id(instance_id or "member")
        if instance_id is None and kw.get("require_known_member_id", True):
            first = self.call(self.join_op("", new_member_id=new_id, **kw))
            assert first.error_code == ErrorCode.member_id_required, first
            assert first.member_id == new_id
            return new_id, self.join(new_id, **kw)
        return new_id, self.join("", instance_id=instance_id, new_member_id=new_id, **kw)

    def wait_for(self, *tokens: int, limit_ms: int = 3_600_000) -> None:
        """Sleep from deadline to deadline until every token is answered."""
        start = self.now
        while not all(self.answered(t) for t in tokens):
            deadline = machine.next_deadline(self.group)
            assert deadline is not None and deadline - start <= limit_ms, "nothing will answer"
            self.sleep(deadline - self.now)

    def sync_op(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        instance_id: str | None = None,
        protocol_type: str | None = None,
        protocol_name: str | None = None,
    ) -> SyncGroupOp:
        return SyncGroupOp(
            group_id=self.group_id,
            member_id=member_id,
            generation_id=generation,
            assignments=tuple((assignments or {}).items()),
            group_instance_id=instance_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )

    def sync(self, member_id: str, generation: int, assignments: Any = None, **kw: Any) -> int:
        return self.send(self.sync_op(member_id, generation, assignments, **kw))

    def heartbeat(
        self, member_id: str, generation: int, *, instance_id: str | None = None
    ) -> HeartbeatOpResp:
        return self.call(HeartbeatOp(self.group_id, member_id, generation, instance_id))

    def heartbeat_error(self, member_id: str, generation: int, **kw: Any) -> int:
        return self.heartbeat(member_id, generation, **kw).error_code

    def leave(self, *members: str | tuple[str, str | None]) -> LeaveGroupOpResp:
        rows = []
        for m in members:
            member_id, instance_id = (m, None) if isinstance(m, str) else m
            rows.append((member_id, instance_id, None))
        return self.call(LeaveGroupOp(self.group_id, tuple(rows)))

    def commit(
        self,
        offsets: dict[tuple[str, int], int] | Sequence[tuple[str, int, int, int, str | None]],
        *,
        member_id: str = "",
        generation: int = -1,
        instance_id: str | None = None,
        api_version: int = 9,
    ) -> OffsetCommitOpResp:
        if isinstance(offsets, dict):
            rows = tuple((t, p, o, -1, "") for (t, p), o in offsets.items())
        else:
            rows = tuple(offsets)
        return self.call(
            OffsetCommitOp(self.group_id, rows, member_id, generation, instance_id, api_version)
        )

    def fetch(self, partitions: Sequence[tuple[str, int]] | None = None) -> OffsetFetchOpResp:
        wanted = None if partitions is None else tuple(partitions)
        return self.call(OffsetFetchOp(self.group_id, wanted))

    def describe(self) -> DescribeGroupOpResp:
        return self.call(DescribeGroupOp(self.group_id))

    def delete(self) -> DeleteGroupOpResp:
        return self.call(DeleteGroupOp(self.group_id))

    def delete_offsets(self, partitions: Sequence[tuple[str, int]]) -> OffsetDeleteOpResp:
        return self.call(OffsetDeleteOp(self.group_id, tuple(partitions)))

    # -- composite steps --------------------------------------------------------------------
    def join_and_complete_join(self, **kw: Any) -> Joined:
        """A single member joins an Empty group and waits out the initial delay."""
        member_id, token = self.join_new_member(**kw)
        assert not self.answered(token)
        self.wait_for(token)
        response = self.reply(token)
        assert response is not None and response.error_code == ErrorCode.none, response
        return Joined(member_id, response)

    def join_group_of(
        self, n: int, *, instance_ids: Sequence[str | None] | None = None, **kw: Any
    ) -> list[Joined]:
        """Bring a fresh group to CompletingRebalance with `n` members (leader first)."""
        assert self.group is None or self.g.is_empty()
        ids = list(instance_ids) if instance_ids is not None else [None] * n
        tokens = [self.join_new_member(instance_id=i, **kw) for i in ids]
        self.wait_for(*(t for _, t in tokens))  # the initial delay, and its extensions
        joined = [Joined(m, self.reply(t)) for m, t in tokens]
        assert all(j.response.error_code == ErrorCode.none for j in joined), joined
        assert self.state is GroupState.COMPLETING_REBALANCE
        joined.sort(key=lambda j: j.member_id != self.g.leader_id)
        return joined

    def join_and_sync_group_of(
        self, n: int, *, instance_ids: Sequence[str | None] | None = None, **kw: Any
    ) -> list[Joined]:
        """Bring a fresh group to Stable with `n` members; the leader comes first. Every
        member gets the assignment `b"assignment-<member id>"`."""
        joined = self.join_group_of(n, instance_ids=instance_ids, **kw)
        generation = self.generation
        assignments = {j.member_id: f"assignment-{j.member_id}".encode() for j in joined}
        leader_token = self.sync(joined[0].member_id, generation, assignments)
        follower_tokens = [self.sync(j.member_id, generation) for j in joined[1:]]
        for token in [leader_token, *follower_tokens]:
            assert self.reply(token).error_code == ErrorCode.none
        assert self.state is GroupState.STABLE
        return joined

    def rejoin_all(self, members: Iterable[str], **kw: Any) -> dict[str, int]:
        """Each given member rejoins with its id (default metadata); returns the tokens."""
        return {m: self.join(m, **kw) for m in members}
