"""The broker's composition root: check, bind, lock, read, write, serve, shut down cleanly.

`run_broker` wires storage (partition logs, the coordinator and transaction logs), the
registries of actors, the metrics and the gateway, each in the nursery that owns it.

Start-up order matters, so that a start that is refused changes nothing on disk (refusals.py)
and one broker only ever writes a data dir:

1. the settings are checked, and the files they name (TLS, users) must be readable;
2. every listener is bound (the clients' and the metrics'), which may be refused;
3. the data dir is locked (storage/data_dir_lock.py), as Kafka locks its log dirs;
4. everything stored is read and checked, writing nothing (data_dir.py): the partition
   logs, the coordinator and transaction logs (replayed), the group configs and pending
   topic deletions, the users file. What recovery must write (a torn tail to cut, leftovers
   to remove, ...) is held in a `StartupWrites`, and ``on_checked`` is called: only a write
   the disk refuses can stop the start now;
5. the held writes are made, then the rest of start-up writes (the SASL secret);
6. the actors resume and the listener serves: `listening on HOST:PORT` is logged only once
   connections can be served (`task_status.started` carries the bound address, so
   `--listen 127.0.0.1:0` works for tests).

Shutdown is the reverse: cancelling the broker cancels the listener and every connection (an
in-flight request's connection is closed unanswered, which clients retry), then the logs are
flushed and closed, then the lock is released.
"""

from __future__ import annotations

import logging
import os
import secrets
from collections.abc import Callable
from contextlib import AsyncExitStack
from functools import partial
from pathlib import Path
from typing import Any

import trio
from tricycle import open_service_nursery

from . import log_budget
from .actors.group_registry import GroupRegistry
from .actors.txn_markers import MarkerWriter
from .actors.txn_registry import TransactionRegistry
from .auth.users import UsersFileError, UserStore
from .config import BrokerConfig, ConfigError, consumer_assignors, sasl_mechanisms
from .data_dir import DataDir
from .gateway.apis import API_TABLE
from .gateway.context import BrokerContext, SaslSetup
from .gateway.limits import ConnectionLimits
from .gateway.server import bound_address, open_listeners, serve_client
from .group_common.effects import GroupConfig
from .group_common.ops import TopicsChangedOp
from .metrics.setup import MetricsEndpoint, bind_metrics, start_metrics
from .refusals import MissingFile
from .storage.cleaner_service import CleanerDefaults, LogCleanerService
from .storage.data_plane import DataPlane
from .storage.disk_space import DiskSpace
from .storage.retention import retain_periodically
from .storage.share_reads import read_for_share
from .storage.topic_deletions import Deletion, PendingTopicDeletions
from .transaction.state import TxnConfig

log = logging.getLogger(__name__)

PASSWORD_HASH_THREADS = 2  # PLAIN hashing may use this many cores at most (of a 2-core box)


def cleaner_defaults(config: BrokerConfig) -> CleanerDefaults:
    return CleanerDefaults(
        cleanup_policy=config.log_cleanup_policy,
        min_cleanable_ratio=config.log_cleaner_min_cleanable_ratio,
        min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
        max_compaction_lag_ms=config.log_cleaner_max_compaction_lag_ms,
        delete_retention_ms=config.log_cleaner_delete_retention_ms,
        backoff_ms=config.log_cleaner_backoff_ms,
        dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
    )


