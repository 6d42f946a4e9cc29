"""docs/kafka-differences.md lists exactly the topic configs accepted but not acted on."""

from __future__ import annotations

from pathlib import Path

from rafka_actors.storage.topic_configs import TOPIC_CONFIGS

DOC = Path(__file__).resolve().parents[2] / "docs" / "kafka-differences.md"


def test_the_doc_lists_every_topic_config_that_changes_nothing_and_why() -> None:
    section = DOC.read_text().split("## Topic configs and records", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1].replace("`", "")
    expected = {n: d.why_not for n, d in TOPIC_CONFIGS.items() if not d.acted_on}
    assert rows == expected
