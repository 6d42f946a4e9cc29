"""The requests the scenarios send, each at one version that both brokers serve (the newest
we serve, at the time of writing), built from a few arguments."""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Sequence
from typing import Any

from kio.schema.add_offsets_to_txn.v3 import request as add_offsets_req
from kio.schema.add_partitions_to_txn.v3 import request as add_partitions_req
from kio.schema.consumer_group_describe.v1 import request as cg_describe_req
from kio.schema.consumer_group_heartbeat.v1 import request as cg_heartbeat_req
from kio.schema.create_partitions.v3 import request as create_partitions_req
from kio.schema.create_topics.v7 import request as create_topics_req
from kio.schema.delete_groups.v2 import request as delete_groups_req
from kio.schema.delete_records.v2 import request as delete_records_req
from kio.schema.delete_topics.v6 import request as delete_topics_req
from kio.schema.describe_groups.v6 import request as describe_groups_req
from kio.schema.describe_transactions.v0 import request as describe_txns_req
from kio.schema.end_txn.v3 import request as end_txn_req
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.find_coordinator.v3 import request as find_coordinator_v3_req
from kio.schema.find_coordinator.v6 import request as find_coordinator_req
from kio.schema.heartbeat.v4 import request as heartbeat_req
from kio.schema.init_producer_id.v5 import request as init_pid_req
from kio.schema.join_group.v7 import request as join_req
from kio.schema.leave_group.v5 import request as leave_req
from kio.schema.list_offsets.v10 import request as list_offsets_req
from kio.schema.list_transactions.v1 import request as list_txns_req
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.offset_commit.v9 import request as commit_req
from kio.schema.offset_delete.v0 import request as offset_delete_req
from kio.schema.offset_fetch.v9 import request as offset_fetch_req
from kio.schema.produce.v9 import request as produce_req
from kio.schema.share_group_describe.v1 import request as share_describe_req
from kio.schema.share_group_heartbeat.v1 import request as share_heartbeat_req
from kio.schema.sync_group.v5 import request as sync_req
from kio.schema.txn_offset_commit.v3 import request as txn_commit_req

from ..batch_builder import DEFAULT_TIMESTAMP, build_batch

SECOND = datetime.timedelta(seconds=1)
TIMEOUT = 30 * SECOND
NIL_UUID = uuid.UUID(int=0)


def create_topic(name: str, partitions: int = 1, replication: int = 1, **configs: str) -> Any:
    config = tuple(
        create_topics_req.CreatableTopicConfig(name=k.replace("_", "."), value=v)
        for k, v in configs.items()
    )
    topic = create_topics_req.CreatableTopic(
        name=name,
        num_partitions=partitions,
        replication_factor=replication,
        assignments=(),
        configs=config,
    )
    return create_topics_req.CreateTopicsRequest(topics=(topic,), timeout=TIMEOUT)


def create_partitions(name: str, count: int) -> Any:
    wanted = create_partitions_req.CreatePartitionsTopic(name=name, count=count, assignments=None)
    return create_partitions_req.CreatePartitionsRequest(
        topics=(wanted,), timeout=TIMEOUT, validate_only=False
    )


def delete_topics(*names: str) -> Any:
    return delete_topics_req.DeleteTopicsRequest(
        topics=tuple(delete_topics_req.DeleteTopicState(name=n, topic_id=NIL_UUID) for n in names),
        timeout=TIMEOUT,
    )


def produce(
    topic: str,
    values: Sequence[str],
    *,
    partition: int = 0,
    timestamps: list[int] | None = None,
    transactional_id: str | None = None,
    producer: tuple[int, int, int] = (-1, -1, -1),  # id, epoch, base sequence
    transactional: bool | None = None,  # the batch's flag; by default, whether an id is given
) -> Any:
    if transactional is None:
        transactional = transactional_id is not None
    pid, epoch, sequence = producer
    batch = build_batch(
        [(None, value.encode()) for value in values],
        base_timestamp=timestamps[0] if timestamps else DEFAULT_TIMESTAMP,
        timestamps=timestamps,
        attributes=0x10 if transactional else 0,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=sequence,
    )
    data = produce_req.PartitionProduceData(index=partition, records=batch)
    return produce_req.ProduceRequest(
        transactional_id=transactional_id,
        acks=-1,
        timeout=TIMEOUT,
        topic_data=(produce_req.TopicProduceData(name=topic, partition_data=(data,)),),
    )


