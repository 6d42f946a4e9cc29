"""What rebuilding state from the coordinator's records costs, and what a machine step costs.

Pure Python, no broker: the group machines (`coordinator.machine.handle`) and the transaction
machine stepped back to back, and groups and transactions rebuilt from their compacted records
as start-up and a passivated group's next request do (`actors/stored_groups.py`, the
transaction log's `replay`). Each figure is the least of `--rounds`, in CPU microseconds per item.

Rebuilding:
- `simple groups`: 100 000 groups each with its group record and one offset, by membership
  (what start-up's `resume` reads) and with the offsets (a group's first request);
- `consumer group`: one KIP-848 group of 1 000 members, settled, its records rebuilt;
- `share group`: a share group with 100 partitions of 1 000 in-flight records each;
- `transactions`: 100 000 transactional ids, one record each.
Start-up: the coordinator log of 100 000 simple groups (each made by one OffsetCommit) opened
from disk and every group's membership read, as the broker's start-up does.
Stepping: a heartbeat of a settled 100-member consumer group, a 100-member consumer group
formed (one join per member until all are stable), a 100-member classic rebalance (JoinGroup
and SyncGroup of every member), an OffsetCommit of a simple group, and a transaction's
AddPartitions, EndTxn and markers.

    .venv/bin/python bench/replay_cost.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import itertools
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rafka_actors import gc_policy
from rafka_actors.actors.stored_groups import stored_group, stored_membership
from rafka_actors.classic_group.records import GroupMetadataRecord
from rafka_actors.consumer_group.ops import ConsumerGroupHeartbeatOp
from rafka_actors.coordinator import machine
from rafka_actors.coordinator.latest import LatestRecords
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.group_common.ops import JoinGroupOp, OffsetCommitOp, SyncGroupOp, TimerFired
from rafka_actors.group_common.records import OffsetCommitRecord, Record
from rafka_actors.group_common.topic_image import TopicImage, TopicInfo
from rafka_actors.ids import GroupKey
from rafka_actors.share_group.records import ShareGroupMetadataRecord, SharePartitionRecord
from rafka_actors.storage.coordinator_records import decode_entry, encode_entry
from rafka_actors.storage.coordinator_segments import CoordinatorSegments
from rafka_actors.storage.durable_log import DurableCoordinatorLog
from rafka_actors.transaction import machine as txn_machine
from rafka_actors.transaction.ops import (
    AddPartitionsOp,
    EndTxnOp,
    InitProducerIdOp,
    MarkersWritten,
)
from rafka_actors.transaction.records import TransactionRecord, replay
from rafka_actors.transaction.state import TxnConfig

NOW = 1_000_000
CONFIG = GroupConfig(consumer_assignment_interval_ms=0, initial_rebalance_delay_ms=0)
TOPICS = TopicImage.of(
    1, [TopicInfo(f"t{i}", uuid.uuid5(uuid.NAMESPACE_DNS, f"t{i}"), 100) for i in range(10)]
)
TOPIC_NAMES = tuple(sorted(TOPICS.by_name))


class _View:
    """The stored groups' compacted records, as the coordinator log answers them."""

    def __init__(self) -> None:
        self.latest: LatestRecords[Record] = LatestRecords()

    def records_of(self, key: GroupKey) -> list[Record]:
        return self.latest.records_of(key)

    def membership_of(self, key: GroupKey) -> list[Record]:
        return self.latest.membership_of(key)


def _timed(work: Callable[[], int], rounds: int) -> float:
    """The least CPU microseconds per item of `work` (which returns how many items it did)
    over `rounds`: on a machine shared with other work, the least is the steadiest."""
    figures = []
    for _ in range(rounds):
        start = time.process_time()
        items = work()
        figures.append((time.process_time() - start) * 1e6 / items)
    return min(figures)


# -- rebuilding ------------------------------------------------------------------------------
def simple_groups(count: int = 100_000) -> tuple[_View, list[GroupKey]]:
    view = _View()
    keys = [GroupKey(0, f"g{i}") for i in range(count)]
    for key in keys:
        head = GroupMetadataRecord(key.group_id, "cgp_x", None, 0, None, None, NOW, ())
        offset = OffsetCommitRecord(key.group_id, "t0", 0, 42, -1, "", NOW)
        view.latest.apply(key, [head, offset])
    return view, keys


