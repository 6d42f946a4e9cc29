"""A consumer's repeated commits answered from its last one (gateway/commit_repeat.py): the
same answers, offsets and log records as decoding each one, and whatever changed in between
(the group, the rights, tracing) still decides the answer."""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors import telemetry
from rafka_actors.gateway import connection
from rafka_actors.gateway.commit_repeat import RepeatCommit, _with_offsets
from rafka_actors.gateway.context import BrokerContext
from rafka_actors.group_common.ops import OffsetCommitOp
from rafka_actors.group_common.records import OffsetCommitRecord
from rafka_actors.ids import GroupKey

from ..wire import request_frame
from .test_group_apis import (
    COMMIT,
    commit_req,
    committed,
    fetch_req,
    join,
    join_and_sync,
    join_req,
)
from .test_reactor import ctx, memory_client, plain_client

__all__ = ["ctx"]  # the reactor's fixture, used here


def steady_commit(offsets: dict[int, int], version: int = 9, group: str = "g") -> Any:
    """A simple consumer's commit of topic t: what changes from one to the next is only
    the offsets (leader epoch and metadata stay)."""
    return commit_req(version, {"t": list(offsets.items())}, group, metadata=lambda _: "")


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The api key of every request decoded, by the reactor or a connection's task."""
    seen: list[int] = []
    decode = connection.decode_request

    def counting(header: Any, frame: bytes, offset: int) -> Any:
        seen.append(header.api_key)
        return decode(header, frame, offset)

    monkeypatch.setattr(connection, "decode_request", counting)
    return seen


def stored_offsets(ctx: BrokerContext, group: str = "g") -> dict[tuple[str, int], int]:
    records = ctx.registry()._log.records_of(GroupKey(0, group))
    return {(r.topic, r.partition): r.offset for r in records if type(r) is OffsetCommitRecord}


