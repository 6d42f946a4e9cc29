"""Shared by the fault tests: op builders (groups, share groups), coordinator logs that
misbehave on cue, and a registry running in a nursery of its own.

The fake logs subclass `MemoryCoordinatorLog`, as tests/actors/test_group_actor.py does: the
fault is in the log, and everything above it (actor, registry, machine) is the real code.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.classic_group.consumer_protocol import encode_subscription
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import (
    DescribeGroupOp,
    HeartbeatOp,
    JoinGroupOp,
    JoinGroupOpResp,
    OffsetCommitOp,
    OffsetFetchOp,
    SyncGroupOp,
)
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.share_group.ops import (
    ShareAcquireOp,
    ShareAcquireOpResp,
    ShareGroupHeartbeatOp,
    ShareGroupHeartbeatOpResp,
    ShareSessionOp,
    ShareSessionOpResp,
)
from rafka_actors.storage.coordinator_log import CoordinatorLog, MemoryCoordinatorLog
from rafka_actors.storage.coordinator_segments import CoordinatorLogError

OK = ErrorCode.none
NOT_AVAILABLE = ErrorCode.coordinator_not_available  # retriable: look it up again, retry
# what Kafka's coordinator answers when its log's disk refuses a write (KAFKA_STORAGE_ERROR
# there: CoordinatorOperationExceptionHelper); retriable too
NOT_COORDINATOR = ErrorCode.not_coordinator
SESSION_MS, REBALANCE_MS = 10_000, 30_000
PROTOCOLS = (("range", encode_subscription(["t"])),)
NO_DELAY = GroupConfig(initial_rebalance_delay_ms=0)


def key(group: str) -> GroupKey:
    return GroupKey(0, group)


# -- ops ------------------------------------------------------------------------------------
def join_op(group: str, new_id: str = "", member: str = "") -> JoinGroupOp:
    """A classic consumer's JoinGroup: `new_id` for a new member, `member` for a rejoin."""
    return JoinGroupOp(
        group_id=group,
        member_id=member,
        protocol_type="consumer",
        session_timeout_ms=SESSION_MS,
        rebalance_timeout_ms=REBALANCE_MS,
        protocols=PROTOCOLS,
        require_known_member_id=False,
        new_member_id=new_id,
    )


def sync_op(group: str, joined: JoinGroupOpResp) -> SyncGroupOp:
    """The SyncGroup after `joined`; a leader hands every member the same assignment."""
    assignments = tuple((m[0], b"assignment") for m in joined.members)
    return SyncGroupOp(group, joined.member_id, joined.generation_id, assignments)


def heartbeat_op(group: str, joined: JoinGroupOpResp) -> HeartbeatOp:
    return HeartbeatOp(group, joined.member_id, joined.generation_id)


def commit_op(
    group: str, partition: int, offset: int, joined: JoinGroupOpResp | None = None
) -> OffsetCommitOp:
    """A commit to topic "t": a simple consumer's, or a member's when `joined` is given."""
    offsets = (("t", partition, offset, -1, None),)
    if joined is None:
        return OffsetCommitOp(group, offsets)
    return OffsetCommitOp(group, offsets, joined.member_id, joined.generation_id)


def fetch_op(group: str) -> OffsetFetchOp:
    """Every committed offset of the group: a pure read, answered from its snapshot."""
    return OffsetFetchOp(group, None)


def describe_op(group: str) -> DescribeGroupOp:
    return DescribeGroupOp(group)


# -- share groups: topic "t" (one partition, records 0-9 on disk) ----------------------------
SHARE_TOPIC_ID = uuid.uuid5(uuid.NAMESPACE_DNS, "t")
SHARE_TOPICS = TopicImage.of(1, [TopicInfo("t", SHARE_TOPIC_ID, 1)])
LOCK_MS, SHARE_SESSION_MS, SHARE_HEARTBEAT_MS = 30_000, 45_000, 5_000
SHARE_CONFIG = GroupConfig(
    share_record_lock_duration_ms=LOCK_MS,
    share_session_timeout_ms=SHARE_SESSION_MS,
    share_heartbeat_interval_ms=SHARE_HEARTBEAT_MS,
    share_auto_offset_reset="earliest",
)
ACCEPT = 1  # Kafka's AcknowledgeType
LOG_END = 10


def share_join(group: str, member: str) -> ShareGroupHeartbeatOp:
    return ShareGroupHeartbeatOp(group, member, 0, subscribed_topic_names=("t",))


def share_heartbeat(group: str, joined: ShareGroupHeartbeatOpResp) -> ShareGroupHeartbeatOp:
    assert joined.member_id is not None
    return ShareGroupHeartbeatOp(group, joined.member_id, joined.member_epoch)


def share_session(
    group: str, member: str, epoch: int, acks: tuple[Any, ...] = ()
) -> ShareSessionOp:
    """A ShareFetch's first half: epoch 0 opens the session on partition t-0."""
    added = (("t", 0),) if epoch == 0 else ()
    bounds = (("t", 0, 0, LOG_END),) if epoch == 0 else ()
    return ShareSessionOp(group, member, epoch, added=added, acks=acks, log_bounds=bounds)


