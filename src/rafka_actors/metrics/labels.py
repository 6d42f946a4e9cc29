"""Label values and the label policy that bounds the series.

Label values of our own vocabulary (group states, API names, SASL mechanisms, rebalance
causes) are snake_case, as Prometheus label values are usually written; group ids and topic
names are the users' and are left as they are. A group or topic gets series only if it
matches `metrics.*.allow` (when set) and not `metrics.*.deny`, up to
`metrics.max.partition.series` (instruments.py, collector.py and traffic.py apply the cap).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

# A rebalance's reason names members; its cause label must not (bounded label values).
_CAUSES: Final = (
    (re.compile(r"member \S+ joined|static member rejoined.*"), "member_joined"),
    (re.compile(r"members? .*left.*|member \S+ left"), "member_left"),
    (re.compile(r".*session timeout.*"), "session_timeout"),
    (re.compile(r".*rebalance timeout.*|.*did not rejoin in time.*"), "rebalance_timeout"),
    (re.compile(r".*did not sync.*"), "sync_timeout"),
    (re.compile(r"leader rejoined|member rejoined"), "member_rejoined"),
    (re.compile(r".*subscription.*|.*metadata changed.*|.*protocols changed.*"), "subscription"),
    (re.compile(r".*topics changed.*|.*topic.*"), "topic_metadata"),
)
_WORD_BOUNDARY: Final = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[^A-Za-z0-9]+")


def snake_case(name: str) -> str:
    """A label value of our own vocabulary (a state, an API, a SASL mechanism) as Prometheus
    label values are written: `PreparingRebalance` -> `preparing_rebalance`,
    `SCRAM-SHA-256` -> `scram_sha_256`."""
    return _WORD_BOUNDARY.sub("_", name).strip("_").lower() or "unknown"


def cause_label(reason: str) -> str:
    """The kind of a rebalance's reason, one of a few fixed snake_case words."""
    for pattern, cause in _CAUSES:
        if pattern.fullmatch(reason):
            return cause
    return "other" if reason else "unknown"


def _pattern(text: str) -> re.Pattern[str] | None:
    return re.compile(text) if text else None


@dataclass(frozen=True, slots=True)
class LabelPolicy:
    group_allow: re.Pattern[str] | None = None
    group_deny: re.Pattern[str] | None = None
    topic_allow: re.Pattern[str] | None = None
    topic_deny: re.Pattern[str] | None = None
    max_series: int = 10_000

    @classmethod
    def of(
        cls, group_allow: str, group_deny: str, topic_allow: str, topic_deny: str, cap: int
    ) -> LabelPolicy:
        try:
            return cls(
                _pattern(group_allow),
                _pattern(group_deny),
                _pattern(topic_allow),
                _pattern(topic_deny),
                cap,
            )
        except re.error as exc:
            raise ValueError(f"metrics label pattern {exc.pattern!r}: {exc}") from exc

    def admits_group(self, group_id: str) -> bool:
        return _admits(group_id, self.group_allow, self.group_deny)

    def admits_topic(self, topic: str) -> bool:
        return _admits(topic, self.topic_allow, self.topic_deny)


def _admits(name: str, allow: re.Pattern[str] | None, deny: re.Pattern[str] | None) -> bool:
    if allow is not None and not allow.fullmatch(name):
        return False
    return deny is None or not deny.fullmatch(name)