async def test_repeated_commits_are_answered_without_decoding_them(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    plain, memory = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    for offset in range(1000, 1005):
        request = steady_commit({0: offset, 1: 100 + offset})
        answer = await plain.call(request)
        assert answer == await memory.call(steady_commit({0: offset, 1: 100 + offset}, group="h"))
        assert committed(answer) == {("t", 0): (0, -1), ("t", 1): (0, -1)}
        assert stored_offsets(ctx) == {("t", 0): offset, ("t", 1): 100 + offset}
    fetched = await plain.call(fetch_req(7, {"t": [0, 1]}))
    assert committed(fetched) == {("t", 0): (0, 1004), ("t", 1): (0, 1104)}
    assert len(decodes) == 5 + 2  # the memory client's commits; the plain one's first and fetch


async def test_a_commit_that_differs_in_more_than_its_offsets_is_decoded(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    plain = await plain_client(ctx, nursery)
    await plain.call(steady_commit({0: 1}))
    await plain.call(steady_commit({0: 2}))  # repeated
    assert len(decodes) == 1
    for other in (
        steady_commit({1: 3}),
        steady_commit({0: 4}, group="h"),
        steady_commit({0: 5}, 8),
    ):
        assert committed(await plain.call(other)) == {
            ("t", other.topics[0].partitions[0].partition_index): (0, -1)
        }
    assert len(decodes) == 4
    assert stored_offsets(ctx) == {("t", 0): 5, ("t", 1): 3}
    assert stored_offsets(ctx, "h") == {("t", 0): 4}
    assert committed(await plain.call(steady_commit({0: 6}, 8))) == {("t", 0): (0, -1)}
    assert len(decodes) == 4  # the v8 commit is the one kept now
    assert stored_offsets(ctx) == {("t", 0): 6, ("t", 1): 3}


async def test_offsets_that_cannot_be_told_apart_in_the_frame_are_not_kept(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    """Two partitions at the same offset: the 8 bytes are in the frame twice."""
    plain = await plain_client(ctx, nursery)
    for offset in (7, 8):
        await plain.call(steady_commit({0: offset, 1: offset}))
    assert len(decodes) == 2
    await plain.call(steady_commit({0: 9, 1: 10}))
    await plain.call(steady_commit({0: 10, 1: 10}))  # equal again, but found by position now
    assert len(decodes) == 3
    assert stored_offsets(ctx) == {("t", 0): 10, ("t", 1): 10}


async def test_a_repeat_after_the_group_changed_gets_the_groups_answer(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    """Once a member joined, a simple consumer's commit (no member, no generation) is
    refused with UNKNOWN_MEMBER_ID, repeated or not; nothing of it is stored."""
    plain, member = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    await plain.call(steady_commit({0: 1}))
    await plain.call(steady_commit({0: 2}))
    required = await member.call(join_req(4))  # v4: MEMBER_ID_REQUIRED, with the id
    assert (await member.call(join_req(4, member=required.member_id))).error_code == 0
    refused = await plain.call(steady_commit({0: 3}))
    assert committed(refused) == {("t", 0): (ErrorCode.unknown_member_id, -1)}
    assert refused == await (await memory_client(ctx, nursery)).call(steady_commit({0: 3}))
    assert stored_offsets(ctx) == {("t", 0): 2}
    assert decodes.count(COMMIT) == 2  # the first commit and the memory client's


async def test_a_members_repeated_commits_keep_it_alive_and_end_with_its_membership(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    decodes: list[int],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A group member's commit moves its session deadline, repeated or not (the actor steps
    it in full); once the member is gone, its repeated commit is refused."""
    plain, other = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    joined = await join_and_sync(plain)
    member, generation = joined.member_id, joined.generation_id

    def commit(offset: int) -> Any:
        return commit_req(9, {"t": [(0, offset)]}, "g", member, generation, lambda _: "")

    for offset in range(1000, 1030):  # 30 commits, 1 s apart: three session timeouts
        assert committed(await plain.call(commit(offset))) == {("t", 0): (0, -1)}
        await trio.sleep(1)
    assert decodes.count(COMMIT) == 1
    assert stored_offsets(ctx) == {("t", 0): 1029}
    await join(other)  # the first member never rejoins: dropped at the rebalance timeout
    refused = await plain.call(commit(1030))
    assert committed(refused) == {("t", 0): (ErrorCode.unknown_member_id, -1)}
    assert stored_offsets(ctx) == {("t", 0): 1029}


async def test_with_tracing_turned_on_a_repeat_is_decoded_and_traced(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = await plain_client(ctx, nursery)
    await plain.call(steady_commit({0: 1}))
    await plain.call(steady_commit({0: 2}))
    assert len(decodes) == 1
    monkeypatch.setattr(telemetry, "tracing", lambda: True)  # while the socket is parked
    await plain.call(steady_commit({0: 3}))
    assert len(decodes) == 2
    assert stored_offsets(ctx) == {("t", 0): 3}


def test_a_kept_frame_matches_only_itself_with_other_offsets() -> None:
    frame = request_frame(steady_commit({0: 5, 1: 6}), 1)[4:]
    offsets_at = [frame.index((5).to_bytes(8, "big")), frame.index((6).to_bytes(8, "big"))]
    op = OffsetCommitOp("g", (("t", 0, 5, 3, ""), ("t", 1, 6, 3, "")))
    repeat = RepeatCommit(GroupKey(0, "g"), frame, offsets_at, None, op, b"")
    assert repeat.offsets_in(request_frame(steady_commit({0: 5, 1: 6}), 99)[4:]) == [5, 6]
    assert repeat.offsets_in(request_frame(steady_commit({0: -1, 1: 2**40}), 2)[4:]) == [-1, 2**40]
    for other in (
        steady_commit({0: 5, 1: 6}, version=8),
        steady_commit({0: 5, 1: 6}, group="h"),
        steady_commit({1: 5, 0: 6}),
        steady_commit({0: 5}),
    ):
        assert repeat.offsets_in(request_frame(other, 1)[4:]) is None


def test_a_repeat_copies_every_field_of_the_kept_op_but_its_offsets() -> None:
    """`_with_offsets` lists the op's fields itself (dataclasses.replace costs 0.7 us more a
    commit, 3% of the broker's CPU for one): a field added to OffsetCommitOp must be added
    there too."""
    assert [f.name for f in fields(OffsetCommitOp)] == [
        "group_id",
        "offsets",
        "member_id",
        "generation_id",
        "group_instance_id",
        "api_version",
    ]
    op = OffsetCommitOp("g", (("t", 0, 5, 3, "m"), ("t", 1, 6, 4, None)), "m-1", 7, "i-1", 8)
    repeated = _with_offsets(op, [9, 10])
    assert repeated == replace(op, offsets=(("t", 0, 9, 3, "m"), ("t", 1, 10, 4, None)))
