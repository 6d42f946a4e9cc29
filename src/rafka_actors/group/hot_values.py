"""The objects every OffsetCommit, OffsetFetch and Heartbeat makes, with written
``__init__``s for the compiled build.

A commit makes its op and its response (ops.py), the offset the group keeps (state.py) and
the record the coordinator log stores (records.py); a fetch and a heartbeat their op and
response. A dataclass's generated ``__init__`` runs as Python even in a mypyc-compiled
module: 0.16-0.46 us each for the commit's on the Intel host of session 25
(docs/performance.md), about 1 us a commit, and 2.5 us for the fetch's two, which were
frozen (each field set through ``object.__setattr__``). Written out, in this compiled
module, each takes about 0.04 us. They stay dataclasses for everything else (equality, repr,
``dataclasses.fields``), and their home modules re-export them: import them from there,
except in a compiled module that reads their fields (offsets.py, commit_repeat.py,
commit_entry.py): imported from here, they are native classes to mypyc, whose fields it
reads directly instead of through a generic attribute lookup.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(init=False, slots=True)
class OffsetCommitOp:
    group_id: str
    # (topic, partition, offset, leader epoch, metadata)
    offsets: tuple[tuple[str, int, int, int, str | None], ...]
    member_id: str
    generation_id: int
    group_instance_id: str | None
    api_version: int  # v9+ answers an unknown group with GROUP_ID_NOT_FOUND

    def __init__(
        self,
        group_id: str,
        offsets: tuple[tuple[str, int, int, int, str | None], ...],
        member_id: str = "",  # ops.UNKNOWN_MEMBER
        generation_id: int = -1,  # ops.NO_GENERATION
        group_instance_id: str | None = None,
        api_version: int = 9,
    ) -> None:
        self.group_id = group_id
        self.offsets = offsets
        self.member_id = member_id
        self.generation_id = generation_id
        self.group_instance_id = group_instance_id
        self.api_version = api_version


@dataclass(init=False, slots=True)
class OffsetCommitOpResp:
    results: tuple[tuple[str, int, int], ...]  # (topic, partition, error)

    def __init__(self, results: tuple[tuple[str, int, int], ...]) -> None:
        self.results = results


@dataclass(init=False, slots=True)
class CommittedOffset:
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int

    def __init__(
        self, offset: int, leader_epoch: int, metadata: str | None, commit_timestamp_ms: int
    ) -> None:
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp_ms = commit_timestamp_ms


@dataclass(init=False, slots=True)
class OffsetCommitRecord:
    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp_ms: int

    def __init__(
        self,
        group_id: str,
        topic: str,
        partition: int,
        offset: int,
        leader_epoch: int,
        metadata: str | None,
        commit_timestamp_ms: int,
    ) -> None:
        self.group_id = group_id
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.leader_epoch = leader_epoch
        self.metadata = metadata
        self.commit_timestamp_ms = commit_timestamp_ms


@dataclass(init=False, slots=True)
class OffsetFetchOp:
    group_id: str
    partitions: tuple[tuple[str, int], ...] | None  # None: every committed offset
    require_stable: bool
    member_id: str | None  # v9+: a consumer-group member fetching (checked by epoch)
    member_epoch: int

    def __init__(
        self,
        group_id: str,
        partitions: tuple[tuple[str, int], ...] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> None:
        self.group_id = group_id
        self.partitions = partitions
        self.require_stable = require_stable
        self.member_id = member_id
        self.member_epoch = member_epoch


@dataclass(init=False, slots=True)
class OffsetFetchOpResp:
    error_code: int
    # (topic, partition, offset (-1: none), leader epoch, metadata, error)
    offsets: tuple[tuple[str, int, int, int, str | None, int], ...]

    def __init__(
        self, error_code: int, offsets: tuple[tuple[str, int, int, int, str | None, int], ...] = ()
    ) -> None:
        self.error_code = error_code
        self.offsets = offsets


@dataclass(init=False, slots=True)
class HeartbeatOp:
    group_id: str
    member_id: str
    generation_id: int
    group_instance_id: str | None

    def __init__(
        self,
        group_id: str,
        member_id: str,
        generation_id: int,
        group_instance_id: str | None = None,
    ) -> None:
        self.group_id = group_id
        self.member_id = member_id
        self.generation_id = generation_id
        self.group_instance_id = group_instance_id


@dataclass(init=False, slots=True)
class HeartbeatOpResp:
    error_code: int

    def __init__(self, error_code: int) -> None:
        self.error_code = error_code
