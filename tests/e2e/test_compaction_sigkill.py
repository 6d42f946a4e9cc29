"""A SIGKILL while the log cleaner works loses nothing. Each round writes new versions of every
key while the topic is not compacted, turns compaction on, and kills the broker (SIGKILL) as
soon as the cleaning's output file appears (the last round: right after the change); the
broker starts again on the same data dir and a consumer still reads the latest acknowledged
value of every key, each offset once."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AlterConfigOpType

from ..broker_process import BrokerProcess
from .compacted_io import WAIT, alter_policy, create, produce, read_confluent

pytestmark = pytest.mark.e2e

TOPIC = "compacted-kill"
KEYS = 300
SEGMENT_BYTES = 32 * 1024


def _set_policy(broker: BrokerProcess, value: str) -> None:
    alter_policy(broker, TOPIC, AlterConfigOpType.SET, value)


def _kill_while_cleaning(broker: BrokerProcess, partition_dir: Path, at_once: bool) -> bool:
    """SIGKILL the broker once a round's output file exists (or now); whether one did."""
    # (the cleaner runs at a low priority: on a loaded machine it may start late)
    deadline = time.monotonic() + (0 if at_once else 4 * WAIT)
    seen = False
    while time.monotonic() <= deadline and not seen:
        seen = any(partition_dir.glob("*.log.cleaned"))
        if not seen:
            time.sleep(0.002)
    broker.stop(signal.SIGKILL)
    return seen


@pytest.mark.timeout(600)
def test_sigkill_during_cleaning_loses_nothing(
    broker_factory: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker = broker_factory("log.cleaner.backoff.ms=50", data_dir=tmp_path / "data")
    create(broker, TOPIC, cleanup_policy="compact", internal_segment_bytes=str(SEGMENT_BYTES),
           min_cleanable_dirty_ratio="0.01")  # fmt: skip
    partition_dir = tmp_path / "data" / "topics" / TOPIC / "0"
    expected: dict[bytes, bytes] = {}
    caught = 0
    for round_ in range(3):
        records = [
            (b"key-%d" % k, b"round-%d-version-%d-" % (round_, v) + b"x" * 80)
            for v in range(3)
            for k in range(KEYS)
        ]
        _set_policy(broker, "delete")  # (retention.ms is a week: nothing goes)
        small_batches = {"batch.num.messages": "50"}  # (a batch never spans segments)
        assert all(code == 0 for code, _ in produce(broker, TOPIC, list(records), **small_batches))
        expected.update(records)
        _set_policy(broker, "compact")
        caught += _kill_while_cleaning(broker, partition_dir, at_once=round_ == 2)
        broker.start()
        assert not list(partition_dir.glob("*.cleaned")) + list(partition_dir.glob("*.swap"))
        read = read_confluent(broker, TOPIC)
        offsets = [offset for offset, _, _ in read]
        assert offsets == sorted(set(offsets)), "each offset once, in order"
        assert {key: value for _, key, value in read} == expected, "the latest value of each key"
    cleaner = [line for line in broker.lines if "clean" in line or "configs now" in line]
    assert caught == 2, "\n".join(["no round was caught writing its file", *cleaner])
