"""The rebalances job on Spark: a real (pure) classic group's records and KIP-848 epoch records
written into a data dir's coordinator log, read back through the data source."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from rafka_actors.cli import main
from rafka_actors.consumer_group.records import ConsumerGroupMetadataRecord
from rafka_actors.pipeline.rebalances import rebalance_history, write_and_summarise

from ..classic_group.harness import GROUP_ID, GroupHarness
from .datadir import DataDir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_rebalance_history_of_a_classic_and_a_consumer_group(
    spark: SparkSession, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    h = GroupHarness()
    h.now = 1_700_000_000_000
    a, b = (j.member_id for j in h.join_and_sync_group_of(2))
    h.sleep(1000)
    h.leave(b)
    h.sleep(500)
    h.wait_for(h.join(a))
    h.sync(a, 2, {a: b"x"})
    h.sleep(60_000)  # a's session runs out
    data = DataDir(tmp_path, coordinator_segment_bytes=1)  # one segment per append
    for record in h.records:
        data.record(GROUP_ID, record)
    data.record(
        "kip848",
        ConsumerGroupMetadataRecord("kip848", "cgp", 1, 1, "member m1 joined", 1_700_000_001_000),
        ConsumerGroupMetadataRecord("kip848", "cgp", 2, 1, "member m1 left", 1_700_000_002_000),
    )
    data.close()

    history = rebalance_history(spark, tmp_path)
    rows = [r.asDict() for r in history.collect()]
    assert [(r["group_id"], r["generation"], r["cause"]) for r in rows] == [
        ("group-id", 1, f"member joined ({a})"),
        ("group-id", 2, f"member left ({b})"),
        ("group-id", 3, f"session timeout of {a}"),
        ("kip848", 1, "member joined (m1)"),
        ("kip848", 2, "member left (m1)"),
    ]
    first, second, third = rows[:3]
    assert first["joined"] == sorted([a, b]) and first["duration_ms"] == 6000
    assert (second["left"], second["evicted"], second["duration_ms"]) == ([b], [], 500)
    assert third["evicted"] == [a]
    table = write_and_summarise(history, tmp_path / "out")
    assert f"session timeout of {a}" in table
    assert list((tmp_path / "out" / "rebalances").glob("*.parquet"))
    # the command line: the same table, the same Parquet
    args = ["pipeline", "rebalances", "--data-dir", str(tmp_path), "--out", str(tmp_path / "c")]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert f"session timeout of {a}" in printed and "member left (m1)" in printed
    assert list((tmp_path / "c" / "rebalances").glob("*.parquet"))