def fetch(topic: str, partition: int, offset: int, isolation_level: int = 0) -> Any:
    wanted = fetch_req.FetchPartition(
        partition=partition, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return fetch_req.FetchRequest(
        max_wait=datetime.timedelta(0),
        min_bytes=0,
        isolation_level=isolation_level,
        topics=(fetch_req.FetchTopic(topic=topic, partitions=(wanted,)),),
        forgotten_topics_data=(),
    )


def metadata(*topics: str, auto_create: bool = False) -> Any:
    return metadata_req.MetadataRequest(
        topics=tuple(metadata_req.MetadataRequestTopic(topic_id=NIL_UUID, name=t) for t in topics),
        allow_auto_topic_creation=auto_create,
        include_topic_authorized_operations=False,
    )


def list_offsets(topic: str, timestamp: int, partition: int = 0, isolation_level: int = 0) -> Any:
    """One partition's offset at a time (-1 latest, -2 earliest, -3 max timestamp...)."""
    wanted = list_offsets_req.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)
    return list_offsets_req.ListOffsetsRequest(
        replica_id=-1,
        isolation_level=isolation_level,
        topics=(list_offsets_req.ListOffsetsTopic(name=topic, partitions=(wanted,)),),
        timeout=TIMEOUT,
    )


def delete_records(topic: str, partition: int, offset: int) -> Any:
    wanted = delete_records_req.DeleteRecordsPartition(partition_index=partition, offset=offset)
    return delete_records_req.DeleteRecordsRequest(
        topics=(delete_records_req.DeleteRecordsTopic(name=topic, partitions=(wanted,)),),
        timeout=TIMEOUT,
    )


def find_coordinator(key_type: int, *keys: str) -> Any:
    return find_coordinator_req.FindCoordinatorRequest(key_type=key_type, coordinator_keys=keys)


def find_coordinator_v3(key_type: int, key: str) -> Any:
    """The one-key form (v0-v3) that kafka-python and older clients send."""
    return find_coordinator_v3_req.FindCoordinatorRequest(key=key, key_type=key_type)


# classic groups


def join(
    group: str,
    member_id: str = "",
    *,
    session_ms: int = 30_000,
    protocol_type: str = "consumer",
    protocols: Sequence[tuple[str, bytes]] = (("range", b""),),
    instance_id: str | None = None,
) -> Any:
    return join_req.JoinGroupRequest(
        group_id=group,
        session_timeout=datetime.timedelta(milliseconds=session_ms),
        rebalance_timeout=datetime.timedelta(milliseconds=session_ms),
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=tuple(
            join_req.JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols
        ),
    )


def sync(group: str, generation: int, member_id: str, assignment: bytes | None = b"") -> Any:
    assignments = (
        ()
        if assignment is None
        else (sync_req.SyncGroupRequestAssignment(member_id=member_id, assignment=assignment),)
    )
    return sync_req.SyncGroupRequest(
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        protocol_type="consumer",
        protocol_name="range",
        assignments=assignments,
    )


def heartbeat(group: str, generation: int, member_id: str) -> Any:
    return heartbeat_req.HeartbeatRequest(
        group_id=group, generation_id=generation, member_id=member_id
    )


def leave(group: str, *member_ids: str) -> Any:
    return leave_req.LeaveGroupRequest(
        group_id=group, members=tuple(leave_req.MemberIdentity(member_id=m) for m in member_ids)
    )


def describe_groups(*groups: str) -> Any:
    return describe_groups_req.DescribeGroupsRequest(
        groups=groups, include_authorized_operations=False
    )


# offsets


def commit(
    group: str,
    topic: str,
    offset: int,
    *,
    partition: int = 0,
    generation: int = -1,
    member_id: str = "",
    metadata: str | None = "",
    leader_epoch: int = -1,
) -> Any:
    wanted = commit_req.OffsetCommitRequestPartition(
        partition_index=partition,
        committed_offset=offset,
        committed_leader_epoch=leader_epoch,
        committed_metadata=metadata,
    )
    return commit_req.OffsetCommitRequest(
        group_id=group,
        generation_id_or_member_epoch=generation,
        member_id=member_id,
        topics=(commit_req.OffsetCommitRequestTopic(name=topic, partitions=(wanted,)),),
    )


