"""A consumer's repeated OffsetFetch answered with its last reply (gateway/fetch_repeat.py):
the same answers as decoding each one, and whatever changed in between (an offset, the
group, the rights, tracing, a held write) still decides the answer."""

from __future__ import annotations

import os
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.errors import ErrorCode

from rafka_actors import telemetry
from rafka_actors.auth.users import User
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis.offsets import NO_MEMBER, repeatable_fetch
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.ids import GroupKey

from ..storage.test_coordinator_log_durable import failing
from .test_commit_repeat import decodes, steady_commit
from .test_group_apis import (
    DELETE,
    FETCH,
    commit_req,
    committed,
    fetch_req,
    nested,
    req,
)
from .test_group_apis import offset_delete_req as offset_delete
from .test_reactor import (
    committing_clients,
    ctx,
    durable_ctx,
    memory_client,
    plain_client,
    plain_connection,
    send_now,
)

__all__ = ["ctx", "decodes", "durable_ctx"]  # fixtures used here

BOTH = {"t": [0, 1]}
# As the broker runs by default: an idle group's actor stays this long (the reactor tests
# elsewhere drop it at once, and a fetch is kept only while its group has an actor).
PASSIVATE_S = BrokerConfig().group_passivation_idle_ms / 1000


@pytest.fixture
def passivate_after_s() -> float:
    return PASSIVATE_S


