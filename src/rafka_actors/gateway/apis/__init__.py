"""The api table: every Kafka api this broker serves, its version range and its handler.

ApiVersions answers from this table, and the connection closes on any key or version not in
it, so the table is the single statement of what we serve. Version ranges are the ones the
three supported clients use (see shared/CLIENTS.md) within what kio has schemas for.
"""

from __future__ import annotations

from ..context import Api
from . import (
    acls,
    api_versions,
    client_quotas,
    configs,
    consumer_groups,
    describe_producers,
    fetch,
    find_coordinator,
    group_admin,
    groups,
    init_producer_id,
    list_offsets,
    metadata,
    offsets,
    partitions_admin,
    produce,
    sasl,
    scram_credentials,
    share_admin,
    share_groups,
    topics_admin,
    transactions,
    txn_offsets,
    txn_partitions,
    write_txn_markers,
)

G = "rafka.gateway.group."  # the spans of design note 000 (telemetry.py)
FIND_COORDINATOR_SPAN = "rafka.gateway.kafka.find-coordinator"

API_TABLE: dict[int, Api] = {
    api.key: api
    for api in (
        Api(0, "Produce", 3, 12, produce.handle),
        Api(1, "Fetch", 4, 16, fetch.handle),
        Api(2, "ListOffsets", 1, 11, list_offsets.handle),
        Api(3, "Metadata", 0, 13, metadata.handle),
        Api(8, "OffsetCommit", 2, 9, offsets.offset_commit, G + "offset-commit"),
        Api(9, "OffsetFetch", 1, 9, offsets.offset_fetch, G + "offset-fetch"),
        Api(10, "FindCoordinator", 0, 6, find_coordinator.handle, FIND_COORDINATOR_SPAN),
        Api(11, "JoinGroup", 0, 7, groups.join_group, G + "join"),
        Api(12, "Heartbeat", 0, 4, groups.heartbeat, G + "heartbeat"),
        Api(13, "LeaveGroup", 0, 5, groups.leave_group, G + "leave"),
        Api(14, "SyncGroup", 0, 5, groups.sync_group, G + "sync"),
        Api(15, "DescribeGroups", 0, 6, group_admin.describe_groups, G + "describe"),
        Api(16, "ListGroups", 0, 5, group_admin.list_groups, G + "list"),
        Api(17, "SaslHandshake", 1, 1, sasl.sasl_handshake),
        Api(18, "ApiVersions", 0, 4, api_versions.handle),
        Api(19, "CreateTopics", 2, 7, topics_admin.create_topics),
        Api(20, "DeleteTopics", 1, 6, topics_admin.delete_topics),
        Api(21, "DeleteRecords", 0, 2, partitions_admin.delete_records),
        Api(22, "InitProducerId", 0, 5, init_producer_id.handle),
        Api(24, "AddPartitionsToTxn", 0, 5, txn_partitions.add_partitions_to_txn),
        Api(25, "AddOffsetsToTxn", 0, 4, transactions.add_offsets_to_txn),
        Api(26, "EndTxn", 0, 5, transactions.end_txn),
        Api(27, "WriteTxnMarkers", 1, 2, write_txn_markers.handle),
        Api(28, "TxnOffsetCommit", 0, 5, txn_offsets.txn_offset_commit, G + "txn-offset-commit"),
        Api(29, "DescribeAcls", 1, 3, acls.describe_acls),
        Api(30, "CreateAcls", 1, 3, acls.create_acls),
        Api(31, "DeleteAcls", 1, 3, acls.delete_acls),
        Api(32, "DescribeConfigs", 1, 4, configs.describe_configs),
        Api(33, "AlterConfigs", 0, 2, configs.alter_configs),
        Api(35, "DescribeLogDirs", 1, 5, partitions_admin.describe_log_dirs),
        Api(36, "SaslAuthenticate", 0, 2, sasl.sasl_authenticate),
        Api(37, "CreatePartitions", 0, 3, partitions_admin.create_partitions),
        Api(42, "DeleteGroups", 0, 2, group_admin.delete_groups, G + "delete"),
        Api(44, "IncrementalAlterConfigs", 0, 1, configs.incremental_alter_configs),
        Api(47, "OffsetDelete", 0, 0, group_admin.offset_delete, G + "offset-delete"),
        Api(48, "DescribeClientQuotas", 0, 1, client_quotas.describe_client_quotas),
        Api(
            50,
            "DescribeUserScramCredentials",
            0,
            0,
            scram_credentials.describe_user_scram_credentials,
        ),
        Api(51, "AlterUserScramCredentials", 0, 0, scram_credentials.alter_user_scram_credentials),
        Api(60, "DescribeCluster", 0, 2, partitions_admin.describe_cluster),
        Api(61, "DescribeProducers", 0, 0, describe_producers.handle),
        Api(65, "DescribeTransactions", 0, 0, transactions.describe_transactions),
        Api(66, "ListTransactions", 0, 1, transactions.list_transactions),
        Api(
            68,
            "ConsumerGroupHeartbeat",
            0,
            1,
            consumer_groups.consumer_group_heartbeat,
            G + "consumer-heartbeat",
        ),
        Api(
            69,
            "ConsumerGroupDescribe",
            0,
            1,
            consumer_groups.consumer_group_describe,
            G + "consumer-describe",
        ),
        Api(
            76,
            "ShareGroupHeartbeat",
            1,
            1,
            share_groups.share_group_heartbeat,
            G + "share-heartbeat",
        ),
        Api(
            77, "ShareGroupDescribe", 1, 1, share_groups.share_group_describe, G + "share-describe"
        ),
        Api(78, "ShareFetch", 1, 1, share_groups.share_fetch),
        Api(79, "ShareAcknowledge", 1, 1, share_groups.share_acknowledge),
        Api(90, "DescribeShareGroupOffsets", 0, 1, share_admin.describe_share_group_offsets),
        Api(91, "AlterShareGroupOffsets", 0, 0, share_admin.alter_share_group_offsets),
        Api(92, "DeleteShareGroupOffsets", 0, 0, share_admin.delete_share_group_offsets),
    )
}
