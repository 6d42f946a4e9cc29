"""The topic catalogue: which topics exist, their ids and their partition logs.

One `TopicStore` per organisation: each org has its own namespace of topic names (and ids).
Org 0 (every connection of a listener without SASL) keeps the single-tenant layout, so data
dirs written before organisations existed open unchanged; org N > 0 lives under ``orgs/<N>/``::

    topics/<name>/topic.json                 {"id": "<uuid>", "partitions": N, "configs": {...}}
    topics/<name>/<partition>/*.log          the partition's segments (see partition_log.py)
    orgs/<N>/topics/<name>/...               the same, for org N

`topic.json` is written atomically (temp file, fsync, rename, fsync of the directory) and only
after the partition directories exist, so a crash mid-create leaves either no topic or a whole
one; a topic directory without `topic.json` is a failed create and is removed at start-up
(one of the writes `open` hands to its `StartupWrites`: it only reads).
Deletion renames the directory to `<name>.<uuid>.deleted` first (atomic) and removes it after.
Topic ids are random version-4 UUIDs, never the zero UUID: librdkafka fetches by id.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..group_common.topic_image import TopicImage, TopicInfo
from .fsutil import DamagedFile, fsync_dir
from .partition_log import PartitionLog
from .startup_writes import StartupWrites
from .topic_configs import effective_long

log = logging.getLogger(__name__)

MAX_NAME_LENGTH = 249
_LEGAL_NAME = re.compile(rf"^[a-zA-Z0-9._-]{{1,{MAX_NAME_LENGTH}}}$")
DELETED_SUFFIX = ".deleted"


class TopicError(Exception):
    """Base of the catalogue's refusals; each maps to one Kafka error code."""


class TopicExists(TopicError):
    pass


class InvalidTopicName(TopicError):
    pass


class InvalidPartitionCount(TopicError):
    pass


@dataclass(slots=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionLog]
    configs: dict[str, str] = field(default_factory=dict)


def validate_topic_name(name: str | None) -> str:
    """The name, or InvalidTopicName with Kafka's message (its Topic.validate)."""
    if name is None or not _LEGAL_NAME.match(name) or name in (".", ".."):
        raise InvalidTopicName(f"Topic name is invalid: {_why_invalid(name)}")
    return name


def _why_invalid(name: str | None) -> str:
    if not name:
        return "the empty string is not allowed"
    if name in (".", ".."):
        return f"'{name}' is not allowed"
    if len(name) > MAX_NAME_LENGTH:
        return f"the length of '{name}' is longer than the max allowed length {MAX_NAME_LENGTH}"
    return (
        f"'{name}' contains one or more characters other than ASCII alphanumerics, '.', '_' and '-'"
    )


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def topics_dir(data_dir: Path, org_id: int) -> Path:
    """Where org `org_id`'s topics live (see the module docstring)."""
    if org_id == 0:
        return data_dir / "topics"
    return data_dir / "orgs" / str(org_id) / "topics"


def stored_orgs(data_dir: Path) -> list[int]:
    """The orgs N > 0 that have a topic directory, in order (start-up opens each one)."""
    orgs = data_dir / "orgs"
    if not orgs.is_dir():
        return []
    found = []
    for entry in orgs.iterdir():
        # Only the canonical spelling: "01" would be a second directory for org 1.
        name = entry.name
        if name.isascii() and name.isdigit() and str(int(name)) == name and int(name) > 0:
            if (entry / "topics").is_dir():
                found.append(int(name))
        else:
            log.warning("ignoring %s: not an organisation's directory", entry)
    return sorted(found)


def _remove_leftover(directory: Path) -> None:
    log.warning("removing incomplete or deleted topic directory %s", directory)
    shutil.rmtree(directory, ignore_errors=True)