def share_acquire(group: str, member: str, first: int, last: int = LOG_END - 1) -> ShareAcquireOp:
    """A ShareFetch's second half, the gateway having read records `first`-`last` of t-0."""
    return ShareAcquireOp(group, member, (("t", 0, 0, LOG_END, first, last),))


def acquired(answer: ShareAcquireOpResp) -> list[tuple[int, int, int]]:
    """(first, last, delivery count) of each range acquired from t-0."""
    assert answer.error_code == OK, answer
    return [run for topic, _partition, runs in answer.acquired if topic == "t" for run in runs]


def session_ok(answer: ShareSessionOpResp) -> ShareSessionOpResp:
    assert answer.error_code == OK and all(e == OK for *_, e in answer.ack_errors), answer
    return answer


# -- answers ----------------------------------------------------------------------------------
def offsets_of(fetched: Any) -> dict[int, int]:
    """{partition: offset} of an OffsetFetch answer (topic "t" only)."""
    assert fetched.error_code == OK
    return {partition: offset for topic, partition, offset, *_ in fetched.offsets if topic == "t"}


def commit_error(answer: Any) -> int:
    """The one error code of a one-partition commit's answer."""
    ((_topic, _partition, error),) = answer.results
    return int(error)


def member_ids(described: Any) -> set[str]:
    assert described.error_code == OK
    return {member[0] for member in described.members}


# -- a registry and its group ops ----------------------------------------------------------
@asynccontextmanager
async def running_registry(
    log: CoordinatorLog, config: GroupConfig = NO_DELAY, **kw: Any
) -> AsyncIterator[GroupRegistry]:
    """A registry whose actors run in a nursery of its own, cancelled on the way out."""
    async with trio.open_nursery() as nursery:
        yield GroupRegistry(nursery, config, log, **kw)
        nursery.cancel_scope.cancel()


async def reread(log: CoordinatorLog, group: str) -> dict[int, int]:
    """The group's offsets as a fresh registry on the same log reads them: what a restart
    would find."""
    async with running_registry(log) as registry:
        return offsets_of(await registry.ask(key(group), fetch_op(group)))


async def join_and_sync(registry: GroupRegistry, group: str, member: str) -> JoinGroupOpResp:
    """A new member joins `group` alone (no initial delay) and syncs: a Stable generation."""
    joined = await registry.ask(key(group), join_op(group, new_id=member))
    assert joined.error_code == OK, joined
    synced = await registry.ask(key(group), sync_op(group, joined))
    assert synced.error_code == OK, synced
    return joined


def held_by_actor(registry: GroupRegistry, group: str) -> int:
    """How many requests of `group` its actor holds unanswered (0 with no actor)."""
    actor = registry._running.get(key(group))
    return 0 if actor is None else len(actor._waiters)


# -- coordinator logs that misbehave ----------------------------------------------------------
class FailingLog(MemoryCoordinatorLog):
    """Appends of the groups named in `failing` raise CoordinatorLogError and store nothing
    (a full disk); the others are stored."""

    def __init__(self) -> None:
        super().__init__()
        self.failing: set[str] = set()
        self.failures = 0

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        await trio.lowlevel.checkpoint()
        if key.group_id in self.failing:
            self.failures += 1
            raise CoordinatorLogError("injected: no space left on device")
        await super().append(key, records)


class HangingLog(MemoryCoordinatorLog):
    """After `hang()`, no append returns until `recover()` (a disk that stopped answering).

    What the hung appends carried waits in `stuck`; `recover()` stores it, in order, before
    anything newer. As with the durable log, an appender that gave up meanwhile (the actor's
    commit timeout) does not withdraw its records: they may still be stored."""

    def __init__(self) -> None:
        super().__init__()
        self._healthy = trio.Event()
        self._healthy.set()
        self.stuck: list[tuple[GroupKey, tuple[Any, ...]]] = []

    def hang(self) -> None:
        self._healthy = trio.Event()

    async def recover(self) -> None:
        stuck, self.stuck = self.stuck, []
        for group_key, records in stuck:
            await super().append(group_key, records)
        self._healthy.set()

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        if self._healthy.is_set():
            await super().append(key, records)
            return
        self.stuck.append((key, tuple(records)))
        await self._healthy.wait()  # stored by recover(), or never


class SlowLog(MemoryCoordinatorLog):
    """Every append takes `delay_s` (a slow disk); `appends` lists (group, records) of each
    stored one, in order."""

    def __init__(self, delay_s: float) -> None:
        super().__init__()
        self.delay_s = delay_s
        self.appends: list[tuple[str, int]] = []

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        await trio.sleep(self.delay_s)
        await super().append(key, records)
        self.appends.append((key.group_id, len(records)))


class SlowFsync:
    """A stand-in for ``os.fsync`` that sleeps `seconds` first; it counts its calls and
    knows whether one is running."""

    def __init__(self, seconds: float) -> None:
        self._real = os.fsync
        self._seconds = seconds
        self._lock = threading.Lock()
        self.calls = 0
        self.running = 0

    def __call__(self, fd: int) -> None:
        with self._lock:
            self.calls += 1
            self.running += 1
        try:
            time.sleep(self._seconds)
            self._real(fd)
        finally:
            with self._lock:
                self.running -= 1
