"""The broker process: open the logs, bind the listener, serve connections, shut down cleanly.

Start-up order matters: every log is recovered before the listener accepts anything, and
`listening on HOST:PORT` is logged only once connections can be served (`task_status.started`
carries the bound address, so `--listen 127.0.0.1:0` works for tests). Shutdown is the reverse:
cancelling the broker cancels the listener and every connection (an in-flight request's
connection is closed unanswered, which clients retry), then the logs are flushed and closed.
"""

from __future__ import annotations

import logging
from functools import partial

import trio
from tricycle import open_service_nursery

from ..actors.data_plane import DataPlane
from ..actors.durable_log import DurableCoordinatorLog
from ..actors.registry import GroupRegistry
from ..config import BrokerConfig, consumer_assignors
from ..group.effects import GroupConfig
from .apis import API_TABLE
from .connection import serve_connection
from .context import BrokerContext, ConnectionInfo

log = logging.getLogger(__name__)


async def run_broker(
    config: BrokerConfig,
    *,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    # Every log is recovered (the coordinator log replayed) before anything is accepted.
    data = DataPlane.open(config.data_dir, segment_bytes=config.log_segment_bytes)
    try:
        coordinator = open_coordinator_log(config)
        listeners = await trio.open_tcp_listeners(config.listen_port, host=config.listen_host)
        host, port = listeners[0].socket.getsockname()[:2]
        # Shutdown runs inside out: the gateway stops first, then the actors answer what they
        # still hold, then the coordinator log flushes and closes, then the partition logs.
        async with open_service_nursery() as storage:
            await storage.start(coordinator.run)
            async with open_service_nursery() as services:
                services.start_soon(_flush_periodically, data, config.log_flush_interval_ms)
                registry = GroupRegistry(
                    services, group_config(config), coordinator, topics=data.topics.image
                )
                services.start_soon(
                    registry.expire_offsets_periodically,
                    config.offsets_retention_check_interval_ms,
                    config.offsets_retention_minutes * 60_000,
                )
                resumed = registry.resume()
                log.info(
                    "coordinator log replayed: %d groups, %d with members",
                    len(coordinator.keys()),
                    resumed,
                )
                ctx = BrokerContext(
                    config=config,
                    data=data,
                    advertised_host=config.kafka_client_host or host,
                    advertised_port=config.kafka_client_port or port,
                    apis=API_TABLE,
                    groups=registry,
                )
                async with trio.open_nursery() as gateway:
                    serve = partial(trio.serve_listeners, partial(_serve, ctx), listeners)
                    await gateway.start(serve)
                    log.info("listening on %s:%d", host, port)
                    task_status.started((host, port))
    finally:
        data.close()
        log.info("logs flushed and closed")


def open_coordinator_log(config: BrokerConfig) -> DurableCoordinatorLog:
    return DurableCoordinatorLog.open(
        config.data_dir,
        fsync_policy=config.coordinator_log_fsync,
        fsync_interval_ms=config.coordinator_log_fsync_interval_ms,
        segment_bytes=config.coordinator_log_segment_bytes,
        compaction_interval_ms=config.coordinator_log_compaction_interval_ms,
        tombstone_retention_ms=config.coordinator_log_tombstone_retention_ms,
        skip_corruption=config.coordinator_log_skip_corruption,
    )


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        max_size=config.group_max_size,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        consumer_assignors=consumer_assignors(config),
        consumer_assignment_interval_ms=config.group_consumer_assignment_interval_ms,
        consumer_max_size=config.group_consumer_max_size,
    )


async def _serve(ctx: BrokerContext, stream: trio.SocketStream) -> None:
    try:
        peer_host, peer_port = stream.socket.getpeername()[:2]
    except OSError:  # already gone
        await stream.aclose()
        return
    await serve_connection(stream, ctx, ctx.apis, ConnectionInfo(peer_host, peer_port))


async def _flush_periodically(data: DataPlane, interval_ms: int) -> None:
    """fsync written partitions on a timer (`log.flush.interval.ms`); appends don't wait."""
    interval = max(interval_ms, 1) / 1000
    while True:
        await trio.sleep(interval)
        data.flush()
