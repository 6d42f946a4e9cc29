"""The benchmark's report: one Markdown table of every figure for every target, and JSON.

A cell is `median (min-max)` over the runs; a ratio column per peer compares medians with the
first target (rafka-actors), oriented so that above 1.0 means the first target did better.
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .core import Figure


@dataclass
class Results:
    """Per target (in run order), the merged figures by key (in first-seen order)."""

    targets: list[str]
    figures: dict[str, dict[str, Figure]]  # target -> key -> figure

    def figure_keys(self) -> list[str]:
        seen: dict[str, None] = {}
        for target in self.targets:
            seen.update(dict.fromkeys(self.figures.get(target, {})))
        return list(seen)

    def figure(self, key: str) -> Figure:
        return next(self.figures[t][key] for t in self.targets if key in self.figures.get(t, {}))


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def cell(figure: Figure | None) -> str:
    if figure is None:
        return "n/a"
    summary = figure.summary()
    if summary is None:
        return "-"
    low, median, high = summary
    if len(figure.values) == 1:
        return _number(median)
    return f"{_number(median)} ({_number(low)}-{_number(high)})"


def ratio(ours: Figure | None, theirs: Figure | None) -> str:
    """Our median over theirs, oriented: > 1.0 means ours is better."""
    if ours is None or theirs is None:
        return "n/a"
    a, b = ours.summary(), theirs.summary()
    if a is None or b is None or a[1] == 0 or b[1] == 0:
        return "-"
    value = a[1] / b[1] if ours.higher_is_better else b[1] / a[1]
    return f"{value:.2f}x"


def markdown(results: Results, header: Sequence[str] = ()) -> str:
    first, peers = results.targets[0], results.targets[1:]
    columns = ["figure", "unit", *results.targets, *(f"vs {p}" for p in peers)]
    lines = [*header, "", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for key in results.figure_keys():
        shown = results.figure(key)
        row = [shown.label.replace("|", "/"), shown.unit]
        row += [cell(results.figures.get(t, {}).get(key)) for t in results.targets]
        ours = results.figures.get(first, {}).get(key)
        row += [ratio(ours, results.figures.get(p, {}).get(key)) for p in peers]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as info:
            cpu = next(line.split(":", 1)[1].strip() for line in info if "model name" in line)
    except (OSError, StopIteration):
        pass
    return f"{os.cpu_count()} cores ({cpu}), Python {platform.python_version()}"


def as_json(results: Results, meta: dict[str, Any]) -> str:
    return json.dumps(
        {
            **meta,
            "targets": results.targets,
            "figures": {
                target: {
                    key: {
                        "label": f.label,
                        "unit": f.unit,
                        "higher_is_better": f.higher_is_better,
                        "values": f.values,
                    }
                    for key, f in figures.items()
                }
                for target, figures in results.figures.items()
            },
        },
        indent=2,
    )
