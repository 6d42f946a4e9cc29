"""Steps of several requests that scenarios share: a topic created and known, a classic
member joined and synced, a KIP-848 or share member's first assignment."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

from ..batch_builder import DEFAULT_TIMESTAMP
from . import calls
from .probe import Probe


def topic(probe: Probe, name: str, partitions: int = 1, **configs: str) -> None:
    """Created, and led: Kafka's broker takes the lead of a new topic's partitions a moment
    after CreateTopics answers (a Produce before then is NOT_LEADER_OR_FOLLOWER), as a
    client finds out; until ListOffsets answers for each. Kept forever (`retention.ms` -1):
    the scenarios' records carry times of 2023, which Kafka's retention would soon delete."""
    configs.setdefault("retention_ms", "-1")
    probe.ok(calls.create_topic(name, partitions, **configs))
    deadline = time.monotonic() + 30
    for partition in range(partitions):
        while True:
            answer = probe.send(calls.list_offsets(name, -1, partition))
            if answer.topics[0].partitions[0].error_code == ErrorCode.none:
                break
            assert time.monotonic() < deadline, answer
            time.sleep(0.1)


SPECIAL_TIMESTAMPS = {
    -1: "latest",
    -2: "earliest",
    -3: "max_timestamp",
    -4: "earliest_local",
    -5: "latest_tiered",
}


def offsets_at(probe: Probe, label: str, topic: str, timestamps: list[int], **options: int) -> None:
    """ListOffsets once per timestamp (Kafka refuses a partition twice in one request),
    each observed as `label.<timestamp>`, times after DEFAULT_TIMESTAMP as `T+n`."""
    for stamp in timestamps:
        name = SPECIAL_TIMESTAMPS.get(stamp) or (
            f"T{stamp - DEFAULT_TIMESTAMP:+d}" if stamp > 1_000_000 else str(stamp)
        )
        probe.observe(f"{label}.{name}", calls.list_offsets(topic, stamp, **options))


def read(probe: Probe, label: str, topic: str, isolation_level: int = 0) -> None:
    """A partition read as a consumer reads it, one batch per Fetch (Kafka may stop a Fetch's
    records at a batch boundary below the high watermark): the first answer's partition
    fields, then each batch, observed as `label`."""
    offset, batches, first = 0, [], None
    while True:
        answer = probe.send(calls.fetch(topic, 0, offset, isolation_level))
        partition = probe.normaliser.plain(answer.responses[0].partitions[0])
        stored = partition.pop("records") or []
        first = first or partition
        if not stored or partition["error_code"] != "none":
            break
        batches.append(stored[0])
        offset = stored[0]["offsets"][1] + 1
    probe.record(label, {**first, "batches": batches})


def joined(probe: Probe, group: str, label: str = "") -> tuple[str, int]:
    """A member that joined and synced a new classic group alone: (member id, generation);
    with a label, the two JoinGroup answers are observed."""
    first = probe.send(calls.join(group))
    answer = probe.ok(calls.join(group, first.member_id))
    if label:
        probe.record(f"{label}.join_required", probe.normaliser.plain(first))
        probe.record(f"{label}.join", probe.normaliser.plain(answer))
    member, generation = answer.member_id, answer.generation_id
    probe.ok(calls.sync(group, generation, member, b"\x00\x01"))
    return member, generation


def assigned(
    probe: Probe, joined: Any, heartbeat: Callable[[int], Any], newer_than: int = 0
) -> tuple[int, Any]:
    """The member's epoch and its first non-empty assignment in an epoch newer than the one
    given: heartbeats (`heartbeat(epoch)`) until one brings it (a broker assigns in its own
    time, and says an assignment once)."""
    deadline = time.monotonic() + 20
    response = joined
    while not (
        response.member_epoch > newer_than
        and response.assignment
        and response.assignment.topic_partitions
    ):
        assert time.monotonic() < deadline, f"no assignment: {response}"
        time.sleep(0.3)
        response = probe.send(heartbeat(response.member_epoch))
    return response.member_epoch, response.assignment
