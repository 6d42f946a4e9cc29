"""The broker's data dir at start-up: locked, everything in it read and checked, then written.

`DataDir.open` takes the data dir's lock (storage/data_dir_lock.py) and opens every store in it,
the partition logs, the coordinator and transaction logs, the group and dynamic broker configs
and the pending topic deletions, reading only: what recovery must write waits in a `StartupWrites`
(storage/startup_writes.py) until `write`, which the broker calls once every check of its
start-up has passed (broker.py). A store that is damaged, or a dir that cannot be used or is
another broker's, refuses the start (refusals.py) having written nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from .config import BrokerConfig, kafka_value
from .refusals import CorruptLog, DataDirLocked, unusable_data_dir
from .storage.coordinator_segments import CorruptCoordinatorLog
from .storage.data_dir_lock import LOCK_FILE, DataDirInUse, DataDirLock, lock_data_dir
from .storage.data_plane import DataPlane
from .storage.durable_log import DurableCoordinatorLog
from .storage.fsutil import DamagedFile
from .storage.group_configs import BROKER_CONFIGS_FILE, GroupConfigStore
from .storage.startup_writes import StartupWrites
from .storage.topic_configs import topic_defaults
from .storage.topic_deletions import PendingTopicDeletions

__all__ = ["DataDir", "open_coordinator_log"]

log = logging.getLogger(__name__)


def _lock(data_dir: Path) -> DataDirLock:
    try:
        return lock_data_dir(data_dir)
    except DataDirInUse as exc:
        holder = f"PID {exc.pid}" if exc.pid else "another process"
        raise DataDirLocked(
            f"the data dir {data_dir} is in use by another broker ({holder} holds its {LOCK_FILE})",
            "stop that broker first, or give this one a data dir of its own "
            "(--data-dir DIR, or data.dir)",
        ) from None
    except OSError as exc:
        raise unusable_data_dir(data_dir, exc) from exc


@dataclass(slots=True, eq=False)
class DataDir:
    """The data dir, locked, and everything stored in it, read and checked; `writes` holds
    what start-up must write, which `write` makes (see the module docstring)."""

    lock: DataDirLock
    data_dir: Path
    data: DataPlane
    coordinator: DurableCoordinatorLog
    txn_log: DurableCoordinatorLog
    group_configs: GroupConfigStore
    broker_configs: GroupConfigStore
    topic_deletions: PendingTopicDeletions
    writes: StartupWrites
    written: bool = False

    @classmethod
    def open(cls, config: BrokerConfig) -> DataDir:
        """Lock the data dir and read everything in it, writing nothing (refused if it is
        another broker's, unusable or damaged)."""
        lock = _lock(config.data_dir)
        writes = StartupWrites()
        opened: list[DurableCoordinatorLog] = []
        data = None
        try:
            data = _open_data_plane(config, writes)
            opened.append(open_coordinator_log(config, writes=writes))
            opened.append(open_coordinator_log(config, name="transactions", writes=writes))
            group_configs, broker_configs, topic_deletions = _open_admin_state(config)
        except BaseException:
            for coordinator_log in opened:
                coordinator_log.close()
            if data is not None:
                data.close(snapshots=False)
            lock.release()
            raise
        coordinator, txn_log = opened
        return cls(
            lock,
            config.data_dir,
            data,
            coordinator,
            txn_log,
            group_configs,
            broker_configs,
            topic_deletions,
            writes,
        )

    def write(self) -> None:
        try:
            self.writes.apply()
        except OSError as exc:
            raise unusable_data_dir(self.data_dir, exc) from exc
        self.written = True

    def close(self) -> None:
        """Close every log (the coordinator logs' `run` closes them once started: closing
        again does nothing), then let another broker have the dir."""
        try:
            self.coordinator.close()
            self.txn_log.close()
            self.data.close(snapshots=self.written)
            if self.written:
                log.info("logs flushed and closed")
        finally:
            self.lock.release()


def _open_data_plane(config: BrokerConfig, writes: StartupWrites | None = None) -> DataPlane:
    with _refused_if_unreadable(config.data_dir):
        data = DataPlane.open(
            config.data_dir,
            segment_bytes=config.log_segment_bytes,
            topic_defaults=topic_defaults(partial(kafka_value, config)),
            writes=writes,
        )
    # markers as durable as the coordinator's Complete record, no more (storage/data_plane.py)
    data.fsync_markers = config.coordinator_log_fsync == "always"
    return data


def _open_admin_state(
    config: BrokerConfig,
) -> tuple[GroupConfigStore, GroupConfigStore, PendingTopicDeletions]:
    """The dynamic group and broker configs and the unfinished topic deletions (issue 45)."""
    with _refused_if_unreadable(config.data_dir):
        return (
            GroupConfigStore.open(config.data_dir),
            GroupConfigStore.open(config.data_dir, BROKER_CONFIGS_FILE),
            PendingTopicDeletions.open(config.data_dir),
        )


@contextmanager
def _refused_if_unreadable(data_dir: Path) -> Iterator[None]:
    """A damaged state file (a topic.json, group-configs.json, ...) or an unusable data dir
    refuses to start, naming it (refusals.py)."""
    try:
        yield
    except DamagedFile as exc:
        raise CorruptLog(
            str(exc), f"restore {exc.path.name} from a backup, or fix its JSON by hand"
        ) from exc
    except OSError as exc:
        raise unusable_data_dir(data_dir, exc) from exc


def open_coordinator_log(
    config: BrokerConfig, name: str = "coordinator", *, writes: StartupWrites | None = None
) -> DurableCoordinatorLog:
    """The groups' log ("coordinator") or the transaction log ("transactions"), replayed; a
    damaged one or an unusable directory refuses to start (refusals.py). Recovery's writes go
    to ``writes`` (made at once if None)."""
    try:
        return _open_coordinator_log(config, name, writes)
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


def _open_coordinator_log(
    config: BrokerConfig, name: str, writes: StartupWrites | None
) -> DurableCoordinatorLog:
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
        writes=writes,
    )