def write_groups(data_dir: Path, count: int = 100_000) -> None:
    """The coordinator log of `count` simple groups (each made by one OffsetCommit: its group
    record and its offset), written straight into its segment files."""
    segments = CoordinatorSegments.open(data_dir / "coordinator", decode_entry, lambda _: None)
    for first in range(0, count, 1_000):
        batch = []
        for i in range(first, min(first + 1_000, count)):
            key = GroupKey(0, f"g{i}")
            head = GroupMetadataRecord(key.group_id, "cgp_x", None, 0, None, None, NOW, ())
            batch.append(encode_entry(key, head))
            batch.append(
                encode_entry(key, OffsetCommitRecord(key.group_id, "t0", 0, 42, -1, "", NOW))
            )
        segments.append(batch)
    segments.fsync()
    segments.close()


def start_up(data_dir: Path) -> int:
    """What start-up does with them: open the log, then read every group's membership (the
    registry's `resume`, which starts the actors of groups with members)."""
    log = DurableCoordinatorLog.open(data_dir)
    keys = log.keys()
    with_members = sum(
        bool(getattr(stored_membership(log, key, NOW, CONFIG), "members", None)) for key in keys
    )
    assert with_members == 0
    log.close()
    return len(keys)


def _consumer_join(member_id: str, epoch: int, owned: Any = ()) -> ConsumerGroupHeartbeatOp:
    return ConsumerGroupHeartbeatOp(
        group_id="c",
        member_id=member_id,
        member_epoch=epoch,
        rebalance_timeout_ms=30_000 if epoch == 0 else -1,
        subscribed_topic_names=TOPIC_NAMES if epoch == 0 else None,
        owned=owned,
        client_id="client",
        client_host="/127.0.0.1",
    )


class ConsumerGroupRun:
    """A consumer group formed by `members` joining, then heartbeating until settled."""

    def __init__(self, members: int) -> None:
        self.group: Any = None
        self.records: list[Record] = []
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, Any] = {}
        self.tokens = itertools.count(1)
        for i in range(members):
            self.step(f"m{i}", 0, ())
        for _ in range(4):  # revoke, then assign: a few rounds settle everyone
            for member_id in list(self.epochs):
                self.step(member_id, self.epochs[member_id], self.owned[member_id])

    def step(self, member_id: str, epoch: int, owned: Any) -> None:
        token = next(self.tokens)
        result = machine.handle(
            self.group,
            _consumer_join(member_id, epoch, owned),
            NOW,
            token,
            config=CONFIG,
            fresh_cgp_id="cgp_c",
            topics=TOPICS,
        )
        self.group = result.group
        self.records.extend(result.records)
        answer = dict(result.replies)[token]
        assert answer.error_code == 0, answer
        self.epochs[member_id] = answer.member_epoch
        if answer.assignment is not None:
            self.owned[member_id] = answer.assignment


