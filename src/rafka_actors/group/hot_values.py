"""The objects every OffsetCommit, OffsetFetch and Heartbeat makes, with written
``__init__``s for the compiled build.

A commit makes its op and its response (ops.py), the offset the group keeps (state.py) and
the record the coordinator log stores (records.py), and a new group's first commit its group
record too; a fetch and a heartbeat their op and response. A dataclass's generated
``__init__`` runs as Python even in a mypyc-compiled module: 0.16-0.46 us each for the
commit's on the Intel host of session 25 (docs/performance-history.md), about 1 us a commit, 2.5 us
for the fetch's two and 4.2 us for a group record, which were frozen (each field set through
``object.__setattr__``). Written out, in this compiled module, each takes about 0.04 us
(0.2 us the group record). They stay dataclasses for everything else (equality, repr,
``dataclasses.fields``), and their home modules re-export them: import them from there,
except in a compiled module that makes them or reads their fields (the request handlers of
gateway/apis, the repeat paths, group/offsets.py, effects.py, entry_cbor.py): imported
from here, they are native classes to mypyc, which calls their ``__init__`` and reads their
fields directly instead of through a generic call (1.8 us for a group record by keyword) or
attribute lookup.
"""

from __future__ import annotations

from dataclasses import dataclass

# (member id, instance id, client id, client host, rebalance timeout, session timeout,
#  subscription metadata of the chosen protocol, assignment)
MemberRow = tuple[str, str | None, str, str, int, int, bytes, bytes]


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


@dataclass(init=False, slots=True)
class GroupMetadataRecord:
    group_id: str
    cgp_id: str
    protocol_type: str | None
    generation: int
    protocol_name: str | None
    leader_id: str | None
    state_timestamp_ms: int
    members: tuple[MemberRow, ...]
    reason: str  # why the group changed: kept for the rebalance-history pipeline
    # version 1: when the rebalance this record settles began (-1: none), and the members
    # that went away since the previous record, with why ("left", "session timeout", ...)
    rebalance_started_ms: int
    departed: tuple[tuple[str, str], ...]

    def __init__(
        self,
        group_id: str,
        cgp_id: str,
        protocol_type: str | None,
        generation: int,
        protocol_name: str | None,
        leader_id: str | None,
        state_timestamp_ms: int,
        members: tuple[MemberRow, ...],
        reason: str = "",
        rebalance_started_ms: int = -1,
        departed: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.group_id = group_id
        self.cgp_id = cgp_id
        self.protocol_type = protocol_type
        self.generation = generation
        self.protocol_name = protocol_name
        self.leader_id = leader_id
        self.state_timestamp_ms = state_timestamp_ms
        self.members = members
        self.reason = reason
        self.rebalance_started_ms = rebalance_started_ms
        self.departed = departed
