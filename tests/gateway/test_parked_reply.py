"""JoinGroup, SyncGroup and LeaveGroup replies, and those of Heartbeats the group's actor
cannot answer inline, waited for by the reactor (gateway/parked_reply.py): the connection's
task is not woken for them, its socket is not read meanwhile, and the frames after a waiting
request are answered after its reply, in order."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.context import Api, BrokerContext
from rafka_actors.gateway.reactor import Reactor

from .test_consumer_group_apis import heartbeat_req as cg_heartbeat_req
from .test_consumer_group_apis import join_req as cg_join_req
from .test_group_apis import (
    Client,
    committed,
    fetch_req,
    join_and_sync,
    join_req,
    nested,
    req,
    sync_req,
)
from .test_reactor import (
    METADATA,
    Parks,
    ctx,
    durable_ctx,
    plain_client,
    plain_connection,
    send_now,
    send_together,
)

__all__ = ["ctx", "durable_ctx"]  # fixtures used here

HEARTBEAT, LEAVE, CG_HEARTBEAT = 12, 13, 68


def reactor_of(ctx: BrokerContext) -> Reactor:
    assert ctx.reactor is not None
    return ctx.reactor


def waiting_here(reactor: Reactor) -> int:
    """Connections whose request waits in the reactor, their sockets unwatched."""
    return sum(parked.waiting is not None for parked in reactor._parked.values())


def record_parks(reactor: Reactor) -> list[int]:
    """The api key of each request the reactor drives until its group answers (`_park`)."""
    keys: list[int] = []
    park = reactor._park

    def recording(frame: bytes, parked: Any) -> bytes | None:
        keys.append(int.from_bytes(frame[:2], "big"))
        return park(frame, parked)

    reactor._park = recording  # type: ignore[method-assign]
    return keys


async def rebalance_with_a_second_member(first: Client, second: Client) -> tuple[Any, Any]:
    """`first` is Stable alone; `second` joins, and waits (in the reactor) until `first`
    rejoins. Returns both JoinGroup answers of the new generation."""
    member = (await join_and_sync(first)).member_id
    joined = await second.call(join_req(5))
    assert joined.error_code == ErrorCode.member_id_required
    await second.send(join_req(5, member=joined.member_id))
    await trio.testing.wait_all_tasks_blocked()
    return member, joined.member_id


async def test_joins_and_syncs_wait_in_the_reactor_not_in_their_tasks(
    durable_ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    ctx = durable_ctx
    reactor = reactor_of(ctx)
    parks = Parks(reactor)
    first, second = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    member, new_member = await rebalance_with_a_second_member(first, second)
    assert waiting_here(reactor) == 1  # the second's join, until the first rejoins
    rejoined = await first.call(join_req(5, member=member))
    joined = await second.receive()
    assert rejoined.generation_id == joined.generation_id == 2
    assert rejoined.leader == joined.leader == member
    assert [m.member_id for m in rejoined.members] == [member, new_member]  # the leader's
    await second.send(sync_req(3, new_member, 2))  # a follower waits for the leader
    await trio.testing.wait_all_tasks_blocked()
    assert waiting_here(reactor) == 1
    assert (await first.call(sync_req(3, member, 2))).error_code == ErrorCode.none
    assert (await second.receive()).error_code == ErrorCode.none
    await trio.testing.wait_all_tasks_blocked()
    assert waiting_here(reactor) == 0 and len(reactor._parked) == 2  # both watched again
    assert parks.count == 2  # each task parked once, and was never woken


async def test_the_frames_after_a_waiting_join_are_answered_after_its_reply(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    reactor = reactor_of(ctx)
    parks = Parks(reactor)
    first, second = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    member = (await join_and_sync(first)).member_id
    joined = await second.call(join_req(5))
    rest = [fetch_req(7, {"t": [0]}), METADATA, fetch_req(7, {"t": [1]})]
    await send_together(second, [join_req(5, member=joined.member_id), *rest])
    await trio.testing.wait_all_tasks_blocked()
    assert waiting_here(reactor) == 1  # and nothing after the join answered yet
    assert second.answered == 1
    await first.call(join_req(5, member=member))
    assert (await second.receive()).generation_id == 2
    assert committed(await second.receive()) == {("t", 0): (0, -1)}  # the reactor's
    assert [t.name for t in (await second.receive()).topics] == ["t"]  # the task's
    assert committed(await second.receive()) == {("t", 1): (0, -1)}
    await trio.testing.wait_all_tasks_blocked()  # its task asks for the bytes after them
    assert parks.count == 3  # the second's task was woken once: for the Metadata


async def test_a_connection_that_goes_while_its_join_waits_is_forgotten(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """Its task cancelled, the waiting handler is dropped; the group's answer to it later
    goes nowhere, and the group carries on without the member."""
    reactor = reactor_of(ctx)
    first = await plain_client(ctx, nursery)
    async with trio.open_nursery() as going:
        second = plain_connection(ctx, going, port=2)[1]
        member, _ = await rebalance_with_a_second_member(first, second)
        assert waiting_here(reactor) == 1
        going.cancel_scope.cancel()
    await trio.testing.wait_all_tasks_blocked()
    assert len(reactor._parked) == 1 and waiting_here(reactor) == 0  # the first only
    rejoined = await first.call(join_req(5, member=member))  # the join completes: the
    assert rejoined.error_code == ErrorCode.none  # answer to the gone one goes nowhere
    generation = rejoined.generation_id
    await first.call(sync_req(3, member, generation))
    for _ in range(20):  # the gone member's session (10 s) expires: a rebalance
        beat = await first.call(
            req(HEARTBEAT, 4, group_id="g", generation_id=generation, member_id=member)
        )
        if beat.error_code == ErrorCode.rebalance_in_progress:
            break
        assert beat.error_code == ErrorCode.none
        await trio.sleep(1)
    else:
        pytest.fail("the gone member's session never expired")
    again = await first.call(join_req(5, member=member))
    assert [m.member_id for m in again.members] == [member]  # alone in the group


async def test_with_the_groups_mailbox_full_the_task_answers_the_join(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ctx.registry(), "post_now", lambda *_args: False)
    reactor = reactor_of(ctx)
    parks = Parks(reactor)
    first, second = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    member, _ = await rebalance_with_a_second_member(first, second)
    assert waiting_here(reactor) == 0  # the task waits for it, as without the reactor
    await first.call(join_req(5, member=member))
    assert (await second.receive()).generation_id == 2
    assert parks.count > 2


async def test_a_waiting_request_that_waits_on_anything_else_closes_its_connection(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    caplog: pytest.LogCaptureFixture,
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Only the group's answer may be waited for here: whatever else the handler had
    started could run twice were the task to try it again, so the connection ends."""

    async def waiting(*_args: Any) -> Any:
        await trio.sleep(1)

    ctx.apis = {**API_TABLE, 11: Api(11, "JoinGroup", 0, 9, waiting)}
    client = await plain_client(ctx, nursery)
    await client.call(fetch_req(7, {"t": [0]}))  # parked in the reactor
    await client.send(join_req(5))
    with caplog.at_level(logging.ERROR):
        assert await client.stream.receive_some() == b""
    assert "waited elsewhere" in caplog.text