def share_group(partitions: int = 100, in_flight: int = 1_000) -> list[Record]:
    records: list[Record] = [ShareGroupMetadataRecord("s", "cgp_s", 3)]
    for p in range(partitions):
        batches = tuple(
            (first, first + 9, (1, 2, 0, 4)[first // 10 % 4], 1 + first // 10 % 3)
            for first in range(1_000, 1_000 + in_flight, 10)
        )
        records.append(SharePartitionRecord("s", "t0", p, 1_000, batches))
    return records


def transactions(count: int = 100_000) -> list[list[Record]]:
    return [
        [
            TransactionRecord(
                f"tx{i}", i, 3, 2, 60_000, "Ongoing", (("t0", (0, 1)),), ("g",), NOW, NOW
            )
        ]
        for i in range(count)
    ]


# -- stepping --------------------------------------------------------------------------------
def heartbeats(run: ConsumerGroupRun, rounds: int) -> int:
    for _ in range(rounds):
        for member_id, epoch in run.epochs.items():
            run.step(member_id, epoch, None)
    return rounds * len(run.epochs)


def classic_rebalance(members: int) -> int:
    """Every member joins (known member ids), the leader assigns, every member syncs."""
    group: Any = None
    tokens = itertools.count(1)

    def send(op: Any) -> dict[int, Any]:
        nonlocal group
        result = machine.handle(group, op, NOW, next(tokens), config=CONFIG, fresh_cgp_id="k")
        group = result.group
        return dict(result.replies)

    ids = [f"k{i}" for i in range(members)]
    protocols = (("range", b"\x00\x01"),)
    for member_id in ids:
        send(
            JoinGroupOp(
                "k",
                "",
                "consumer",
                10_000,
                protocols,
                30_000,
                require_known_member_id=False,
                new_member_id=member_id,
            )
        )
    while group.state.value == "PreparingRebalance":  # the initial delay (0 ms) runs out
        send(TimerFired())
    generation = group.generation
    assignments = tuple((m, b"a") for m in ids)
    for member_id in ids:
        is_leader = member_id == group.leader_id
        send(SyncGroupOp("k", member_id, generation, assignments if is_leader else ()))
    return members


def commits(count: int) -> int:
    group: Any = None
    for i in range(count):
        op = OffsetCommitOp("s", (("t0", 0, i, -1, ""),))
        group = machine.handle(group, op, NOW, i, config=CONFIG, fresh_cgp_id="s").group
    return count


def txn_cycles(count: int) -> int:
    ids = itertools.count(1)
    config = TxnConfig()

    def step(txn: Any, op: Any) -> Any:
        return txn_machine.handle(
            txn, op, NOW, transactional_id="tx", config=config, new_producer_id=lambda: next(ids)
        ).txn

    txn = step(None, InitProducerIdOp(60_000))
    partitions = frozenset({("t0", 0), ("t0", 1)})
    for _ in range(count):
        txn = step(txn, AddPartitionsOp(txn.producer_id, txn.producer_epoch, partitions))
        txn = step(txn, EndTxnOp(txn.producer_id, txn.producer_epoch, True))
        txn = step(txn, MarkersWritten(txn.producer_id, txn.producer_epoch))
    return 3 * count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    rounds = parser.parse_args().rounds
    view, keys = simple_groups()
    consumer = ConsumerGroupRun(1_000)
    consumer_view = _View()
    consumer_view.latest.apply(GroupKey(0, "c"), consumer.records)
    share = _View()
    share.latest.apply(GroupKey(0, "s"), share_group())
    txns = transactions()
    settled = ConsumerGroupRun(100)

    def each(rebuild: Callable[[Any, GroupKey], Any], log: Any, at: list[GroupKey]) -> int:
        for key in at:
            rebuild(log, key)
        return len(at)

    def full(log: Any, key: GroupKey) -> Any:
        return stored_group(log, key, NOW, CONFIG)

    figures = {
        "replay: simple groups, membership (us/group)": lambda: each(
            lambda log, key: stored_membership(log, key, NOW, CONFIG), view, keys
        ),
        "replay: simple groups, with offsets (us/group)": lambda: each(full, view, keys),
        "replay: consumer group of 1000 (us/member)": lambda: (
            1_000 * each(full, consumer_view, [GroupKey(0, "c")] * 10)
        ),
        "replay: share group, 100 x 1000 in flight (us/partition)": lambda: (
            100 * each(full, share, [GroupKey(0, "s")] * 3)
        ),
        "replay: transactions (us/txn)": lambda: sum(replay(r) is not None for r in txns),
        "step: consumer heartbeat, 100 settled (us/heartbeat)": lambda: heartbeats(settled, 20),
        "step: consumer group of 100 formed (us/member)": lambda: len(ConsumerGroupRun(100).epochs),
        "step: classic rebalance of 100 (us/member)": lambda: classic_rebalance(100),
        "step: offset commit (us/commit)": lambda: commits(20_000),
        "step: transaction (us/step)": lambda: txn_cycles(10_000),
    }
    with tempfile.TemporaryDirectory() as tmp:
        write_groups(Path(tmp))
        gc_policy.starting()
        print(
            f"{'start-up: 100 000 groups from disk (us/group)':60} "
            f"{_timed(lambda: start_up(Path(tmp)), max(2, rounds // 4)):9.2f}",
            flush=True,
        )
    for name, work in figures.items():
        # the cycle collector as the broker sets it: off while it replays at start-up, tuned
        # (and what start-up built frozen) once it serves
        if name.startswith("replay"):
            gc_policy.starting()
        else:
            gc_policy.serving()
        print(f"{name:60} {_timed(work, rounds):9.2f}", flush=True)


if __name__ == "__main__":
    main()
