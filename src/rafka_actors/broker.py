"""The broker's composition root: open the logs, bind the listener, serve, shut down cleanly.

`run_broker` wires storage (partition logs, the coordinator and transaction logs), the
registries of actors, the metrics and the gateway, each in the nursery that owns it.

Start-up order matters: every log is recovered before the listener accepts anything, and
`listening on HOST:PORT` is logged only once connections can be served (`task_status.started`
carries the bound address, so `--listen 127.0.0.1:0` works for tests). Shutdown is the reverse:
cancelling the broker cancels the listener and every connection (an in-flight request's
connection is closed unanswered, which clients retry), then the logs are flushed and closed.
"""

from __future__ import annotations

import logging
import os
import secrets
from functools import partial
from pathlib import Path

import trio
from tricycle import open_service_nursery

from . import log_budget
from .actors.registry import GroupRegistry
from .actors.txn_markers import MarkerWriter
from .actors.txn_registry import TransactionRegistry
from .auth.users import UsersFileError, UserStore
from .config import BrokerConfig, ConfigError, consumer_assignors, sasl_mechanisms
from .gateway.apis import API_TABLE
from .gateway.context import BrokerContext, SaslSetup
from .gateway.limits import ConnectionLimits
from .gateway.server import bound_address, open_listeners, serve_client
from .group_common.effects import GroupConfig
from .group_common.ops import TopicsChangedOp
from .metrics.setup import start_metrics
from .refusals import CorruptLog, MissingFile, unusable_data_dir
from .storage.cleaner_service import CleanerDefaults, LogCleanerService
from .storage.coordinator_segments import CorruptCoordinatorLog
from .storage.data_plane import DataPlane
from .storage.disk_space import DiskSpace
from .storage.durable_log import DurableCoordinatorLog
from .storage.fsutil import DamagedFile
from .storage.group_configs import GroupConfigStore
from .storage.retention import retain_periodically
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
    task_status: trio.TaskStatus[tuple[str, int]] = trio.TASK_STATUS_IGNORED,
) -> None:
    _check_named_files(config)
    # Every log is recovered (the coordinator log replayed) before anything is accepted.
    data = _open_data_plane(config)
    try:
        coordinator = open_coordinator_log(config)
        txn_log = open_coordinator_log(config, name="transactions")
        group_configs, topic_deletions = _open_admin_state(config)
        sasl = sasl_setup(config)
        listeners = await open_listeners(config)
        host, port = bound_address(listeners[0])
        # Shutdown runs inside out: the gateway stops first, then the actors answer what they
        # still hold, then the coordinator log flushes and closes, then the partition logs.
        async with open_service_nursery() as storage:
            await storage.start(coordinator.run)
            await storage.start(txn_log.run)
            async with open_service_nursery() as services:
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
                registry = GroupRegistry(
                    services,
                    group_config(config),
                    coordinator,
                    topics=data.image_of,
                    passivate_after_s=config.group_passivation_idle_ms / 1000,
                    commit_timeout_s=config.offsets_commit_timeout_ms / 1000,
                    group_overrides=lambda key: group_configs.get(key.org_id, key.group_id).items(),
                )
                metrics = await start_metrics(config, services, registry, coordinator, data)
                services.start_soon(
                    registry.expire_offsets_periodically,
                    config.offsets_retention_check_interval_ms,
                    config.offsets_retention_minutes * 60_000,
                )
                for deletion in topic_deletions.pending():  # a visit cut short: finish it
                    services.start_soon(_finish_topic_deletion, registry, topic_deletions, deletion)
                resumed = registry.resume()
                log.info(
                    "coordinator log replayed: %d groups, %d with members",
                    len(coordinator.keys()),
                    resumed,
                )
                transactions = TransactionRegistry(
                    services,
                    TxnConfig(max_timeout_ms=config.transaction_max_timeout_ms),
                    txn_log,
                    MarkerWriter(data, registry.ask),
                    data.producer_ids.allocate,
                    commit_timeout_s=config.offsets_commit_timeout_ms / 1000,
                )
                services.start_soon(
                    transactions.expire_periodically,
                    config.transaction_remove_expired_transaction_cleanup_interval_ms,
                    config.transactional_id_expiration_ms,
                )
                resumed_txns = transactions.resume()
                log.info("transaction log replayed: %d open transactions resumed", resumed_txns)
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
                    group_configs=group_configs,
                    topic_deletions=topic_deletions,
                    metrics=metrics,
                    disk_space=disk_space,
                )
                async with trio.open_nursery() as gateway:
                    serve = partial(trio.serve_listeners, partial(serve_client, ctx), listeners)
                    await gateway.start(serve)
                    log.info(
                        "listening on %s:%d (%s)", host, port, config.listener_security_protocol
                    )
                    task_status.started((host, port))
    finally:
        data.close()
        log.info("logs flushed and closed")


