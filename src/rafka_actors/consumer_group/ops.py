"""The KIP-848 ops only a consumer group takes, and their answers (ConsumerGroupHeartbeat and
ConsumerGroupDescribe); the ops both group protocols take are group_common/ops.py's."""

from __future__ import annotations

from dataclasses import dataclass

from ..group_common.ops import TopicPartitions


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatOp:
    """ConsumerGroupHeartbeat: join (epoch 0), heartbeat, acknowledge, leave (-1 / -2).

    Fields that are None (or -1 for the rebalance timeout) did not change since the member's
    last heartbeat, as in the Kafka request."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: TopicPartitions | None = None
    client_id: str = ""
    client_host: str = ""
    new_member_id: str = ""  # used if a v0 member joins without an id of its own
    api_version: int = 1

    def error_reply(self, code: int, message: str | None = None) -> ConsumerGroupHeartbeatOpResp:
        return ConsumerGroupHeartbeatOpResp(code, message)


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatOpResp:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: TopicPartitions | None = None  # None: unchanged since the last response


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeOp:
    group_id: str

    def error_reply(self, code: int, message: str | None = None) -> ConsumerGroupDescribeOpResp:
        return ConsumerGroupDescribeOpResp(code, message)


# (member id, instance id, rack id, member epoch, client id, client host, subscribed topic
#  names, subscribed topic regex, assignment, target assignment)
DescribedConsumer = tuple[
    str,
    str | None,
    str | None,
    int,
    str,
    str,
    tuple[str, ...],
    str | None,
    TopicPartitions,
    TopicPartitions,
]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeOpResp:
    error_code: int
    error_message: str | None = None
    state: str = "Dead"
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumer, ...] = ()
    cgp_id: str = ""
    classic_members: tuple[str, ...] = ()  # the members using the classic protocol (migration)