async def test_a_heartbeat_behind_a_join_in_the_mailbox_waits_in_the_reactor(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A member's Heartbeat read in the same pass as another member's JoinGroup finds the
    join in the group's mailbox, untaken: the actor cannot answer it inline, so it is posted
    behind the join and its reply waited for here, not by the member's task (in a rebalance
    of 1 000 members, nearly half the members' connections went to their tasks so)."""
    reactor = reactor_of(ctx)
    parks = Parks(reactor)
    first, second = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    joined = await join_and_sync(first)
    required = await second.call(join_req(5))
    assert required.error_code == ErrorCode.member_id_required
    waited = record_parks(reactor)
    send_now(second, join_req(5, member=required.member_id))
    send_now(
        first,
        req(HEARTBEAT, 4, group_id="g", generation_id=1, member_id=joined.member_id),
    )
    beat = await first.receive()
    assert beat.error_code == ErrorCode.rebalance_in_progress  # stepped after the join
    assert waited == [11, HEARTBEAT]
    rejoined = await first.call(join_req(5, member=joined.member_id))
    assert rejoined.generation_id == (await second.receive()).generation_id == 2
    await trio.testing.wait_all_tasks_blocked()
    assert parks.count == 2  # each task parked once, and was never woken


async def test_a_leave_waits_in_the_reactor(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    reactor = reactor_of(ctx)
    parks = Parks(reactor)
    client = await plain_client(ctx, nursery)
    joined = await join_and_sync(client)
    waited = record_parks(reactor)
    member = nested(LEAVE, 4, "MemberIdentity", member_id=joined.member_id)
    left = await client.call(req(LEAVE, 4, group_id="g", members=(member,)))
    assert left.error_code == ErrorCode.none
    assert [m.error_code for m in left.members] == [ErrorCode.none]
    again = await client.call(join_req(5))  # the group is empty: a new member id
    assert again.error_code == ErrorCode.member_id_required
    assert waited == [LEAVE, 11]
    await trio.testing.wait_all_tasks_blocked()
    assert parks.count == 1  # parked once, and never woken


async def test_consumer_group_heartbeats_wait_in_the_reactor(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    """A KIP-848 member's heartbeats go through its group's mailbox, their replies waited
    for here: the member's task is not woken for them."""
    reactor = reactor_of(ctx)
    parks = Parks(reactor)
    client = await plain_client(ctx, nursery)
    waited = record_parks(reactor)
    joined = await client.call(cg_join_req(1))
    assert joined.error_code == ErrorCode.none and joined.member_epoch >= 1
    beat = await client.call(cg_heartbeat_req(1, joined.member_id, joined.member_epoch))
    assert beat.error_code == ErrorCode.none and beat.member_epoch == joined.member_epoch
    assert waited == [CG_HEARTBEAT, CG_HEARTBEAT]
    await trio.testing.wait_all_tasks_blocked()
    assert parks.count == 1  # parked once, and never woken
