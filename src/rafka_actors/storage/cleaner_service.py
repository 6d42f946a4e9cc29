"""The log cleaner's task: pick the dirtiest compacted partition, clean it, swap the result in.

One round at a time, as one Kafka cleaner thread (`log.cleaner.threads=1`): pick the partition
whose cleanable range (cleaner_plan.py) has the highest dirty ratio among those due, hand the
round to a child process (cleaner_child.py runs log_cleaner.py), then, back on the event loop,
swap each cleaned file in (PartitionLog.replace_segments) and keep the round's end as the
partition's next first dirty offset (in ``<partition>/cleaner-offset-checkpoint``). When no
partition is due, it sleeps `log.cleaner.backoff.ms`.

Appends and fetches go on meanwhile: the child reads only sealed segments, which nothing else
rewrites, and writes only its own files; the swap is a few renames on the event loop, between
two requests, so no read ever sees a half-swapped segment. A segment that retention,
DeleteRecords or a topic deletion took while the child ran is simply not swapped.

A round that fails (a damaged segment, a full disk) is logged; the partition is left alone for
`RETRY_AFTER_MS`, its files unchanged.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from .cleaner_child import job_to_json, result_from_json
from .cleaner_plan import Cleanable, CleanerSettings, SegmentStat, cleanable
from .compaction_child import GONE
from .log_cleaner import CleaningJob, CleaningResult
from .partition_log import PartitionLog
from .segment_swap import CLEANED_SUFFIX, cleaned_path
from .topic_configs import cleanup_policies, effective_float, effective_long
from .topics import Topic

if TYPE_CHECKING:
    from .data_plane import DataPlane

log = logging.getLogger(__name__)

CHECKPOINT = "cleaner-offset-checkpoint"
RETRY_AFTER_MS = 300_000
_NEVER = 2**63 - 1
_CHILD = (sys.executable, "-m", "rafka_actors.storage.cleaner_child")


@dataclass(frozen=True, slots=True)
class CleanerDefaults:
    """The broker's settings: the topics' defaults and the cleaner's own."""

    cleanup_policy: str = "delete"
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = 2**63 - 1
    delete_retention_ms: int = 86_400_000
    backoff_ms: int = 15_000
    dedupe_buffer_size: int = 128 << 20


def settings_of(topic: Topic, defaults: CleanerDefaults) -> CleanerSettings:
    configs = topic.configs
    return CleanerSettings(
        effective_float(configs, "min.cleanable.dirty.ratio", defaults.min_cleanable_ratio),
        effective_long(configs, "min.compaction.lag.ms", defaults.min_compaction_lag_ms),
        effective_long(configs, "max.compaction.lag.ms", defaults.max_compaction_lag_ms),
        effective_long(configs, "delete.retention.ms", defaults.delete_retention_ms),
    )


class CleaningFailed(Exception):
    pass


@dataclass(slots=True)
class _Choice:
    topic: Topic
    index: int
    found: Cleanable
    settings: CleanerSettings