class TopicStore:
    """One organisation's topics, by name and by id."""

    def __init__(self, root: Path, *, segment_bytes: int, org_id: int = 0) -> None:
        self._root = root
        self._org_id = org_id  # for the log lines
        self._segment_bytes = segment_bytes
        self._by_name: dict[str, Topic] = {}
        self._by_id: dict[uuid.UUID, Topic] = {}
        self._version = 0
        self._image: TopicImage | None = None

    @classmethod
    def open(
        cls,
        data_dir: Path,
        *,
        segment_bytes: int = 1 << 30,
        org_id: int = 0,
        writes: StartupWrites | None = None,
    ) -> TopicStore:
        """The org's topics as stored; reads only, handing its writes to ``writes`` (made at
        once if None). DamagedFile if a `topic.json` cannot be read back."""
        writes = writes or StartupWrites.now()
        store = cls(topics_dir(data_dir, org_id), segment_bytes=segment_bytes, org_id=org_id)
        if not store._root.is_dir():
            writes.add(lambda: store._root.mkdir(parents=True, exist_ok=True))
            return store
        for entry in sorted(store._root.iterdir()):
            store._load(entry, writes)
        return store

    def _load(self, directory: Path, writes: StartupWrites) -> None:
        meta_path = directory / "topic.json"
        if directory.name.endswith(DELETED_SUFFIX) or not meta_path.exists():
            writes.add(lambda: _remove_leftover(directory))
            return
        try:
            meta = json.loads(meta_path.read_text())
            configs = {str(k): str(v) for k, v in meta["configs"].items()}
            topic_id, partitions = uuid.UUID(meta["id"]), int(meta["partitions"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DamagedFile(meta_path, exc) from exc
        segment_bytes = self._segment_bytes_of(configs)
        logs = [
            PartitionLog.open(directory / str(p), segment_bytes=segment_bytes, writes=writes)
            for p in range(partitions)
        ]
        self._register(Topic(directory.name, topic_id, logs, configs))

    def _register(self, topic: Topic) -> None:
        self._by_name[topic.name] = topic
        self._by_id[topic.topic_id] = topic
        self._changed()

    def _changed(self) -> None:
        self._version += 1
        self._image = None

    def image(self) -> TopicImage:
        """An immutable snapshot for the consumer-group state machines (built once per change)."""
        if self._image is None:
            self._image = TopicImage.of(
                self._version,
                (TopicInfo(t.name, t.topic_id, len(t.partitions)) for t in self._by_name.values()),
            )
        return self._image

    def create(self, name: str, partitions: int, configs: Mapping[str, str] | None = None) -> Topic:
        validate_topic_name(name)
        if name in self._by_name:
            raise TopicExists(f"topic {name!r} already exists")
        if partitions < 1 or partitions > 100_000:
            raise InvalidPartitionCount(f"can't create {partitions} partitions")
        self._make_root()
        directory = self._root / name
        if directory.exists():  # leftover of a crashed create
            shutil.rmtree(directory)
        directory.mkdir()
        segment_bytes = self._segment_bytes_of(configs or {})
        logs: list[PartitionLog] = []
        topic_id = uuid.uuid4()
        meta = {"id": str(topic_id), "partitions": partitions, "configs": dict(configs or {})}
        try:
            for p in range(partitions):
                logs.append(PartitionLog.open(directory / str(p), segment_bytes=segment_bytes))
            _write_atomically(directory / "topic.json", json.dumps(meta).encode())
        except OSError:  # a full disk: nothing of it stays (the next create starts clean)
            for partition in logs:
                partition.close()
            shutil.rmtree(directory, ignore_errors=True)
            raise
        topic = Topic(name, topic_id, logs, dict(configs or {}))
        self._register(topic)
        log.info(
            "created topic %s of org %d (%d partitions, id %s)",
            name,
            self._org_id,
            partitions,
            topic_id,
        )
        return topic

    def _make_root(self) -> None:
        # An org's store is made on disk at its first topic; the new directories' entries must
        # be durable before topic.json is, or a crash could lose a topic that was acknowledged.
        if self._root.is_dir():
            return
        missing = [self._root, *(p for p in self._root.parents if not p.exists())]
        self._root.mkdir(parents=True)
        for directory in missing:
            fsync_dir(directory.parent)

    def delete(self, name: str) -> Topic | None:
        topic = self._by_name.pop(name, None)
        if topic is None:
            return None
        del self._by_id[topic.topic_id]
        self._changed()
        for partition in topic.partitions:
            partition.close()
        directory = self._root / name
        graveyard = directory.with_name(f"{name}.{topic.topic_id.hex}{DELETED_SUFFIX}")
        os.replace(directory, graveyard)
        fsync_dir(self._root)
        shutil.rmtree(graveyard, ignore_errors=True)
        log.info("deleted topic %s of org %d (id %s)", name, self._org_id, topic.topic_id)
        return topic

    # -- configs and partitions added (issue 45) -------------------------------------------

    def _segment_bytes_of(self, configs: Mapping[str, str]) -> int:
        """segment.bytes, or Kafka's internal.segment.bytes (no 1 MiB minimum) if set."""
        size = effective_long(configs, "segment.bytes", self._segment_bytes)
        return max(1, effective_long(configs, "internal.segment.bytes", size))

    def _write_meta(self, topic: Topic, partitions: int, configs: Mapping[str, str]) -> None:
        meta = {"id": str(topic.topic_id), "partitions": partitions, "configs": dict(configs)}
        _write_atomically(self._root / topic.name / "topic.json", json.dumps(meta).encode())

    def alter_configs(self, name: str, configs: Mapping[str, str]) -> Topic:
        """Replace the topic's configs (validated by the caller), durably (on an OSError
        nothing changes); a new segment.bytes applies from each partition's next roll."""
        topic = self._by_name[name]
        self._write_meta(topic, len(topic.partitions), configs)
        topic.configs = dict(configs)
        segment_bytes = self._segment_bytes_of(topic.configs)
        for partition in topic.partitions:
            partition.segment_bytes = segment_bytes
        log.info("topic %s of org %d: configs now %s", name, self._org_id, topic.configs)
        return topic

    def add_partitions(self, name: str, total: int) -> Topic:
        """Grow the topic to `total` partitions (CreatePartitions; the caller checked that
        it grows). The new partitions' directories exist before topic.json names them."""
        topic = self._by_name[name]
        directory = self._root / name
        segment_bytes = self._segment_bytes_of(topic.configs)
        added: list[PartitionLog] = []
        try:
            for index in range(len(topic.partitions), total):
                partition_dir = directory / str(index)
                if partition_dir.exists():  # leftover of a failed CreatePartitions
                    shutil.rmtree(partition_dir)
                added.append(PartitionLog.open(partition_dir, segment_bytes=segment_bytes))
            fsync_dir(directory)
            self._write_meta(topic, total, topic.configs)
        except OSError:
            for partition in added:  # not named by topic.json: removed at the next try
                partition.close()
            raise
        topic.partitions.extend(added)
        self._changed()
        log.info("topic %s of org %d: now %d partitions", name, self._org_id, total)
        return topic

    def by_name(self, name: str) -> Topic | None:
        return self._by_name.get(name)

    def by_id(self, topic_id: uuid.UUID) -> Topic | None:
        return self._by_id.get(topic_id)

    def __iter__(self) -> Iterator[Topic]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def flush(self) -> None:
        for topic in self._by_name.values():
            for partition in topic.partitions:
                partition.flush()

    def close(self) -> None:
        for topic in self._by_name.values():
            for partition in topic.partitions:
                partition.close()
