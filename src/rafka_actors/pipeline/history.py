"""Rebalance history: each rebalance of a group, when and why, from its group-change records.

Pure: it reads the rows of the coordinator log's group changes (the `groups` records of the
`rafka-coordinator-log` data source, as plain mappings) of ONE group in log order, and returns
one `Rebalance` per rebalance. The Spark job groups the rows by (org, group) and applies this.

Classic groups. A group record is written when a rebalance settles (or the group becomes
Empty, or a static member is replaced without one). A record whose `rebalance_started` is set
closes a rebalance: it began then and ended at the record's time; the generation is the
record's; members joined are those in it and not in the previous record; the record's
`departed` says who went and why ("left" is a leave; anything else, e.g. "session timeout"
or "did not rejoin in time", is an eviction); the cause is the record's reason, the first
trigger of the rebalance, put into words by `cause_of`.

Consumer groups (KIP-848) have no barrier: each group-epoch record is a rebalance that starts
and is assigned at once (the target assignment follows in the same step unless throttled),
and its reason names the member that joined, left or was fenced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

Row = Mapping[str, Any]
EVICTIONS = ("session timeout", "rebalance timeout", "did not rejoin in time", "did not sync")

_CAUSES = (
    (re.compile(r"member (\S+) joined"), "member joined ({})"),
    (re.compile(r"members left: (.+)"), "member left ({})"),
    (re.compile(r"member (\S+) left"), "member left ({})"),
    (re.compile(r"member (\S+) session timeout"), "session timeout of {}"),
    (re.compile(r"member (\S+) rebalance timeout"), "rebalance timeout of {}"),
    (re.compile(r"leader rejoined"), "leader rejoin"),
    (re.compile(r"member (\S+) changed its subscription"), "subscription change ({})"),
    (re.compile(r"subscription changed"), "subscription change"),
    (re.compile(r"subscribed topics changed"), "subscribed topics changed"),
    (re.compile(r"members did not sync in time"), "members did not sync in time"),
    # online migration between the protocols (coordinator/migration.py)
    (
        re.compile(
            r"upgraded from a classic group: member (\S+) joined with the consumer protocol"
        ),
        "upgrade to a consumer group ({} joined with the consumer protocol)",
    ),
    (
        re.compile(
            r"downgraded from a consumer group: the last consumer-protocol member (.+) went"
        ),
        "downgrade to a classic group (the last consumer-protocol member, {}, went)",
    ),
)


@dataclass(frozen=True, slots=True)
class Rebalance:
    org_id: int
    group_id: str
    group_type: str
    generation: int
    start_ms: int
    end_ms: int
    cause: str
    joined: tuple[str, ...]
    left: tuple[str, ...]
    evicted: tuple[str, ...]

    @property
    def duration_ms(self) -> int:
        return self.end_ms - self.start_ms


def cause_of(reason: str) -> str:
    """The coordinator's reason for a change, in the words of the history."""
    for pattern, words in _CAUSES:
        found = pattern.fullmatch(reason)
        if found:
            return words.format(*found.groups())
    return reason or "unknown"


def rebalances(rows: Iterable[Row]) -> list[Rebalance]:
    """The rebalances told by one group's change rows, in log order."""
    out: list[Rebalance] = []
    previous: frozenset[str] = frozenset()
    for row in rows:
        if row.get("deleted"):
            previous = frozenset()
            continue
        members = frozenset(row.get("members") or ())
        if row["group_type"] == "consumer":
            out.append(_consumer_rebalance(row))
        elif row.get("rebalance_started") is not None:
            out.append(_classic_rebalance(row, members - previous))
        previous = members
    return out


def _classic_rebalance(row: Row, joined: frozenset[str]) -> Rebalance:
    departed = list(row.get("departed") or ())
    left = tuple(_member(d) for d in departed if _why(d) == "left")
    evicted = tuple(_member(d) for d in departed if _why(d) != "left")
    return Rebalance(
        row["org_id"],
        row["group_id"],
        "classic",
        row["generation"],
        _ms(row["rebalance_started"]),
        _ms(row["time"]),
        cause_of(row.get("reason") or ""),
        tuple(sorted(joined)),
        left,
        evicted,
    )


def _consumer_rebalance(row: Row) -> Rebalance:
    reason = row.get("reason") or ""
    who = re.fullmatch(r"member (\S+) (.+)", reason)
    joined: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    evicted: tuple[str, ...] = ()
    if who is not None:
        member, what = who.groups()
        if what == "joined":
            joined = (member,)
        elif what == "left":
            left = (member,)
        elif what in EVICTIONS:
            evicted = (member,)
    at = _ms(row["time"])
    return Rebalance(
        row["org_id"],
        row["group_id"],
        "consumer",
        row["generation"],
        at,
        at,
        cause_of(reason),
        joined,
        left,
        evicted,
    )


def _member(departed: Any) -> str:
    return str(departed["member_id"] if isinstance(departed, Mapping) else departed[0])


def _why(departed: Any) -> str:
    return str(departed["why"] if isinstance(departed, Mapping) else departed[1])


def _ms(value: Any) -> int:
    """Milliseconds from an int, or from a datetime as Spark hands timestamps to Python."""
    if isinstance(value, int):
        return value
    return round(value.timestamp() * 1000)
