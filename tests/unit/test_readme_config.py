"""The README's configuration table names every setting the broker takes."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from rafka_actors.config import BrokerConfig, kafka_key

README = Path(__file__).resolve().parents[2] / "README.md"


def _table_keys() -> set[str]:
    section = README.read_text().split("## Configuration", 1)[1]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {key for row in rows for key in re.findall(r"`([a-z0-9.]+)`", row.split(" | ")[0])}


def test_every_setting_has_a_row_in_the_readme() -> None:
    settings = {kafka_key(f.name) for f in dataclasses.fields(BrokerConfig)}
    missing = settings - _table_keys()
    assert not missing, f"README's configuration table lacks {sorted(missing)}"
