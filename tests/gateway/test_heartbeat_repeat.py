"""A member's repeated heartbeats answered from its last one (gateway/heartbeat_repeat.py):
each is still stepped by the group's actor (the session deadline, the generation, a
rebalance), the rights are checked again, and the answers are the handler's."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors import telemetry
from rafka_actors.auth.users import User
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo

from .test_commit_repeat import decodes
from .test_group_apis import join, join_and_sync, req
from .test_reactor import ctx, memory_client, plain_client, plain_connection

__all__ = ["ctx", "decodes"]  # fixtures used here

HEARTBEAT = 12


def beat(member: str, generation: int = 1, version: int = 4) -> Any:
    return req(HEARTBEAT, version, group_id="g", generation_id=generation, member_id=member)


async def test_repeated_heartbeats_are_answered_without_decoding_them(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    decodes: list[int],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A member heartbeating for three session timeouts stays in the group: the actor steps
    every repeat. The answers match a connection the reactor never sees."""
    plain, memory = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    member = (await join_and_sync(plain)).member_id
    for _ in range(30):  # 1 s apart, session timeout 10 s
        answer = await plain.call(beat(member))
        assert answer == await memory.call(beat(member))
        assert answer.error_code == ErrorCode.none
        await trio.sleep(1)
    assert decodes.count(HEARTBEAT) == 1 + 30  # the first; the memory client's thirty


async def test_a_repeat_gets_the_groups_answer_when_it_changed(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    decodes: list[int],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Another member joins: the repeat reads REBALANCE_IN_PROGRESS; the first member never
    rejoins and is dropped at the rebalance timeout: UNKNOWN_MEMBER_ID."""
    plain, other = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    member = (await join_and_sync(plain)).member_id
    for _ in range(3):
        assert (await plain.call(beat(member))).error_code == ErrorCode.none
    assert decodes.count(HEARTBEAT) == 1
    nursery.start_soon(join, other)
    await trio.testing.wait_all_tasks_blocked()
    for _ in range(2):
        assert (await plain.call(beat(member))).error_code == ErrorCode.rebalance_in_progress
    assert decodes.count(HEARTBEAT) == 1
    # (past the rebalance timeout the timer goes first: this one is its task's, decoded)
    await trio.sleep(31)
    assert (await plain.call(beat(member))).error_code == ErrorCode.unknown_member_id


async def test_a_heartbeat_that_differs_in_more_than_its_correlation_id_is_decoded(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    decodes: list[int],
    autojump_clock: trio.testing.MockClock,
) -> None:
    plain = await plain_client(ctx, nursery)
    member = (await join_and_sync(plain)).member_id
    for request, code in (
        (beat(member), ErrorCode.none),
        (beat(member), ErrorCode.none),
        (beat(member, generation=7), ErrorCode.illegal_generation),
        (beat(member, version=3), ErrorCode.none),
        (beat("stranger"), ErrorCode.unknown_member_id),
        (beat("stranger"), ErrorCode.unknown_member_id),  # repeated
    ):
        assert (await plain.call(request)).error_code == code
    assert decodes.count(HEARTBEAT) == 4


async def test_with_tracing_turned_on_a_repeat_is_decoded(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    decodes: list[int],
    monkeypatch: pytest.MonkeyPatch,
    autojump_clock: trio.testing.MockClock,
) -> None:
    plain = await plain_client(ctx, nursery)
    member = (await join_and_sync(plain)).member_id
    for _ in range(3):
        await plain.call(beat(member))
    assert decodes.count(HEARTBEAT) == 1
    monkeypatch.setattr(telemetry, "tracing", lambda: True)  # while the socket is parked
    assert (await plain.call(beat(member))).error_code == ErrorCode.none
    assert decodes.count(HEARTBEAT) == 2


async def test_a_repeat_checks_the_users_right_to_the_group_again(
    ctx: BrokerContext, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    conn = ConnectionInfo("10.0.0.7", 1)
    _, plain = plain_connection(ctx, nursery, conn=conn)
    member = (await join_and_sync(plain)).member_id
    for _ in range(3):
        assert (await plain.call(beat(member))).error_code == ErrorCode.none
    conn.user = User("u", 0, group_prefixes=("other",), topic_prefixes=("t",))
    denied = await plain.call(beat(member))
    assert denied.error_code == ErrorCode.group_authorization_failed
