"""Topic deletions whose offsets are not yet tombstoned in every group: kept durably, so a
broker that stops (or crashes) mid-visit finishes the visit at its next start.

A DeleteTopics deletes the topic at once, then visits every group of its organisation
(`TopicsChangedOp`), which with many groups takes a while. The deletion is written here first,
``topic-deletions.json`` in the data dir (``[{"org": N, "topic": "...", "at_ms": T}]``,
rewritten atomically), and removed once the visit is done. `at_ms` is when the topic was
deleted: only offsets committed up to then are tombstoned, so a visit finished late never
touches the offsets of a topic re-created under the same name since.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .fsutil import DamagedFile, fsync_dir

FILE_NAME = "topic-deletions.json"

Deletion = tuple[int, str, int]  # (org id, topic name, deleted at, ms)


class PendingTopicDeletions:
    def __init__(self, path: Path, pending: list[Deletion]) -> None:
        self._path = path
        self._pending = pending

    @classmethod
    def open(cls, data_dir: Path) -> PendingTopicDeletions:
        path = data_dir / FILE_NAME
        pending: list[Deletion] = []
        if path.exists():
            try:
                for entry in json.loads(path.read_text()):
                    pending.append((int(entry["org"]), str(entry["topic"]), int(entry["at_ms"])))
            except (ValueError, KeyError, TypeError) as exc:
                raise DamagedFile(path, exc) from exc
        return cls(path, pending)

    def pending(self) -> list[Deletion]:
        return list(self._pending)

    def add(self, deletion: Deletion) -> None:
        """Durably, before the topic is deleted."""
        self._write([*self._pending, deletion])

    def done(self, deletion: Deletion) -> None:
        self._write([d for d in self._pending if d != deletion])

    def _write(self, pending: list[Deletion]) -> None:
        rows = [{"org": org, "topic": topic, "at_ms": at} for org, topic, at in pending]
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(rows, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)
        fsync_dir(self._path.parent)
        self._pending = pending