async def run_broker(
    config: BrokerConfig,
    *,
    on_checked: Callable[[], None] | None = None,
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until cancelled; a StartupRefusal (or ConfigError) if it cannot start, having
    written nothing. ``on_checked`` is called once every check has passed (only a write the
    disk refuses can stop the start after it)."""
    _check_named_files(config)
    async with AsyncExitStack() as stack:
        listeners = await open_listeners(config)
        for listener in listeners:
            stack.push_async_callback(trio.aclose_forcefully, listener)
        metrics_endpoint = await bind_metrics(config)
        if metrics_endpoint is not None:
            stack.push_async_callback(trio.aclose_forcefully, metrics_endpoint.listener)
        storage = DataDir.open(config)
        stack.callback(storage.close)
        users = load_users(config)
        if on_checked is not None:
            on_checked()
        storage.write()
        sasl = sasl_setup(config, users)
        await _serve(config, storage, sasl, listeners, metrics_endpoint, task_status)


async def _serve(
    config: BrokerConfig,
    storage: DataDir,
    sasl: SaslSetup | None,
    listeners: list[trio.abc.Listener[Any]],
    metrics_endpoint: MetricsEndpoint | None,
    task_status: trio.TaskStatus[tuple[str, int]],
) -> None:
    data, coordinator, txn_log = storage.data, storage.coordinator, storage.txn_log
    host, port = bound_address(listeners[0])
    # Shutdown runs inside out: the gateway stops first, then the actors answer what they
    # still hold, then the coordinator log flushes and closes, then the partition logs.
    async with open_service_nursery() as storage_nursery:
        await storage_nursery.start(coordinator.run)
        await storage_nursery.start(txn_log.run)
        async with open_service_nursery() as services:
            disk_space = _start_data_services(config, data, services)
            registry = GroupRegistry(
                services,
                group_config(config),
                coordinator,
                topics=data.image_of,
                read_share=partial(read_for_share, data),
                passivate_after_s=config.group_passivation_idle_ms / 1000,
                idle_grace_s=config.group_actor_idle_grace_ms / 1000,
                commit_timeout_s=config.offsets_commit_timeout_ms / 1000,
                group_overrides=lambda key: storage.group_configs.get(
                    key.org_id, key.group_id
                ).items(),
            )
            metrics = await start_metrics(
                config, services, registry, coordinator, data, metrics_endpoint
            )
            _resume_groups(config, services, registry, storage)
            transactions = _resume_transactions(config, services, storage, registry)
            ctx = BrokerContext(
                config=config,
                data=data,
                advertised_host=config.kafka_client_host or host,
                advertised_port=config.kafka_client_port or port,
                apis=API_TABLE,
                groups=registry,
                transactions=transactions,
                limits=ConnectionLimits(
                    config.max_connections,
                    config.max_connections_per_ip,
                    config.max_connections_per_user,
                ),
                sasl=sasl,
                group_configs=storage.group_configs,
                broker_configs=storage.broker_configs,
                topic_deletions=storage.topic_deletions,
                metrics=metrics,
                disk_space=disk_space,
            )
            async with trio.open_nursery() as gateway:
                serve = partial(trio.serve_listeners, partial(serve_client, ctx), listeners)
                await gateway.start(serve)
                log.info("listening on %s:%d (%s)", host, port, config.listener_security_protocol)
                task_status.started((host, port))


def _start_data_services(
    config: BrokerConfig, data: DataPlane, services: trio.Nursery
) -> DiskSpace:
    """The partition logs' timers (flush, retention, the log cleaner, producer expiry) and
    the free-space watch, which it returns."""
    services.start_soon(_flush_periodically, data, config.log_flush_interval_ms)
    services.start_soon(
        retain_periodically,
        data,
        config.log_retention_check_interval_ms,
        config.log_retention_ms,
        config.log_retention_bytes,
        config.log_cleanup_policy,
    )
    if config.log_cleaner_enable:
        services.start_soon(LogCleanerService(data, cleaner_defaults(config)).run)
    services.start_soon(
        data.expire_producers_periodically,
        config.producer_id_expiration_ms,
        config.producer_id_expiration_check_interval_ms,
    )
    services.start_soon(log_budget.flush_forever)  # counts of ended intervals
    disk_space = DiskSpace(config.data_dir, config.log_dir_free_space_warning_bytes)
    services.start_soon(disk_space.run)
    return disk_space


def _resume_groups(
    config: BrokerConfig, services: trio.Nursery, registry: GroupRegistry, storage: DataDir
) -> None:
    services.start_soon(
        registry.expire_offsets_periodically,
        config.offsets_retention_check_interval_ms,
        config.offsets_retention_minutes * 60_000,
    )
    pending = storage.topic_deletions
    for deletion in pending.pending():  # a visit cut short: finish it
        services.start_soon(_finish_topic_deletion, registry, pending, deletion)
    resumed = registry.resume()
    log.info(
        "coordinator log replayed: %d groups, %d with members",
        len(storage.coordinator.keys()),
        resumed,
    )


def _resume_transactions(
    config: BrokerConfig, services: trio.Nursery, storage: DataDir, registry: GroupRegistry
) -> TransactionRegistry:
    transactions = TransactionRegistry(
        services,
        TxnConfig(
            max_timeout_ms=config.transaction_max_timeout_ms,
            transaction_version=config.transaction_version,
        ),
        storage.txn_log,
        MarkerWriter(storage.data, registry.ask),
        storage.data.producer_ids.allocate,
        commit_timeout_s=config.offsets_commit_timeout_ms / 1000,
    )
    services.start_soon(
        transactions.expire_periodically,
        config.transaction_remove_expired_transaction_cleanup_interval_ms,
        config.transactional_id_expiration_ms,
    )
    resumed_txns = transactions.resume()
    log.info("transaction log replayed: %d open transactions resumed", resumed_txns)
    return transactions


def group_config(config: BrokerConfig) -> GroupConfig:
    return GroupConfig(
        initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        min_session_timeout_ms=config.group_min_session_timeout_ms,
        max_session_timeout_ms=config.group_max_session_timeout_ms,
        max_size=config.group_max_size,
        offset_metadata_max_bytes=config.offset_metadata_max_bytes,
        consumer_session_timeout_ms=config.group_consumer_session_timeout_ms,
        consumer_heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
        consumer_rebalance_heartbeat_interval_ms=(
            config.group_consumer_rebalance_heartbeat_interval_ms
        ),
        consumer_assignors=consumer_assignors(config),
        consumer_assignment_interval_ms=config.group_consumer_assignment_interval_ms,
        consumer_max_size=config.group_consumer_max_size,
        consumer_migration_policy=config.group_consumer_migration_policy,
        share_session_timeout_ms=config.group_share_session_timeout_ms,
        share_heartbeat_interval_ms=config.group_share_heartbeat_interval_ms,
        share_max_size=config.group_share_max_size,
        share_record_lock_duration_ms=config.group_share_record_lock_duration_ms,
        share_delivery_count_limit=config.group_share_delivery_count_limit,
        share_partition_max_record_locks=config.group_share_partition_max_record_locks,
        share_auto_offset_reset=config.share_auto_offset_reset,
    )


def _check_named_files(config: BrokerConfig) -> None:
    """The files the settings name are there and readable, before anything is opened."""
    if config.ssl_enabled:
        _readable(config.ssl_certificate_location, "ssl.certificate.location")
        _readable(config.ssl_key_location, "ssl.key.location")
    if config.sasl_enabled:
        _readable(str(config.users_file), "sasl.users.file")


def _readable(path: str, key: str) -> None:
    """A file a setting names must be there, or the broker refuses to start."""
    if not path:
        return
    try:
        with open(path, "rb"):
            pass
    except OSError as exc:
        raise MissingFile(
            f"cannot read {path} ({key}): {exc.strerror}", f"fix {key} or the file's permissions"
        ) from exc


def load_users(config: BrokerConfig) -> UserStore | None:
    """The users a SASL listener admits, read once at start-up (None: no SASL)."""
    if not config.sasl_enabled:
        return None
    try:
        users = UserStore.load(config.users_file)
    except UsersFileError as exc:
        raise ConfigError(f"sasl.users.file: {exc}") from exc
    log.info("SASL users: %d from %s", len(users.users), config.users_file)
    return users


def sasl_setup(config: BrokerConfig, users: UserStore | None) -> SaslSetup | None:
    """What a SASL listener needs: the users, and the data dir's secret (written the first
    time, so only once the start can no longer be refused)."""
    if users is None:
        return None
    return SaslSetup(
        mechanisms=sasl_mechanisms(config),
        users=users,
        fake_salt_key=_broker_secret(config.data_dir),
        hash_limiter=trio.CapacityLimiter(PASSWORD_HASH_THREADS),
    )


def _broker_secret(data_dir: Path) -> bytes:
    """32 random bytes kept in the data dir: an unknown user's SCRAM salt stays the same
    across restarts, so a restart doesn't reveal which user names exist."""
    path = data_dir / "sasl-secret"
    if not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_bytes(32))
            f.flush()
            os.fsync(f.fileno())
    return path.read_bytes()


async def _finish_topic_deletion(
    registry: GroupRegistry, pending: PendingTopicDeletions, deletion: Deletion
) -> None:
    """Tombstone a deleted topic's offsets in every group of its org, as its DeleteTopics
    began to before the broker stopped (only those committed until the deletion)."""
    org_id, topic, at_ms = deletion
    log.info("finishing the deletion of topic %s of org %d: its groups' offsets", topic, org_id)
    op = TopicsChangedOp((topic,), at_ms)
    await registry.ask_groups_of(
        org_id, op, stored_too=True, finished=lambda: pending.done(deletion)
    )


async def _flush_periodically(data: DataPlane, interval_ms: int) -> None:
    """fsync written partitions on a timer (`log.flush.interval.ms`); appends don't wait."""
    interval = max(interval_ms, 1) / 1000
    while True:
        await trio.sleep(interval)
        data.flush()
