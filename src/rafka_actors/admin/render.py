"""Output of the `groups` commands: kafka-consumer-groups.sh's tables, or JSON.

Tables keep Kafka's column names and conventions: left-aligned columns as wide as their
widest cell, "-" for a value that does not exist (no committed offset, no owner), an
assignment written `topic(0,1),other(2)`. Nothing but the table goes to stdout, so its rows
split on whitespace; notes (an empty group, a dry run, clamped offsets) and progress go to
stderr, which `note` and `progress` write.

JSON has the same content with stable keys; a value that does not exist is null. Each
command's shape:

* list: `[{group, type, state, protocol_type, cgp_id, rrl}]`
* describe: `{group, type, state, protocol_type, assignor, group_epoch, assignment_epoch,
  cgp_id, rrl, members: [{member_id, instance_id, client_id, host, assignment: {topic:
  [partition]}, member_epoch, target_assignment, subscribed_topics, subscribed_regex,
  protocol}]}` (protocol: a KIP-848 group's member speaks "consumer", or "classic" while the
  group migrates between the protocols; TYPE shows the group's type, which a migration changes)

`cgp_id` and `rrl` (columns CGP-ID and RRL, after Kafka's) are the group's identity, which
this broker sends when asked; another broker leaves them null ("-").
* offsets: `[{group, type, state, partitions: [{topic, partition, current_offset,
  log_end_offset, lag, consumer_id, host, client_id}]}]`
* reset-offsets: `{group, state, executed, partitions: [{topic, partition, current_offset,
  new_offset}], warnings: [...]}`
* delete: `[{group, deleted, error}]`
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from .client import error_name
from .model import (
    CLASSIC,
    Assignment,
    GroupDescription,
    GroupListing,
    GroupOffsets,
    Member,
    ResetPlan,
)

MISSING = "-"
UNKNOWN = "?"  # a classic assignment in a protocol other than the consumer protocol


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[MISSING if v is None else str(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    lines = [headers, *cells]
    return "\n".join(
        " ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def as_json(value: object) -> str:
    return json.dumps(value, indent=2)


def note(message: str) -> None:
    print(message, file=sys.stderr)


def progress(done: int, total: int, what: str) -> None:
    print(f"[{done}/{total}] {what}", file=sys.stderr, flush=True)


# -- list ---------------------------------------------------------------------------------
def listing(groups: Sequence[GroupListing], output: str) -> str:
    if output == "json":
        return as_json(
            [
                {
                    "group": g.group_id,
                    "type": g.group_type,
                    "state": g.state,
                    "protocol_type": g.protocol_type,
                    "cgp_id": g.cgp_id,
                    "rrl": g.rrl,
                }
                for g in groups
            ]
        )
    rows = [
        (g.group_id, g.group_type, g.state, g.protocol_type or None, g.cgp_id, g.rrl)
        for g in groups
    ]
    return table(("GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "CGP-ID", "RRL"), rows)


# -- describe -----------------------------------------------------------------------------
def description(group: GroupDescription, output: str) -> str:
    if output == "json":
        return as_json(_group_json(group))
    kip848 = group.group_type != CLASSIC  # a consumer or share group: epochs
    headers = ["GROUP", "TYPE", "STATE", "PROTOCOL-TYPE", "ASSIGNMENT-STRATEGY"]
    row: list[object] = [group.group_id, group.group_type, group.state]
    row += [group.protocol_type or None, group.assignor or None]
    if kip848:
        headers += ["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"]
        row += [group.group_epoch, group.assignment_epoch]
    headers += ["#MEMBERS", "CGP-ID", "RRL"]
    text = table(headers, [[*row, len(group.members), group.cgp_id, group.rrl]])
    if group.members:
        text += "\n\n" + _members_table(group)
    return text


def _members_table(group: GroupDescription) -> str:
    headers = ["GROUP", "CONSUMER-ID", "GROUP-INSTANCE-ID", "HOST", "CLIENT-ID", "#PARTITIONS"]
    kip848 = group.group_type != CLASSIC
    headers += (
        ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT", "PROTOCOL"]
        if kip848
        else ["ASSIGNMENT"]
    )
    rows = []
    for m in sorted(group.members, key=lambda m: (m.client_id, m.member_id)):
        count = UNKNOWN if m.assignment is None else len(m.partitions())
        row: list[object] = [group.group_id, m.member_id, m.instance_id, m.host, m.client_id]
        row += [count, m.member_epoch] if kip848 else [count]
        row.append(_assignment(m.assignment))
        if kip848:
            row += [group.assignment_epoch, _assignment(m.target_assignment), m.protocol]
        rows.append(row)
    return table(headers, rows)


def _assignment(assignment: Assignment | None) -> str:
    if assignment is None:
        return UNKNOWN
    parts = [f"{t}({','.join(map(str, ps))})" for t, ps in sorted(assignment.items()) if ps]
    return ",".join(parts) or MISSING


def _group_json(group: GroupDescription) -> dict[str, Any]:
    return {
        "group": group.group_id,
        "type": group.group_type,
        "state": group.state,
        "protocol_type": group.protocol_type,
        "assignor": group.assignor,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "cgp_id": group.cgp_id,
        "rrl": group.rrl,
        "members": [_member_json(m) for m in group.members],
    }


def _member_json(m: Member) -> dict[str, Any]:
    def listed(assignment: Assignment | None) -> dict[str, list[int]] | None:
        return None if assignment is None else {t: list(ps) for t, ps in assignment.items()}

    return {
        "member_id": m.member_id,
        "instance_id": m.instance_id,
        "client_id": m.client_id,
        "host": m.host,
        "assignment": listed(m.assignment),
        "member_epoch": m.member_epoch,
        "target_assignment": listed(m.target_assignment),
        "subscribed_topics": list(m.subscribed_topics),
        "subscribed_regex": m.subscribed_regex,
        "protocol": m.protocol,
    }


# -- offsets ------------------------------------------------------------------------------
OFFSET_HEADERS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG")
OWNER_HEADERS = ("CONSUMER-ID", "HOST", "CLIENT-ID")
PENDING_HEADER = "PENDING-TXN"  # shown only when a transaction's offset is pending somewhere


def offsets(results: Sequence[GroupOffsets], output: str) -> str:
    if output == "json":
        return as_json([_offsets_json(r) for r in results])
    rows = [
        (
            r.group_id,
            r.topic,
            r.partition,
            r.current_offset,
            r.log_end_offset,
            r.lag,
            *((r.owner.member_id, r.owner.host, r.owner.client_id) if r.owner else (None,) * 3),
        )
        for result in results
        for r in result.rows
    ]
    pending = [r.pending_transaction for result in results for r in result.rows]
    if any(pending):
        marked = [(*row, "pending" if p else None) for row, p in zip(rows, pending, strict=True)]
        return table((*OFFSET_HEADERS, *OWNER_HEADERS, PENDING_HEADER), marked)
    return table(OFFSET_HEADERS + OWNER_HEADERS, rows)


def watched_offsets(results: Sequence[GroupOffsets], now_ms: int) -> str:
    """`offsets --watch`: the offsets table with lag in seconds, no owners (a terminal's width)."""
    rows = [
        (
            r.group_id,
            r.topic,
            r.partition,
            r.current_offset,
            r.log_end_offset,
            r.lag,
            _seconds(r.lag_seconds(now_ms)),
            r.owner.client_id if r.owner else None,
        )
        for result in results
        for r in result.rows
    ]
    return table((*OFFSET_HEADERS, "LAG-SECONDS", "CLIENT-ID"), rows)


def _seconds(value: float | None) -> str | None:
    return None if value is None else f"{value:.1f}"


def _offsets_json(result: GroupOffsets) -> dict[str, Any]:
    group = result.group
    return {
        "group": group.group_id,
        "type": group.group_type,
        "state": group.state,
        "partitions": [
            {
                "topic": r.topic,
                "partition": r.partition,
                "current_offset": r.current_offset,
                "log_end_offset": r.log_end_offset,
                "lag": r.lag,
                "consumer_id": r.owner.member_id if r.owner else None,
                "host": r.owner.host if r.owner else None,
                "client_id": r.owner.client_id if r.owner else None,
                "pending_transaction": r.pending_transaction,
            }
            for r in result.rows
        ],
    }


# -- reset-offsets ------------------------------------------------------------------------
def reset(plan: ResetPlan, output: str) -> str:
    group_id = plan.group.group_id
    if output == "json":
        return as_json(
            {
                "group": group_id,
                "state": plan.group.state,
                "executed": plan.executed,
                "partitions": [
                    {
                        "topic": r.topic,
                        "partition": r.partition,
                        "current_offset": r.current_offset,
                        "new_offset": r.new_offset,
                    }
                    for r in plan.rows
                ],
                "warnings": plan.warnings,
            }
        )
    rows = [(group_id, r.topic, r.partition, r.current_offset, r.new_offset) for r in plan.rows]
    return table(("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"), rows)


# -- delete -------------------------------------------------------------------------------
def deletion(results: dict[str, ErrorCode], output: str) -> str:
    if output == "json":
        return as_json(
            [
                {
                    "group": g,
                    "deleted": code == ErrorCode.none,
                    "error": None if code == ErrorCode.none else error_name(code),
                }
                for g, code in results.items()
            ]
        )
    deleted = [g for g, code in results.items() if code == ErrorCode.none]
    failed = {g: code for g, code in results.items() if code != ErrorCode.none}
    if not failed:
        names = ", ".join(f"'{g}'" for g in deleted)
        return f"Deletion of requested consumer groups ({names}) was successful."
    lines = ["Deletion of some consumer groups failed:"]
    lines += [
        f"* Group '{g}' could not be deleted due to: {error_name(c)}" for g, c in failed.items()
    ]
    if deleted:
        lines.append("These consumer groups were deleted successfully: " + ", ".join(deleted))
    return "\n".join(lines)
