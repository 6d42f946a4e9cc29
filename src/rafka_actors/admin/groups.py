"""The `groups` commands' logic: what kafka-consumer-groups.sh computes, from `calls`.

Offsets (`groups offsets`, Kafka's `--describe --offsets`): the partitions shown are those
the group has committed offsets for together with those assigned to its members, each with
its committed offset (CURRENT-OFFSET), the partition's log-end offset from ListOffsets
(LOG-END-OFFSET) and their difference (LAG), plus the member holding it, if any. A partition
with no commit has no current offset and no lag ("-"), as in Kafka. A partition for which a
transaction's offset is pending (committed only when the transaction commits) is marked
apart from its committed offset: a second OffsetFetch that requires stable offsets tells.

Resetting (`groups reset-offsets`) first plans, then, only with `--execute`, commits:

* the scope is `--topic T` (every partition of T, from Metadata), `--topic T:0,2` (those
  partitions), or `--all-topics` (every partition the group has committed offsets for, as in
  Kafka, where it does not mean every topic of the cluster);
* the target is the log start (`--to-earliest`), the log end (`--to-latest`), an offset
  (`--to-offset N`) or the committed offset moved by N (`--shift-by N`, which needs a
  committed offset to move);
* like Kafka's `checkOffsetsRange`, a target outside [log start, log end] is clamped to the
  nearer bound, with a warning;
* the commit is an admin commit (generation -1, no member), which the broker accepts only
  while the group has no members: its refusal is reported with that explanation.

A share group (KIP-932) has no committed offsets: its share partitions' start offsets take
their place (DescribeShareGroupOffsets), its lag is the records not yet acknowledged, and a
reset sets the start offsets (AlterShareGroupOffsets), again only while it has no members.

A group that does not exist is an error for `describe` and `offsets`, but not for
`reset-offsets`: committing offsets for a new group id creates it, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from . import calls
from .client import AdminError, BrokerError, KafkaClient
from .model import (
    INACTIVE_STATES,
    SHARE,
    GroupDescription,
    GroupOffsets,
    OffsetRow,
    ResetPlan,
    ResetRow,
    TopicPartition,
)

Progress = Callable[[int, int, str], None]  # (done, total, group id)
TopicScope = tuple[str, tuple[int, ...] | None]  # a topic and its partitions (None: all)

# Errors the broker gives an admin commit to a group that has members (classic or KIP-848).
_GROUP_ACTIVE_ERRORS = frozenset(
    {
        ErrorCode.unknown_member_id,
        ErrorCode.illegal_generation,
        ErrorCode.rebalance_in_progress,
        ErrorCode.stale_member_epoch,
        ErrorCode.non_empty_group,  # a share group's AlterShareGroupOffsets
    }
)


class UsageError(AdminError):
    """The command cannot be done as asked (not a broker error)."""


@dataclass(frozen=True)
class ResetSpec:
    """How to compute new offsets: mode is earliest, latest, offset or shift."""

    mode: str
    value: int = 0


def require_group(client: KafkaClient, group_id: str) -> GroupDescription:
    group = calls.describe_group(client, group_id)
    if not group.exists:
        raise BrokerError(ErrorCode.group_id_not_found, f"group {group_id!r} does not exist")
    return group


# -- offsets ------------------------------------------------------------------------------
def group_offsets(client: KafkaClient, group_id: str, *, times: bool = False) -> GroupOffsets:
    """Committed and log-end offsets, lag and owner of every partition the group touches;
    with `times`, also the append time of each lagging partition's next record."""
    group = require_group(client, group_id)
    if group.group_type == SHARE:
        return _share_offsets(client, group)
    committed = calls.committed_offsets(client, group_id)
    owners = group.owners()
    partitions = sorted(set(committed) | set(owners))
    log_end = calls.log_offsets(client, partitions, calls.LATEST, strict=False)
    pending = calls.pending_transactional(client, group_id, partitions)
    log_start = calls.log_offsets(client, partitions, calls.EARLIEST, strict=False)
    # a committed offset below the log start is read from the log start, as LAG counts it
    lagging = {
        tp: max(o, log_start.get(tp) or 0)
        for tp, o in committed.items()
        if tp in log_end and o < log_end[tp]
    }
    appended = calls.append_times(client, lagging) if times else {}
    rows = [
        OffsetRow(
            group_id,
            tp[0],
            tp[1],
            committed.get(tp),
            log_end.get(tp),
            owners.get(tp),
            log_start.get(tp),
            appended.get(tp),
            pending_transaction=tp in pending,
        )
        for tp in partitions
    ]
    return GroupOffsets(group, rows)


