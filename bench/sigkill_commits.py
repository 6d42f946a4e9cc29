"""What an acknowledged commit is worth: how many survive a SIGKILL of the broker.

The commits/s figures of `bench/run.py` compare brokers that promise different things
for the same acknowledgement. This commits offsets from `--groups` groups with confluent-kafka
(synchronous commits: each one acknowledged before the next), SIGKILLs the broker's whole
process group, starts it again on the same data dir, and asks each group for its committed
offset. A broker that keeps what it acknowledged answers every group's last offset.

    .venv/bin/python bench/sigkill_commits.py [--brokers rafka-actors,noida-db,tansu]
        [--groups 20] [--commits 50]
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from harness.brokers import (
    Broker,
    BrokerUnavailable,
    parse_brokers,
    running,
    split_broker_list,
)
from harness.consumer_workloads import PROTOCOLS, create_topic
from harness.core import Target

NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: the group has no committed offset


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--brokers", default="rafka-actors,rafka-actors[coordinator.log.fsync=never],noida-db"
    )
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--commits", type=int, default=50, help="per group")
    parser.add_argument(
        "--kill-after", type=float, default=0.0, help="seconds from the last commit to the kill"
    )
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/sigkill_commits.py', *sys.argv[1:]])}")
    print("| broker | groups whose last acknowledged commit survived | offsets after restart |")
    print("|---|---|---|")
    for broker in parse_brokers(split_broker_list(args.brokers), []):
        try:
            survived, seen = acknowledged_then_killed(
                broker, args.groups, args.commits, args.kill_after
            )
        except BrokerUnavailable as exc:
            print(f"| {broker.name} | not run: {exc} | |")
            continue
        shown = ", ".join(f"{offset}x{seen.count(offset)}" for offset in sorted(set(seen)))
        print(f"| {broker.name} | {survived} of {args.groups} | {shown} |")
    return 0


def acknowledged_then_killed(
    broker: Broker, groups: int, commits: int, kill_after: float
) -> tuple[int, list[int]]:
    """(groups whose offset `commits` came back, every group's offset after the restart)."""
    with tempfile.TemporaryDirectory(prefix="sigkill-commits-") as tmp:
        data_dir = Path(tmp)
        with running(broker, data_dir) as target:
            topic = create_topic(target, 1)
            for group in range(groups):
                with _consumer(target, group) as consumer:
                    for offset in range(1, commits + 1):
                        consumer.commit(
                            offsets=[TopicPartition(topic, 0, offset)], asynchronous=False
                        )
            time.sleep(kill_after)
            assert target.pid is not None  # `running` started it
            os.killpg(target.pid, signal.SIGKILL)  # leaving `running` reaps what is left
        with running(broker, data_dir) as target:
            seen = []
            for group in range(groups):
                with _consumer(target, group) as consumer:
                    (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=30)
                    seen.append(found.offset)
    return sum(offset == commits for offset in seen), seen


@contextmanager
def _consumer(target: Target, group: int) -> Iterator[Consumer]:
    """A classic consumer of group `sigkill-<n>`, as the bench's workloads make them (it
    commits only when told)."""
    consumer = Consumer(PROTOCOLS["classic"](target, f"sigkill-{group}"))
    try:
        yield consumer
    finally:
        consumer.close()


if __name__ == "__main__":
    sys.exit(main())
