"""The differ: two brokers' observations of one scenario, leaf by leaf, against the list of
known differences kept in docs/kafka-differences.md.

An observation is plain JSON (normalise.py). It is flattened to paths (`describe.groups[0]
.members[0].client_id`); a path only one broker has is `absent` on the other's side. The
known differences are the rows of the doc's table under `DOC_SECTION`:

    | scenario | path | Kafka 4.3.1 | ours | status |

values in backticks as `render` writes them, status `kept: why` or `fixed`. A `*` in a cell
stands for any text, so that one row covers a family of differences (every API Kafka serves
and we do not). A difference no row covers is new; a `kept` row that covers none is fixed
(and must go or become `fixed`); a `fixed` row that covers one has come back.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md"
DOC_SECTION = "## Differential check against Kafka 4.3.1"
ABSENT = "absent"


@dataclass(frozen=True)
class Difference:
    scenario: str
    path: str
    kafka: str
    ours: str


@dataclass(frozen=True)
class Known:
    difference: Difference  # its cells may hold `*`s
    status: str  # "fixed" or "kept: <why>"

    @property
    def kept(self) -> bool:
        return self.status.startswith("kept")

    def covers(self, seen: Difference) -> bool:
        mine = self.difference
        return mine.scenario == seen.scenario and all(
            _pattern(cell).fullmatch(value)
            for cell, value in (
                (mine.path, seen.path),
                (mine.kafka, seen.kafka),
                (mine.ours, seen.ours),
            )
        )


@functools.lru_cache(maxsize=1024)
def _pattern(cell: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in cell.split("*")), re.S)


def render(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def differences(scenario: str, kafka: Any, ours: Any) -> list[Difference]:
    out: list[Difference] = []
    _compare(scenario, "", kafka, ours, out)
    return out


def _compare(scenario: str, path: str, kafka: Any, ours: Any, out: list[Difference]) -> None:
    if kafka == ours:
        return
    if isinstance(kafka, dict) and isinstance(ours, dict):
        pairs = _union(kafka, ours, lambda key: f"{path}.{key}" if path else str(key))
    elif isinstance(kafka, list) and isinstance(ours, list) and (kafka or ours):
        pairs = _union(_keyed(kafka), _keyed(ours), lambda key: f"{path}[{key}]")
    else:
        out.append(Difference(scenario, path, _shown(kafka), _shown(ours)))
        return
    for where, theirs, mine in pairs:
        _compare(scenario, where, theirs, mine, out)


_MISSING = object()
# the fields that name an element of a list: elements are paired by them, not by position
_KEYS = (
    "name",
    "topic",
    "topic_name",
    "group_id",
    "transactional_id",
    "partition_index",
    "partition",
    "index",
    "topic_id",  # (a placeholder: the same topic on both sides, where ids are seen alike)
)


def _keyed(items: list[Any]) -> dict[Any, Any]:
    """A list's elements by the field that names them, if they all have one, else by index."""
    for key in _KEYS:
        if all(isinstance(item, dict) and key in item for item in items):
            named = {f"{key}={item[key]}": item for item in items}
            if len(named) == len(items):
                return named
    return dict(enumerate(items))


def _union(kafka: dict[Any, Any], ours: dict[Any, Any], where: Any) -> list[tuple[str, Any, Any]]:
    keys = [*kafka, *(key for key in ours if key not in kafka)]
    return [(where(k), kafka.get(k, _MISSING), ours.get(k, _MISSING)) for k in keys]


def _shown(value: Any) -> str:
    return ABSENT if value is _MISSING else render(value)


_CELL = re.compile(r"(?:\\\||[^|])+")


def known_differences(doc: Path = DOC) -> list[Known]:
    """The table's rows, in the doc's order."""
    section = doc.read_text().split(DOC_SECTION, 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        cells = [cell.strip().replace("\\|", "|") for cell in _CELL.findall(line.strip("| "))]
        scenario, path, kafka, ours, status = (cell.strip() for cell in cells)
        rows.append(
            Known(Difference(_code(scenario), _code(path), _code(kafka), _code(ours)), status)
        )
    return rows


def _code(cell: str) -> str:
    if not (cell.startswith("`") and cell.endswith("`")):
        raise ValueError(f"a table cell in backticks was expected: {cell!r}")
    return cell[2:-2].strip() if cell.startswith("`` ") else cell[1:-1]


def table_row(difference: Difference, status: str = "kept: ") -> str:
    """A row for the doc's table (what the check prints for a new difference)."""
    cells = [difference.scenario, difference.path, difference.kafka, difference.ours]
    quoted = [_quote(cell) for cell in cells]
    return "| " + " | ".join([*quoted, status]) + " |"


def _quote(text: str) -> str:
    text = text.replace("|", "\\|")
    return f"`` {text} ``" if "`" in text else f"`{text}`"


@dataclass
class Verdict:
    """One scenario's differences judged against the known ones."""

    scenario: str
    seen: list[Difference]
    new: list[Difference]
    gone: list[Known]  # kept rows no longer seen: fixed meanwhile
    back: list[Known]  # fixed rows seen again

    @property
    def matches(self) -> bool:
        return not (self.new or self.gone or self.back)

    def explain(self) -> str:
        lines = [f"{self.scenario} differs from Kafka 4.3.1 otherwise than {DOC.name} says:"]
        lines += [f"new (add a row, fixed or kept with why): {table_row(d)}" for d in self.new]
        lines += [
            f"no longer seen (fixed? mark the row so): {table_row(k.difference, k.status)}"
            for k in self.gone
        ]
        lines += [
            f"seen again (listed as fixed): {table_row(k.difference, k.status)}" for k in self.back
        ]
        return "\n".join(lines)


def judge(scenario: str, seen: list[Difference], known: list[Known]) -> Verdict:
    rows = [k for k in known if k.difference.scenario == scenario]
    covered = {k: [d for d in seen if k.covers(d)] for k in rows}
    return Verdict(
        scenario,
        seen,
        new=[d for d in seen if not any(k.covers(d) for k in rows)],
        gone=[k for k in rows if k.kept and not covered[k]],
        back=[k for k in rows if not k.kept and covered[k]],
    )
