"""A data dir made by a real, scripted workload through the real broker, for the pipeline tests.

One topic `events` (one partition). Twelve rounds, each: produce ten records (waiting for the
acks, so the log end is known), pause, then commit, as five simple groups (generation -1, the
way tools and manually-assigned consumers commit), offsets that make each group one of Burrow's
cases:

- ``ok``: commits the log end (lag 0);
- ``warn``: commits half the log end: the offset moves, the lag grows every time;
- ``stall``: commits 5 every time while the log grows;
- ``stop``: commits the log end minus 3 in rounds 0-3, then never again;
- ``rewind``: commits the log end minus 2, except round 6 which goes back to offset 10.

Then a classic group ``evict`` on the same topic: a victim member (its own process) joins, a
survivor joins, the victim is SIGKILLed and evicted when its 2 s session runs out, and the
survivor leaves. `EXPECTED_LAG` holds, per group, the (committed, log end, lag) of each commit.
"""

from __future__ import annotations

import time
from pathlib import Path

import confluent_kafka

from ..broker_process import BrokerProcess
from ..e2e.clients import Confluent
from ..e2e.group_clients import ConfluentMember, MemberProcess, start_members, wait_until

TOPIC = "events"
ROUNDS = 12
PER_ROUND = 10
PAUSE = 0.04  # between producing and committing, and between rounds: no two share a ms
VICTIM_SESSION_MS = 2000


def planned_offset(group: str, round_: int, log_end: int) -> int | None:
    """What `group` commits in `round_` when the log ends at `log_end` (None: no commit)."""
    if group == "ok":
        return log_end
    if group == "warn":
        return log_end // 2
    if group == "stall":
        return 5
    if group == "stop":
        return log_end - 3 if round_ <= 3 else None
    if group == "rewind":
        return 10 if round_ == 6 else log_end - 2
    raise ValueError(group)


BURROW_GROUPS = ("ok", "warn", "stall", "stop", "rewind")
EXPECTED_LAG: dict[str, list[tuple[int, int, int]]] = {
    group: [
        (offset, end, end - offset)
        for r in range(ROUNDS)
        for end in [(r + 1) * PER_ROUND]
        for offset in [planned_offset(group, r, end)]
        if offset is not None
    ]
    for group in BURROW_GROUPS
}


def run_workload(data_dir: Path) -> dict[str, str]:
    """Run it all against a broker on `data_dir`; returns facts the tests check (member ids)."""
    broker = BrokerProcess(
        data_dir, "group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=1000"
    ).start()
    try:
        Confluent(broker.bootstrap).create_topic(TOPIC, 1)
        _burrow_rounds(broker.bootstrap)
        return _eviction(broker.bootstrap)
    finally:
        broker.stop()


def _burrow_rounds(bootstrap: str) -> None:
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    committers = {
        g: confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": g})
        for g in BURROW_GROUPS
    }
    try:
        for round_ in range(ROUNDS):
            for i in range(PER_ROUND):
                producer.produce(TOPIC, f"r{round_}-{i}".encode(), partition=0)
            assert producer.flush(10) == 0
            time.sleep(PAUSE)
            log_end = (round_ + 1) * PER_ROUND
            for group, committer in committers.items():
                offset = planned_offset(group, round_, log_end)
                if offset is not None:
                    tp = confluent_kafka.TopicPartition(TOPIC, 0, offset)
                    for done in committer.commit(offsets=[tp], asynchronous=False) or []:
                        assert done.error is None, done
            time.sleep(PAUSE)
    finally:
        for committer in committers.values():
            committer.close()


def _eviction(bootstrap: str) -> dict[str, str]:
    opts = {"session_ms": VICTIM_SESSION_MS, "auto_commit": False}
    victim = MemberProcess("confluent", bootstrap, "evict", TOPIC, **opts)
    try:
        wait_until(lambda: victim.holds() == frozenset({0}), "the victim to join")
        (survivor,) = start_members([lambda: ConfluentMember(bootstrap, "evict", TOPIC, **opts)])
        # the survivor's join is a rebalance: the victim (eager) gives its partition back
        wait_until(lambda: len(victim.events()[1]) >= 1, "the survivor's join")
        rebalances_seen = len(survivor.events()[0])
        victim.kill()
        wait_until(
            lambda: len(survivor.events()[0]) > rebalances_seen,
            "the victim's eviction (a rebalance without it)",
            timeout=VICTIM_SESSION_MS / 1000 + 15,
        )
        assert survivor.member is not None
        survivor_id = str(survivor.member.member_id)  # type: ignore[attr-defined]
        survivor.close()  # leaves the group
    finally:
        victim.kill()
    return {"survivor": survivor_id}
