"""The KIP-932 ops a share group takes, and their answers: ShareGroupHeartbeat and
ShareGroupDescribe, a ShareFetch (`ShareFetchOp`: one turn of the group's actor, which steps its
two halves `ShareSessionOp` and `ShareAcquireOp` with the read of the partitions between them),
a ShareAcknowledge (`ShareSessionOp` alone), and the share-offset admin ops."""

from __future__ import annotations

from dataclasses import dataclass

from ..group_common.ops import TopicPartitions

SharePartitionId = tuple[str, int]  # (topic name, partition)
# (topic, partition, first offset, last offset, acknowledge types: one, or one per record)
ShareAck = tuple[str, int, int, int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatOp:
    """ShareGroupHeartbeat: join (epoch 0), heartbeat, leave (-1). A None subscription did
    not change since the member's last heartbeat."""

    group_id: str
    member_id: str
    member_epoch: int
    rack_id: str | None = None
    subscribed_topic_names: tuple[str, ...] | None = None
    client_id: str = ""
    client_host: str = ""

    def error_reply(self, code: int, message: str | None = None) -> ShareGroupHeartbeatOpResp:
        return ShareGroupHeartbeatOpResp(code, message)


@dataclass(frozen=True, slots=True)
class ShareGroupHeartbeatOpResp:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged since the last response


@dataclass(frozen=True, slots=True)
class ShareGroupDescribeOp:
    group_id: str

    def error_reply(self, code: int, message: str | None = None) -> ShareGroupDescribeOpResp:
        return ShareGroupDescribeOpResp(code, message)


# (member id, rack id, member epoch, client id, client host, subscribed topic names, assignment)
DescribedShareMember = tuple[str, str | None, int, str, str, tuple[str, ...], TopicPartitions]


@dataclass(frozen=True, slots=True)
class ShareGroupDescribeOpResp:
    error_code: int
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedShareMember, ...] = ()
    cgp_id: str = ""


@dataclass(frozen=True, slots=True)
class ShareSessionOp:
    """The first half of a ShareFetch (fetching=True), or a whole ShareAcknowledge: the share
    session's epoch is checked and its partitions updated, and the acknowledgements applied."""

    group_id: str
    member_id: str
    session_epoch: int
    added: tuple[SharePartitionId, ...] = ()
    forgotten: tuple[SharePartitionId, ...] = ()
    acks: tuple[ShareAck, ...] = ()
    fetching: bool = True
    # (topic, partition, log start, log end) of the added partitions: where a share partition
    # the group has never read starts (share.auto.offset.reset)
    log_bounds: tuple[tuple[str, int, int, int], ...] = ()

    def error_reply(self, code: int, message: str | None = None) -> ShareSessionOpResp:
        return ShareSessionOpResp(code, message)


@dataclass(frozen=True, slots=True)
class ShareSessionOpResp:
    error_code: int
    error_message: str | None = None
    # the session's partitions: (topic, partition, where to read (-1: not initialised yet))
    partitions: tuple[tuple[str, int, int], ...] = ()
    ack_errors: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, error) per acked
    read_committed: bool = False  # the group's share.isolation.level: read below the LSO


@dataclass(frozen=True, slots=True)
class ShareAcquireOp:
    """The second half of a ShareFetch: acquire what the gateway read of each partition.
    reads: (topic, partition, log start, log end, first offset read, last offset read);
    first > last when nothing was read (the partition is then only initialised)."""

    group_id: str
    member_id: str
    reads: tuple[tuple[str, int, int, int, int, int], ...]
    max_records: int = 500
    # (topic, partition, first, last): records read of aborted transactions (read_committed),
    # archived instead of acquired
    aborted: tuple[tuple[str, int, int, int], ...] = ()

    def error_reply(self, code: int, message: str | None = None) -> ShareAcquireOpResp:
        return ShareAcquireOpResp(code)


@dataclass(frozen=True, slots=True)
class ShareAcquireOpResp:
    error_code: int
    # (topic, partition, ((first offset, last offset, delivery count), ...))
    acquired: tuple[tuple[str, int, tuple[tuple[int, int, int], ...]], ...] = ()
    lock_duration_ms: int = 0
    next_release_in_ms: int = -1  # nothing acquired: when a lock of these partitions expires


@dataclass(frozen=True, slots=True)
class ShareFetchOp:
    """A ShareFetch, in one turn of the group's actor (actors/share_fetch.py): the session
    step (a `ShareSessionOp` of these fields), then the read of each of the session's
    partitions from its first Available record (up to `max_bytes` in all), then the
    acquisition of what was read (a `ShareAcquireOp`), stored with one append. A long poll's
    next try (`retry`) has no session step: it reads where the session's partitions stand."""

    group_id: str
    member_id: str
    session_epoch: int
    added: tuple[SharePartitionId, ...] = ()
    forgotten: tuple[SharePartitionId, ...] = ()
    acks: tuple[ShareAck, ...] = ()
    log_bounds: tuple[tuple[str, int, int, int], ...] = ()  # as ShareSessionOp's
    max_records: int = 500
    max_bytes: int = 2**31 - 1
    retry: bool = False

    def error_reply(self, code: int, message: str | None = None) -> ShareFetchOpResp:
        return ShareFetchOpResp(code, message)


@dataclass(frozen=True, slots=True)
class ShareFetchOpResp:
    """The machine answers the session step with where to read (`partitions`,
    `read_committed`, `ack_errors`); the actor adds what was read and acquired."""

    error_code: int
    error_message: str | None = None
    partitions: tuple[tuple[str, int, int], ...] = ()  # as ShareSessionOpResp's
    ack_errors: tuple[tuple[str, int, int], ...] = ()
    read_committed: bool = False
    records: tuple[tuple[str, int, bytes], ...] = ()  # (topic, partition, whole batches read)
    acquired: tuple[tuple[str, int, tuple[tuple[int, int, int], ...]], ...] = ()
    lock_duration_ms: int = 0
    next_release_in_ms: int = -1  # as ShareAcquireOpResp's


@dataclass(frozen=True, slots=True)
class DescribeShareOffsetsOp:
    group_id: str
    partitions: tuple[SharePartitionId, ...] | None  # None: every initialised partition

    def error_reply(self, code: int, message: str | None = None) -> DescribeShareOffsetsOpResp:
        return DescribeShareOffsetsOpResp(code, message)


@dataclass(frozen=True, slots=True)
class DescribeShareOffsetsOpResp:
    error_code: int
    error_message: str | None = None
    # (topic, partition, start offset (-1: none), records in the window not yet done with,
    #  end of the window)
    offsets: tuple[tuple[str, int, int, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class AlterShareOffsetsOp:
    group_id: str
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, new start offset)

    def error_reply(self, code: int, message: str | None = None) -> AlterShareOffsetsOpResp:
        return AlterShareOffsetsOpResp(code, message)


@dataclass(frozen=True, slots=True)
class AlterShareOffsetsOpResp:
    error_code: int
    error_message: str | None = None
    results: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, error)


@dataclass(frozen=True, slots=True)
class DeleteShareOffsetsOp:
    group_id: str
    topics: tuple[str, ...]

    def error_reply(self, code: int, message: str | None = None) -> DeleteShareOffsetsOpResp:
        return DeleteShareOffsetsOpResp(code, message)


@dataclass(frozen=True, slots=True)
class DeleteShareOffsetsOpResp:
    error_code: int
    error_message: str | None = None
    results: tuple[tuple[str, int], ...] = ()  # (topic, error)