def fetched(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """committed() of a v1-v7 response, or of the only group of a v8+ one."""
    return committed(response.groups[0] if hasattr(response, "groups") else response)


async def test_repeated_fetches_are_answered_without_decoding_them(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    plain, memory = await plain_client(ctx, nursery), await memory_client(ctx, nursery)
    await plain.call(steady_commit({0: 5, 1: 6}))
    for version in (7, 8):
        for _ in range(5):
            answer = await plain.call(fetch_req(version, BOTH))
            assert answer == await memory.call(fetch_req(version, BOTH))
            assert fetched(answer) == {("t", 0): (0, 5), ("t", 1): (0, 6)}
    # the plain client's first fetch of each version; all ten of the memory client's
    assert decodes.count(FETCH) == 2 + 10


async def test_a_fetch_after_a_commit_reads_the_new_offset(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    fetching, committing = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    for _ in range(2):  # no group yet
        assert fetched(await fetching.call(fetch_req(7, BOTH))) == {
            ("t", 0): (0, -1),
            ("t", 1): (0, -1),
        }
    await committing.call(steady_commit({0: 1}))
    for offset in range(2, 6):
        for _ in range(2):
            answer = await fetching.call(fetch_req(7, BOTH))
            assert fetched(answer) == {("t", 0): (0, offset - 1), ("t", 1): (0, -1)}
        await committing.call(steady_commit({0: offset}))  # answered by commit_repeat
    await committing.call(steady_commit({0: 5}))  # the same offset, committed again
    assert fetched(await fetching.call(fetch_req(7, BOTH))) == {("t", 0): (0, 5), ("t", 1): (0, -1)}
    assert decodes.count(FETCH) == 1 + 5  # the first, and one after each commit


async def test_a_fetch_after_the_offsets_or_the_group_were_deleted_reads_none(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    fetching, admin = await plain_client(ctx, nursery), await plain_client(ctx, nursery)
    await admin.call(steady_commit({0: 5, 1: 6}))
    for _ in range(2):
        assert fetched(await fetching.call(fetch_req(7, BOTH))) == {
            ("t", 0): (0, 5),
            ("t", 1): (0, 6),
        }
    await admin.call(offset_delete("g", {"t": [1]}))
    for _ in range(2):
        assert fetched(await fetching.call(fetch_req(7, BOTH))) == {
            ("t", 0): (0, 5),
            ("t", 1): (0, -1),
        }
    deleted = await admin.call(req(DELETE, 2, groups_names=("g",)))
    assert [r.error_code for r in deleted.results] == [ErrorCode.none]
    for _ in range(2):
        assert fetched(await fetching.call(fetch_req(7, BOTH))) == {
            ("t", 0): (0, -1),
            ("t", 1): (0, -1),
        }


async def test_a_fetch_that_differs_in_more_than_its_correlation_id_is_decoded(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    plain = await plain_client(ctx, nursery)
    await plain.call(steady_commit({0: 5, 1: 6}))
    await plain.call(steady_commit({0: 7}, group="h"))
    for request, answer in (
        (fetch_req(7, BOTH), {("t", 0): (0, 5), ("t", 1): (0, 6)}),
        (fetch_req(7, {"t": [0]}), {("t", 0): (0, 5)}),
        (fetch_req(7, BOTH, group="h"), {("t", 0): (0, 7), ("t", 1): (0, -1)}),
        (fetch_req(6, BOTH), {("t", 0): (0, 5), ("t", 1): (0, 6)}),
        (fetch_req(6, BOTH), {("t", 0): (0, 5), ("t", 1): (0, 6)}),  # repeated
    ):
        assert fetched(await plain.call(request)) == answer
    assert decodes.count(FETCH) == 4


async def test_a_fetch_whose_answer_rests_on_more_than_offsets_is_not_kept(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int]
) -> None:
    """Every committed offset (no topics named), and a KIP-848 member's fetch (its epoch is
    checked), are decoded each time."""
    plain = await plain_client(ctx, nursery)
    await plain.call(steady_commit({0: 5}))
    every = fetch_req(7, None)
    member = req(
        FETCH,
        9,
        groups=(
            nested(
                FETCH,
                9,
                "OffsetFetchRequestGroup",
                group_id="g",
                member_id="m-1",
                member_epoch=3,
                topics=(
                    nested(FETCH, 9, "OffsetFetchRequestTopics", name="t", partition_indexes=(0,)),
                ),
            ),
        ),
        require_stable=True,
    )
    for request in (every, every, member, member):
        await plain.call(request)
    assert decodes.count(FETCH) == 4


def test_only_named_allowed_partitions_of_a_groups_plain_answer_are_repeatable() -> None:
    ok = ("g", ErrorCode.none, (("t", (0, 1)),), (("t", 0, 5, -1, "", 0), ("t", 1, -1, -1, "", 0)))
    plain = NO_MEMBER  # each group's (member id, member epoch), as offsets._member reads it
    assert repeatable_fetch([plain], (ok,)) == (("g", (("t", 0), ("t", 1))),)
    assert repeatable_fetch([plain, plain], (ok, ok[:1] + ok[1:])) is not None
    member, epoch = ("m", -1), (None, 0)
    denied_topic = (
        *ok[:3],
        (*ok[3], ("u", 0, -1, -1, "", int(ErrorCode.topic_authorization_failed))),
    )
    for wanted, answer in (
        (member, ok),
        (epoch, ok),
        (plain, ("g", ErrorCode.group_authorization_failed, ok[2], ())),
        (plain, (None, ErrorCode.invalid_group_id, ok[2], ())),
        (plain, ("g", ErrorCode.none, None, ok[3])),
        (plain, denied_topic),
    ):
        assert repeatable_fetch([plain, wanted], (ok, answer)) is None


async def test_with_tracing_turned_on_a_repeat_is_decoded(
    ctx: BrokerContext, nursery: trio.Nursery, decodes: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = await plain_client(ctx, nursery)
    await plain.call(steady_commit({0: 5}))
    for _ in range(2):
        await plain.call(fetch_req(7, BOTH))
    assert decodes.count(FETCH) == 1
    monkeypatch.setattr(telemetry, "tracing", lambda: True)  # while the socket is parked
    assert fetched(await plain.call(fetch_req(7, BOTH))) == {("t", 0): (0, 5), ("t", 1): (0, -1)}
    assert decodes.count(FETCH) == 2


async def test_a_repeat_checks_the_users_rights_again(
    ctx: BrokerContext, nursery: trio.Nursery
) -> None:
    conn = ConnectionInfo("10.0.0.7", 1)
    _, plain = plain_connection(ctx, nursery, conn=conn)
    await plain.call(steady_commit({0: 5}))
    for _ in range(2):
        assert fetched(await plain.call(fetch_req(7, BOTH))) == {
            ("t", 0): (0, 5),
            ("t", 1): (0, -1),
        }
    conn.user = User("u", 0, group_prefixes=("g",), topic_prefixes=("other",))
    refused = int(ErrorCode.topic_authorization_failed)
    assert fetched(await plain.call(fetch_req(7, BOTH))) == {
        ("t", 0): (refused, -1),
        ("t", 1): (refused, -1),
    }
    conn.user = User("u", 0, group_prefixes=("other",), topic_prefixes=("t",))
    assert (await plain.call(fetch_req(7, BOTH))).error_code == ErrorCode.group_authorization_failed


async def test_a_group_rebuilt_from_its_log_or_restarted_is_read_again(
    ctx: BrokerContext,
    nursery: trio.Nursery,
    decodes: list[int],
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After a write failed (the actor rebuilds its group from the log) or the group's
    actor stopped (group.passivation.idle.ms), the fetch goes the full way again."""
    plain = await plain_client(ctx, nursery)
    await plain.call(steady_commit({0: 5}))
    actor = ctx.registry().actor(GroupKey(0, "g"))
    assert actor is not None
    for _ in range(2):
        await plain.call(fetch_req(7, BOTH))
    actor.forget_unstored()
    await trio.testing.wait_all_tasks_blocked()
    for _ in range(2):
        assert fetched(await plain.call(fetch_req(7, BOTH))) == {
            ("t", 0): (0, 5),
            ("t", 1): (0, -1),
        }
    await trio.sleep(PASSIVATE_S + 1)
    assert ctx.registry().actor(GroupKey(0, "g")) is None
    assert fetched(await plain.call(fetch_req(7, BOTH))) == {("t", 0): (0, 5), ("t", 1): (0, -1)}
    assert decodes.count(FETCH) == 3


async def test_a_repeat_about_a_group_with_records_held_waits_for_the_passs_write(
    durable_ctx: BrokerContext, nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As in a full fetch (test_reactor.py): in a pass after a commit to the group, even a
    repeat of offsets that commit left alone waits for the write, and is withdrawn with the
    commit's reply when the write fails. A pipelined commit and fetch read the commit."""
    clients = await committing_clients(durable_ctx, nursery, 2)
    for _ in range(2):
        answer = await clients[1].call(fetch_req(7, {"t": [0]}, group="g0"))
        assert fetched(answer) == {("t", 0): (0, 1)}
    send_now(clients[0], commit_req(9, {"t": [(1, 7)]}, group="g0"))
    send_now(clients[0], fetch_req(7, {"t": [1]}, group="g0"))
    answers = [await clients[0].receive(), await clients[0].receive()]
    assert fetched(answers[1]) == {("t", 1): (0, 7)}
    send_now(clients[0], commit_req(9, {"t": [(1, 8)]}, group="g0"))
    send_now(clients[1], fetch_req(7, {"t": [0]}, group="g0"))
    monkeypatch.setattr(os, "pwrite", failing(28, once=True))
    assert await clients[0].stream.receive_some() == b""  # the commit's reply withdrawn
    assert await clients[1].stream.receive_some() == b""  # and the repeat's