class LogCleanerService:
    def __init__(
        self, data: DataPlane, defaults: CleanerDefaults, command: Sequence[str] = _CHILD
    ) -> None:
        self._data = data
        self._defaults = defaults
        self._command = list(command)
        self._retry_at: dict[Path, int] = {}  # partition directory -> when to try again
        self._checkpoints: dict[Path, int | None] = {}

    async def run(self) -> None:
        """Clean for ever (the broker's services nursery owns and cancels this)."""
        while True:
            try:
                worked = await self.clean_once()
            except Exception:  # a bug here must not stop the broker; the next round retries
                log.exception("log cleaner round failed")
                worked = False
            if not worked:
                await trio.sleep(self._defaults.backoff_ms / 1000)

    async def clean_once(self) -> bool:
        """Clean the dirtiest due partition, if any; whether there was one."""
        now_ms = time.time_ns() // 1_000_000
        choice = self._dirtiest(now_ms)
        if choice is None:
            return False
        partition = choice.topic.partitions[choice.index]
        job = self._job(choice, now_ms)
        try:
            result = await self._run_child(job)
        except CleaningFailed as exc:
            _remove_cleaned(partition.directory)
            if partition.closed:
                return True  # (its topic was deleted meanwhile)
            first = partition.segment_stats()[0][0]
            if job.segments and first != job.segments[0][0]:
                log.info("%s: segments deleted while cleaning; again later", partition.directory)
            else:
                log.warning("%s: cleaning failed: %s", partition.directory, exc)
                self._retry_at[partition.directory] = now_ms + RETRY_AFTER_MS
            return True
        swapped = self._swap(partition, result)
        if not partition.closed:
            self._set_checkpoint(partition.directory, result.end_offset)
        log.info(
            "%s-%d cleaned up to offset %d: %d of %d records kept, %d -> %d bytes, %d segment "
            "file(s) rewritten",
            choice.topic.name,
            choice.index,
            result.end_offset,
            result.records_kept,
            result.records_read,
            result.bytes_before,
            result.bytes_after,
            swapped,
        )
        return True

    def _dirtiest(self, now_ms: int) -> _Choice | None:
        best: _Choice | None = None
        for topic, index, partition in self._compacted():
            if self._retry_at.get(partition.directory, 0) > now_ms or partition.failed:
                continue
            settings = settings_of(topic, self._defaults)
            stats = [
                SegmentStat(*stat, first_ts)
                for stat, first_ts in zip(
                    partition.segment_stats(), partition.first_batch_timestamps(), strict=True
                )
            ]
            found = cleanable(
                stats,
                log_start=partition.log_start_offset,
                log_end=partition.log_end_offset,
                last_stable=self._data.last_stable_offset(topic, index),
                checkpoint=self._checkpoint(partition.directory),
                settings=settings,
                now_ms=now_ms,
            )
            if found is not None and (best is None or found.ratio > best.found.ratio):
                best = _Choice(topic, index, found, settings)
        return best

    def _compacted(self) -> Iterator[tuple[Topic, int, PartitionLog]]:
        """Every compacted partition; on the way, each partition's time rule for rolling
        (a compacted one rolls after max.compaction.lag.ms, as in Kafka; others by size)."""
        for org_id in self._data.orgs():
            for topic in self._data.topics_for(org_id):
                compacted = "compact" in cleanup_policies(
                    topic.configs, self._defaults.cleanup_policy
                )
                lag = settings_of(topic, self._defaults).max_compaction_lag_ms
                roll_after = lag if compacted and lag < _NEVER else None
                for index, partition in enumerate(topic.partitions):
                    partition.roll_after_ms = roll_after
                    if compacted:
                        yield topic, index, partition

    def _job(self, choice: _Choice, now_ms: int) -> CleaningJob:
        partition = choice.topic.partitions[choice.index]
        upper = choice.found.upper_bound
        _lso, aborted, last_batches = self._data.cleaner_facts(choice.topic, choice.index, upper)
        return CleaningJob(
            directory=str(partition.directory),
            segments=[
                (base, size)
                for base, _end, size, _ts in partition.segment_stats()[:-1]
                if base < upper
            ],
            first_dirty=choice.found.first_dirty,
            upper_bound=upper,
            now_ms=now_ms,
            delete_retention_ms=choice.settings.delete_retention_ms,
            segment_bytes=partition.segment_bytes,
            map_budget=self._defaults.dedupe_buffer_size,
            aborted=aborted,
            last_batches=last_batches,
        )

    async def _run_child(self, job: CleaningJob) -> CleaningResult:
        started: list[subprocess.Popen[bytes]] = []

        def run() -> tuple[int, bytes, bytes]:
            # Started and waited for by this worker thread: the child dies with the thread
            # that started it (PR_SET_PDEATHSIG), so that thread must outlive it.
            child = subprocess.Popen(
                self._command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )  # fmt: skip
            started.append(child)
            out, err = child.communicate(job_to_json(job, os.getpid()))
            return child.returncode, out, err

        try:
            returncode, out, err = await trio.to_thread.run_sync(run, abandon_on_cancel=True)
        except OSError as exc:
            raise CleaningFailed(f"cannot start a cleaner process: {exc}") from exc
        except trio.Cancelled:
            for child in started:  # (shutdown: its file is deleted at the next open)
                child.kill()
            raise
        for line in err.decode(errors="replace").splitlines():
            log.warning("cleaner process: %s", line)
        if returncode != 0:
            why = "the broker went away" if returncode == GONE else "it failed"
            raise CleaningFailed(f"the cleaner process exited with {returncode} ({why})")
        try:
            return result_from_json(out)
        except (ValueError, KeyError, TypeError) as exc:
            raise CleaningFailed(f"the cleaner process answered {exc}") from exc

    def _swap(self, partition: PartitionLog, result: CleaningResult) -> int:
        """Swap the round's files in, oldest first; how many were."""
        swapped = 0
        for k, group in enumerate(result.groups):
            try:
                done = partition.replace_segments(group.first, group.last, group.index)
            except OSError as exc:
                log.error("%s: swapping a cleaned segment in failed: %s", partition.directory, exc)
                for rest in result.groups[k:]:
                    cleaned_path(partition.directory, rest.first).unlink(missing_ok=True)
                break
            if done:
                swapped += 1
            else:  # its segments went meanwhile
                cleaned_path(partition.directory, group.first).unlink(missing_ok=True)
        return swapped

    def _checkpoint(self, directory: Path) -> int | None:
        if directory not in self._checkpoints:
            try:
                self._checkpoints[directory] = int((directory / CHECKPOINT).read_text())
            except (OSError, ValueError):
                self._checkpoints[directory] = None  # (the whole log counts as dirty)
        return self._checkpoints[directory]

    def _set_checkpoint(self, directory: Path, offset: int) -> None:
        """Keep the round's end (no fsync: losing it costs a round over the whole log)."""
        self._checkpoints[directory] = offset
        tmp = directory / (CHECKPOINT + ".tmp")
        try:
            tmp.write_text(str(offset))
            os.replace(tmp, directory / CHECKPOINT)
        except OSError as exc:
            log.warning("%s: cleaner checkpoint not written: %s", directory, exc)


def _remove_cleaned(directory: Path) -> None:
    """Delete what a failed round left (only this cleaner writes such files)."""
    try:
        for path in directory.glob("*" + CLEANED_SUFFIX):
            path.unlink(missing_ok=True)
    except OSError:
        pass  # (the directory went with its topic)
