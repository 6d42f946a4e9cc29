"""A BrokerContext that serves groups, for the gateway tests: a real DataPlane in a temp dir,
a GroupRegistry on a MemoryCoordinatorLog (or the log given; no initial rebalance delay), and
the topics asked for, each `(org_id, name, partitions)`. An idle group's actor is dropped at
once unless `passivate_after_s` is given (the broker's default keeps it 10 s). The groups' configs
are `group_config` if given (default: no initial rebalance delay); a ShareFetch reads the
partition logs as the broker's does, or through `read_share` if given."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path

import trio

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.share_fetch import ShareReader
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.context import BrokerContext
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.storage.coordinator_log import CoordinatorLog, MemoryCoordinatorLog
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.share_reads import read_for_share


@asynccontextmanager
async def serving_groups(
    tmp_path: Path,
    topics: Iterable[tuple[int, str, int]],
    coordinator_log: CoordinatorLog | None = None,
    passivate_after_s: float = 0.0,
    group_config: GroupConfig | None = None,
    read_share: ShareReader | None = None,
) -> AsyncIterator[BrokerContext]:
    config = BrokerConfig(data_dir=tmp_path, socket_request_max_bytes=1 << 20)
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    for org_id, name, partitions in topics:
        data.create_topic(name, partitions, org_id=org_id)
    try:
        async with trio.open_nursery() as nursery:
            registry = GroupRegistry(
                nursery,
                group_config or GroupConfig(initial_rebalance_delay_ms=0),
                coordinator_log or MemoryCoordinatorLog(),
                topics=data.image_of,
                passivate_after_s=passivate_after_s,
                read_share=read_share or partial(read_for_share, data),  # as the broker's
            )
            yield BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE, groups=registry)
            nursery.cancel_scope.cancel()
    finally:
        data.close()