def _share_offsets(client: KafkaClient, group: GroupDescription) -> GroupOffsets:
    """A share group's start offset and lag (records not yet acknowledged) per partition;
    every member may fetch from every assigned partition, so no one owns one."""
    state = calls.share_offsets(client, group.group_id)
    log_end = calls.log_offsets(client, state, calls.LATEST, strict=False)
    rows = [
        OffsetRow(group.group_id, tp[0], tp[1], start, log_end.get(tp), None, share_lag=lag)
        for tp, (start, lag) in sorted(state.items())
    ]
    return GroupOffsets(group, rows)


def many_group_offsets(
    client: KafkaClient,
    group_ids: Sequence[str],
    progress: Progress | None = None,
    *,
    times: bool = False,
) -> list[GroupOffsets]:
    """`group_offsets` of each group in turn, telling `progress` after each one."""
    results = []
    for done, group_id in enumerate(group_ids, 1):
        results.append(group_offsets(client, group_id, times=times))
        if progress is not None:
            progress(done, len(group_ids), group_id)
    return results


def all_group_ids(client: KafkaClient) -> list[str]:
    return [g.group_id for g in calls.list_groups(client)]


# -- reset-offsets ------------------------------------------------------------------------
def plan_reset(
    client: KafkaClient, group_id: str, scope: Sequence[TopicScope] | None, spec: ResetSpec
) -> ResetPlan:
    """The new offset of every partition in `scope` (None: all the group has committed)."""
    group = calls.describe_group(client, group_id)
    if group.group_type == SHARE:
        committed = {tp: start for tp, (start, _) in calls.share_offsets(client, group_id).items()}
    else:
        committed = calls.committed_offsets(client, group_id)
    partitions = sorted(committed) if scope is None else _partitions(client, scope)
    earliest = calls.log_offsets(client, partitions, calls.EARLIEST)
    latest = calls.log_offsets(client, partitions, calls.LATEST)
    rows, warnings = [], []
    for tp in partitions:
        wanted = _target(spec, tp, committed.get(tp), earliest[tp], latest[tp])
        new, warning = _clamped(tp, wanted, earliest[tp], latest[tp])
        rows.append(ResetRow(tp[0], tp[1], committed.get(tp), new))
        if warning:
            warnings.append(warning)
    return ResetPlan(group, rows, warnings=warnings)


def _partitions(client: KafkaClient, scope: Sequence[TopicScope]) -> list[TopicPartition]:
    counts = calls.topic_partitions(client, (topic for topic, _ in scope))
    chosen: set[TopicPartition] = set()
    for topic, partitions in scope:
        for p in range(counts[topic]) if partitions is None else partitions:
            if not 0 <= p < counts[topic]:
                raise BrokerError(
                    ErrorCode.unknown_topic_or_partition,
                    f"topic {topic!r} has no partition {p} (it has {counts[topic]})",
                )
            chosen.add((topic, p))
    return sorted(chosen)


def _target(
    spec: ResetSpec, tp: TopicPartition, current: int | None, earliest: int, latest: int
) -> int:
    if spec.mode == "earliest":
        return earliest
    if spec.mode == "latest":
        return latest
    if spec.mode == "offset":
        return spec.value
    if current is None:
        raise UsageError(
            f"cannot shift the offset of {tp[0]}-{tp[1]}: the group has no committed offset "
            "for it (choose partitions with --topic T:P or use another mode)"
        )
    return current + spec.value


def _clamped(tp: TopicPartition, offset: int, earliest: int, latest: int) -> tuple[int, str]:
    """Kafka's checkOffsetsRange: offsets outside the log move to its nearer end."""
    name = f"{tp[0]}-{tp[1]}"
    if offset > latest:
        return latest, (
            f"New offset ({offset}) is higher than latest offset for topic partition {name}. "
            f"Value will be set to {latest}"
        )
    if offset < earliest:
        return earliest, (
            f"New offset ({offset}) is lower than earliest offset for topic partition {name}. "
            f"Value will be set to {earliest}"
        )
    return offset, ""


def execute_reset(client: KafkaClient, plan: ResetPlan) -> ResetPlan:
    """Commit the plan's offsets; the broker refuses while the group has members."""
    group = plan.group
    try:
        if group.group_type == SHARE:
            calls.alter_share_offsets(client, group.group_id, plan.offsets())
        else:
            calls.commit_offsets(client, group.group_id, plan.offsets())
    except BrokerError as exc:
        if exc.code not in _GROUP_ACTIVE_ERRORS:
            raise
        members = len(group.members)
        raise BrokerError(
            exc.code,
            f"the broker refused to reset the offsets of group {group.group_id!r}",
            "offsets can only be reset while the group has no active members; it was "
            f"{group.state} with {members} member{'s' * (members != 1)}: stop its consumers first",
        ) from exc
    return ResetPlan(group, plan.rows, executed=True, warnings=plan.warnings)


def is_active(group: GroupDescription) -> bool:
    return group.state not in INACTIVE_STATES


# -- delete -------------------------------------------------------------------------------
def delete_groups(client: KafkaClient, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
    return calls.delete_groups(client, group_ids)
