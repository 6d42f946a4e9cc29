"""A ShareFetch whose records are already on disk is one ask of the share group's actor and
one append of its coordinator log (issue 52 §5), even with acknowledgements piggy-backed: the
session step, the read and the acquisition happen in one turn, as Kafka's SharePartition
acquires on the leader. The handler (sans-IO now: the actor reads, and tests/gateway/conftest.py
holds the handler to it) runs against a real GroupRegistry and DataPlane; the ask and the
appends are counted where they happen (the registry's `ask`, the log's `append`).

Seen to fail before the change: two asks per fetch (`ShareSessionOp`, then `ShareAcquireOp`)
and two appends for a fetch that acknowledges and acquires.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
from kio.schema.errors import ErrorCode

from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import settle
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.ids import GroupKey
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.share_reads import ShareReads, read_for_share

from ..batch_builder import build_batch
from .serving import serving_groups
from .test_group_apis import nested, req

ACCEPT = 1
CONFIG = GroupConfig(initial_rebalance_delay_ms=0, share_auto_offset_reset="earliest")


class CountingLog(MemoryCoordinatorLog):
    def __init__(self) -> None:
        super().__init__()
        self.appends = 0

    async def append(self, key: GroupKey, records: Sequence[Any]) -> None:
        self.appends += 1
        await super().append(key, records)


def _fetch(topic_id: uuid.UUID, member_id: str, epoch: int, acks: Sequence[Any] = ()) -> Any:
    batches = tuple(
        nested(
            78, 1, "AcknowledgementBatch", first_offset=f, last_offset=la, acknowledge_types=(t,)
        )
        for f, la, t in acks
    )
    partition = nested(78, 1, "FetchPartition", partition_index=0, acknowledgement_batches=batches)
    return req(
        78,
        1,
        group_id="g",
        member_id=member_id,
        share_session_epoch=epoch,
        max_wait=0,
        min_bytes=1,
        max_bytes=1 << 20,
        max_records=500,
        batch_size=500,
        topics=(nested(78, 1, "FetchTopic", topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def _acquired(response: Any) -> list[tuple[int, int, int]]:
    assert response.error_code == ErrorCode.none
    (topic,) = response.responses
    (partition,) = topic.partitions
    assert partition.error_code == ErrorCode.none
    assert partition.acknowledge_error_code == ErrorCode.none
    return [(r.first_offset, r.last_offset, r.delivery_count) for r in partition.acquired_records]


async def test_a_share_fetch_of_records_on_disk_is_one_ask_and_one_append(
    tmp_path: Path,
) -> None:
    log = CountingLog()
    async with serving_groups(tmp_path, ((0, "t", 1),), log, group_config=CONFIG) as ctx:
        registry = ctx.registry()
        asks = 0
        real_ask = registry.ask

        async def counted_ask(key: GroupKey, op: Any) -> Any:
            nonlocal asks
            asks += 1
            return await real_ask(key, op)

        registry.ask = counted_ask  # type: ignore[method-assign]
        conn = ConnectionInfo("10.0.0.7", 4242)
        member_id = str(uuid.uuid4())
        joined = await _call(ctx, conn, API_TABLE[76].handler, req(
            76, 1, group_id="g", member_id=member_id, member_epoch=0, rack_id=None,
            subscribed_topic_names=("t",),
        ))  # fmt: skip
        assert joined.error_code == ErrorCode.none
        topic = ctx.data.topics_for(0).by_name("t")
        assert topic is not None
        ctx.data.append(topic, 0, [memoryview(build_batch([(None, b"a")] * 3))])

        asks, log.appends = 0, 0
        first = await _call(ctx, conn, API_TABLE[78].handler, _fetch(topic.topic_id, member_id, 0))
        assert _acquired(first) == [(0, 2, 1)]
        assert (asks, log.appends) == (1, 1)  # initialised and acquired: stored together

        batch = build_batch([(None, b"b")] * 3, base_offset=3)
        ctx.data.append(topic, 0, [memoryview(batch)])
        asks, log.appends = 0, 0
        second = _fetch(topic.topic_id, member_id, 1, acks=[(0, 2, ACCEPT)])
        assert _acquired(await _call(ctx, conn, API_TABLE[78].handler, second)) == [(3, 5, 1)]
        assert (asks, log.appends) == (1, 1)  # acknowledged and acquired: stored together


async def _call(ctx: BrokerContext, conn: ConnectionInfo, handler: Any, request: Any) -> Any:
    with trio.fail_after(5):
        return await settle(handler(ctx, conn, 1, request), ctx)


async def test_a_failed_read_fails_no_turn(tmp_path: Path) -> None:
    """A read that raises (a partition's file gone bad) answers that ShareFetch with nothing
    acquired; the group's turn stands: its acknowledgements are stored and its session goes
    on. Seen to fail with the read unguarded: the turn failed, the fetch was answered
    COORDINATOR_NOT_AVAILABLE and the group rebuilt from its log."""
    failing = False
    data: Any = None

    def read(org_id: int, read_from: Any, max_bytes: int, committed: bool) -> ShareReads:
        if failing:
            raise OSError("bad sector")
        return read_for_share(data, org_id, read_from, max_bytes, committed)

    log = CountingLog()
    async with serving_groups(
        tmp_path, ((0, "t", 1),), log, group_config=CONFIG, read_share=read
    ) as ctx:
        data = ctx.data
        conn = ConnectionInfo("10.0.0.7", 4242)
        member_id = str(uuid.uuid4())
        await _call(ctx, conn, API_TABLE[76].handler, req(
            76, 1, group_id="g", member_id=member_id, member_epoch=0, rack_id=None,
            subscribed_topic_names=("t",),
        ))  # fmt: skip
        topic = ctx.data.topics_for(0).by_name("t")
        assert topic is not None
        ctx.data.append(topic, 0, [memoryview(build_batch([(None, b"a")] * 3))])
        first = await _call(ctx, conn, API_TABLE[78].handler, _fetch(topic.topic_id, member_id, 0))
        assert _acquired(first) == [(0, 2, 1)]

        failing, log.appends = True, 0
        acked = _fetch(topic.topic_id, member_id, 1, acks=[(0, 2, ACCEPT)])
        assert _acquired(await _call(ctx, conn, API_TABLE[78].handler, acked)) == []
        assert log.appends == 1  # the acknowledgement, stored

        failing = False
        ctx.data.append(topic, 0, [memoryview(build_batch([(None, b"b")], base_offset=3))])
        after = _fetch(topic.topic_id, member_id, 2)  # the session went on
        assert _acquired(await _call(ctx, conn, API_TABLE[78].handler, after)) == [(3, 3, 1)]
