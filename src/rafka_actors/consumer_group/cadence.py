"""The heartbeat interval told to a KIP-848 member in each ConsumerGroupHeartbeat response.

A member hears of a change only on its next heartbeat, and librdkafka and the Java client both
take the interval from every response. Kafka always tells `group.consumer.heartbeat.interval.ms`
(5 s), so consumers starting together settle in about two intervals: one for a member to hear
it must give up partitions, one for the member waiting for them to hear they are free.

Here a member is told the shorter `group.consumer.rebalance.heartbeat.interval.ms` while a
change is likely to concern it soon:
- it has a step ahead (partitions to revoke or to receive, or an epoch to move to);
- its group's target assignment is due (throttled by `group.consumer.assignment.interval.ms`);
- it joined within the last steady interval: members starting together arrive in a burst, and
  the first ones must hear that the later ones took a share.
Otherwise it gets the steady interval, so a settled group costs what it costs in Kafka, and a
long-settled member hears of a change as late as in Kafka (one steady interval at most).
"""

from __future__ import annotations

from ..group_common.effects import GroupConfig
from .state import ConsumerGroup, ConsumerMember


def heartbeat_interval_ms(
    group: ConsumerGroup, member: ConsumerMember, now: int, config: GroupConfig
) -> int:
    steady = config.consumer_heartbeat_interval_ms
    fast = min(config.consumer_rebalance_heartbeat_interval_ms, steady)
    joined_lately = member.joined_ms is not None and now - member.joined_ms < steady
    if (
        joined_lately
        or group.group_epoch > group.assignment_epoch
        or not member.current.is_reconciled_to(group.assignment_epoch)
    ):
        return fast
    return steady
