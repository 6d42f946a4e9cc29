"""Traces through the real gateway (issue 51 §3): a broker in this process, its spans read
with the OpenTelemetry SDK's in-memory exporter, driven by confluent-kafka (librdkafka) from
a worker thread.

Each request is a tree of its own: the gateway's span is its root, the group actor's span for
the op and the coordinator-log append hang under it, although one actor task serves every
request of the group (and keeps the context of the request that started it). Mutation seen
to fail: the actor's spans taking their task's current context again (then both commits' and
every later op's broker spans hang off the first request, and later gateway spans have no
children)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import trio
from confluent_kafka import Consumer, Producer, TopicPartition
from opentelemetry.sdk.trace import ReadableSpan

from rafka_actors.broker import run_broker
from rafka_actors.config import BrokerConfig

from ..tracing import parent_of, span_exporter, span_id, trace_id

pytestmark = pytest.mark.e2e

GATEWAY = "rafka.gateway.group."
BROKER = "rafka.broker.group."
APPEND = "rafka.broker.coordinator.append"


def _create_topic(bootstrap: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce("traced", value=b"x")
    assert producer.flush(15) == 0


def _commit_twice(bootstrap: str) -> None:
    _create_topic(bootstrap)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "committer"})
    for offset in (1, 2):
        consumer.commit(offsets=[TopicPartition("traced", 0, offset)], asynchronous=False)
    consumer.close()


def _member(bootstrap: str) -> None:
    """A member joins, syncs, heartbeats, commits and leaves."""
    _create_topic(bootstrap)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "member",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "heartbeat.interval.ms": 100,
        }
    )
    consumer.subscribe(["traced"])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.1)
    assert consumer.assignment()
    time.sleep(0.5)  # a few heartbeats
    consumer.commit(offsets=[TopicPartition("traced", 0, 1)], asynchronous=False)
    consumer.close()


async def _serve(tmp_path: Path, *clients: object) -> list[ReadableSpan]:
    exporter = span_exporter()
    config = BrokerConfig(
        data_dir=tmp_path / "data", listen="127.0.0.1:0", group_initial_rebalance_delay_ms=0
    )
    async with trio.open_nursery() as nursery:
        host, port = await nursery.start(run_broker, config)
        for client in clients:
            await trio.to_thread.run_sync(client, f"{host}:{port}")  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()
    return list(exporter.get_finished_spans())


async def test_two_sequential_commits_to_one_group_are_two_separate_trees(
    tmp_path: Path,
) -> None:
    spans = await _serve(tmp_path, _commit_twice)
    requests = [s for s in spans if s.name == GATEWAY + "offset-commit"]
    assert len(requests) == 2
    assert [parent_of(s) for s in requests] == [None, None]  # each the root of its trace
    assert trace_id(requests[0]) != trace_id(requests[1])
    for request in requests:
        tree = [s for s in spans if trace_id(s) == trace_id(request)]
        assert sorted(s.name for s in tree) == sorted(
            [GATEWAY + "offset-commit", BROKER + "offset-commit", APPEND]
        )
        assert {parent_of(s) for s in tree if s is not request} == {span_id(request)}


async def test_every_broker_span_of_a_member_is_a_child_of_its_own_request(
    tmp_path: Path,
) -> None:
    spans = await _serve(tmp_path, _member)
    by_id = {span_id(s): s for s in spans}
    ops = [s for s in spans if s.name.startswith(BROKER) and s.name != BROKER + "timer"]
    kinds = Counter(s.name.removeprefix(BROKER) for s in ops)
    assert {"join", "sync", "heartbeat", "offset-commit", "leave"} <= set(kinds)
    for op in ops:
        parent = by_id[parent_of(op)]  # type: ignore[index]
        assert parent.name == GATEWAY + op.name.removeprefix(BROKER)
        assert parent.start_time is not None and op.start_time is not None
        assert parent.end_time is not None and op.end_time is not None
        assert parent.start_time <= op.start_time <= op.end_time <= parent.end_time
    requests = [s for s in spans if s.name.startswith(GATEWAY)]
    assert len({trace_id(s) for s in requests}) == len(requests)  # one trace per request
