"""Each real client creates a topic, produces 10 000 records in every compression codec, and
reads every acknowledged record back in order: before and after a SIGTERM restart and a
SIGKILL restart of the broker on the same data dir. Records acknowledged just before each
stop (no pause in between) must be there after the restart."""

from __future__ import annotations

import signal

import pytest

from ..broker_process import BrokerProcess
from .clients import CLIENTS

pytestmark = pytest.mark.e2e

PARTITIONS = 6
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
PER_CODEC = 2000


def _records(label: str, count: int = PER_CODEC) -> list[tuple[bytes, bytes]]:
    return [(f"key-{i % 97}".encode(), f"{label}:{i:06d}".encode()) for i in range(count)]


def _check(got: dict[int, list[bytes]], labels: list[str]) -> None:
    values = [v for vs in got.values() for v in vs]
    expected = {v for label in labels for _, v in _records(label)}
    assert len(values) == len(expected), "every acknowledged record comes back exactly once"
    assert set(values) == expected
    for partition, vs in got.items():
        order = [(labels.index(v.split(b":")[0].decode()), v) for v in vs]
        assert order == sorted(order), f"partition {partition} out of order"


@pytest.mark.parametrize("client_name", list(CLIENTS))
def test_produce_consume_restart(broker: BrokerProcess, client_name: str) -> None:
    client = CLIENTS[client_name](broker.bootstrap)
    topic = f"e2e-{client_name}"
    client.create_topic(topic, PARTITIONS)
    labels = list(CODECS)
    for codec in CODECS:
        assert client.produce(topic, _records(codec), codec) == PER_CODEC
    _check(client.read_all(topic, PARTITIONS, PER_CODEC * len(labels)), labels)
    marks = client.watermarks(topic, PARTITIONS)
    assert all(low == 0 for low, _ in marks)
    assert sum(high for _, high in marks) == PER_CODEC * len(labels)

    for sig in (signal.SIGTERM, signal.SIGKILL):
        label = signal.Signals(sig).name
        assert client.produce(topic, _records(label), "lz4") == PER_CODEC
        broker.stop(sig)  # at once: the acknowledgements above are all we rely on
        broker.start()
        labels.append(label)
        _check(client.read_all(topic, PARTITIONS, PER_CODEC * len(labels)), labels)
        marks = client.watermarks(topic, PARTITIONS)
        assert sum(high for _, high in marks) == PER_CODEC * len(labels)