def fetch_offsets(
    *groups: tuple[str, dict[str, list[int]] | None],
    require_stable: bool = False,
    member: tuple[str, int] | None = None,
) -> Any:
    """Each group with its topics' partitions (None: all the group has)."""
    member_id, epoch = member or (None, -1)
    return offset_fetch_req.OffsetFetchRequest(
        groups=tuple(
            offset_fetch_req.OffsetFetchRequestGroup(
                group_id=group,
                member_id=member_id,
                member_epoch=epoch,
                topics=None
                if topics is None
                else tuple(
                    offset_fetch_req.OffsetFetchRequestTopics(name=t, partition_indexes=tuple(p))
                    for t, p in topics.items()
                ),
            )
            for group, topics in groups
        ),
        require_stable=require_stable,
    )


def delete_groups(*groups: str) -> Any:
    return delete_groups_req.DeleteGroupsRequest(groups_names=groups)


def offset_delete(group: str, topic: str, partition: int = 0) -> Any:
    wanted = offset_delete_req.OffsetDeleteRequestPartition(partition_index=partition)
    return offset_delete_req.OffsetDeleteRequest(
        group_id=group,
        topics=(offset_delete_req.OffsetDeleteRequestTopic(name=topic, partitions=(wanted,)),),
    )


# consumer (KIP-848) and share groups


def consumer_heartbeat(
    group: str,
    member_id: str,
    epoch: int,
    topics: tuple[str, ...] | None = None,
    *,
    assignor: str | None = None,
    owned: tuple[Any, ...] | None = None,
    instance_id: str | None = None,
) -> Any:
    """A join when `epoch` is 0 (with `topics` and nothing owned), a leave when it is -1."""
    return cg_heartbeat_req.ConsumerGroupHeartbeatRequest(
        group_id=group,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=instance_id,
        rebalance_timeout=datetime.timedelta(milliseconds=30_000 if epoch == 0 else -1),
        subscribed_topic_names=topics,
        server_assignor=assignor,
        topic_partitions=() if epoch == 0 and owned is None else owned,
    )


def consumer_describe(*groups: str) -> Any:
    return cg_describe_req.ConsumerGroupDescribeRequest(
        group_ids=groups, include_authorized_operations=False
    )


def share_heartbeat(
    group: str, member_id: str, epoch: int, topics: tuple[str, ...] | None = None
) -> Any:
    return share_heartbeat_req.ShareGroupHeartbeatRequest(
        group_id=group, member_id=member_id, member_epoch=epoch, subscribed_topic_names=topics
    )


def share_describe(*groups: str) -> Any:
    return share_describe_req.ShareGroupDescribeRequest(
        group_ids=groups, include_authorized_operations=False
    )


# transactions


def init_producer_id(transactional_id: str | None, timeout_ms: int = 60_000) -> Any:
    return init_pid_req.InitProducerIdRequest(
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),
    )


def add_partitions(txn: str, pid: int, epoch: int, topic: str, *partitions: int) -> Any:
    return add_partitions_req.AddPartitionsToTxnRequest(
        v3_and_below_transactional_id=txn,
        v3_and_below_producer_id=pid,
        v3_and_below_producer_epoch=epoch,
        v3_and_below_topics=(
            add_partitions_req.AddPartitionsToTxnTopic(name=topic, partitions=partitions),
        ),
    )


def add_offsets(txn: str, pid: int, epoch: int, group: str) -> Any:
    return add_offsets_req.AddOffsetsToTxnRequest(
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, group_id=group
    )


def txn_commit(txn: str, pid: int, epoch: int, group: str, topic: str, offset: int) -> Any:
    wanted = txn_commit_req.TxnOffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata=""
    )
    return txn_commit_req.TxnOffsetCommitRequest(
        transactional_id=txn,
        group_id=group,
        producer_id=pid,
        producer_epoch=epoch,
        topics=(txn_commit_req.TxnOffsetCommitRequestTopic(name=topic, partitions=(wanted,)),),
    )


def end_txn(txn: str, pid: int, epoch: int, *, commit: bool) -> Any:
    return end_txn_req.EndTxnRequest(
        transactional_id=txn, producer_id=pid, producer_epoch=epoch, committed=commit
    )


def describe_transactions(*ids: str) -> Any:
    return describe_txns_req.DescribeTransactionsRequest(transactional_ids=ids)


def list_transactions(*states: str) -> Any:
    return list_txns_req.ListTransactionsRequest(
        state_filters=states, producer_id_filters=(), duration_filter=-1
    )