def _open_data_plane(config: BrokerConfig) -> DataPlane:
    try:
        data = DataPlane.open(config.data_dir, segment_bytes=config.log_segment_bytes)
        # markers as durable as the coordinator's Complete record, no more (storage/data_plane.py)
        data.fsync_markers = config.coordinator_log_fsync == "always"
        return data
    except OSError as exc:
        raise unusable_data_dir(config.data_dir, exc) from exc


def _open_admin_state(config: BrokerConfig) -> tuple[GroupConfigStore, PendingTopicDeletions]:
    """The dynamic group configs and the unfinished topic deletions (issue 45); a damaged
    file refuses to start, naming it (refusals.py)."""
    try:
        return GroupConfigStore.open(config.data_dir), PendingTopicDeletions.open(config.data_dir)
    except DamagedFile as exc:
        raise CorruptLog(
            str(exc), f"restore {exc.path.name} from a backup, or fix its JSON by hand"
        ) from exc
    except OSError as exc:
        raise unusable_data_dir(config.data_dir, exc) from exc


def open_coordinator_log(config: BrokerConfig, name: str = "coordinator") -> DurableCoordinatorLog:
    """The groups' log ("coordinator") or the transaction log ("transactions"), replayed; a
    damaged one or an unusable directory refuses to start (refusals.py)."""
    try:
        return _open_coordinator_log(config, name)
    except CorruptCoordinatorLog as exc:
        raise CorruptLog(
            f"the {name} log is damaged: {exc}",
            "restore the data dir from a backup; or start once with "
            "-o coordinator.log.skip.corruption=true to skip the damaged bytes, which loses the "
            + (
                "group records and committed offsets stored in them (a warning names those groups)"
                if name == "coordinator"
                else "transaction states stored in them (a warning names those ids)"
            ),
        ) from exc
    except OSError as exc:
        raise unusable_data_dir(config.data_dir, exc) from exc


def _open_coordinator_log(config: BrokerConfig, name: str) -> DurableCoordinatorLog:
    return DurableCoordinatorLog.open(
        config.data_dir,
        fsync_policy=config.coordinator_log_fsync,
        fsync_interval_ms=config.coordinator_log_fsync_interval_ms,
        segment_bytes=config.coordinator_log_segment_bytes,
        preallocate_bytes=config.coordinator_log_preallocate_bytes,
        compaction_interval_ms=config.coordinator_log_compaction_interval_ms,
        tombstone_retention_ms=config.coordinator_log_tombstone_retention_ms,
        skip_corruption=config.coordinator_log_skip_corruption,
        name=name,
        bulk=name == "coordinator",  # the transaction log holds no offsets to take in bulk
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


def sasl_setup(config: BrokerConfig) -> SaslSetup | None:
    """The users and secrets a SASL listener needs, read once at start-up."""
    if not config.sasl_enabled:
        return None
    try:
        users = UserStore.load(config.users_file)
    except UsersFileError as exc:
        raise ConfigError(f"sasl.users.file: {exc}") from exc
    log.info("SASL users: %d from %s", len(users.users), config.users_file)
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
