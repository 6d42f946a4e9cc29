"""Kafka's own tools against each broker: kafka-topics, kafka-consumer-groups,
kafka-share-groups, kafka-transactions, kafka-configs and kafka-get-offsets, over the same
state, set up through the wire: a topic with records, a classic group with a member and
commits, an empty group with commits, a KIP-848 group and a share group with a member each,
and an open transaction. Members are kept alive between the tools' runs (each takes seconds)."""

from __future__ import annotations

import functools

from rafka_actors.classic_group.consumer_protocol import encode_assignment, encode_subscription

from ...batch_builder import DEFAULT_TIMESTAMP as T
from .. import calls
from ..probe import Probe, scenario
from ..steps import assigned, topic
from .consumer import MEMBER

TOPIC, SESSION_MS = "tool-t", 600_000


def set_up(probe: Probe) -> tuple[functools.partial[object], functools.partial[object]]:
    """The state the tools show; the heartbeats that keep its KIP-848 and share members."""
    topic(probe, TOPIC, 2)
    probe.ok(calls.produce(TOPIC, ["a", "b", "c"], timestamps=[T, T + 10, T + 20]))
    probe.ok(calls.produce(TOPIC, ["d"], partition=1, timestamps=[T + 5]))
    subscription = encode_subscription([TOPIC])
    join = functools.partial(
        calls.join, "tool-classic", session_ms=SESSION_MS, protocols=(("range", subscription),)
    )
    member = probe.send(join()).member_id
    joined = probe.ok(join(member))
    probe.normaliser.placeholder("member", member)
    assignment = encode_assignment({TOPIC: [0, 1]})
    probe.ok(calls.sync("tool-classic", joined.generation_id, member, assignment))
    for partition, offset in ((0, 2), (1, 1)):
        commit = calls.commit(
            "tool-classic", TOPIC, offset, partition=partition,
            generation=joined.generation_id, member_id=member,
        )  # fmt: skip
        probe.ok(commit)
    probe.ok(calls.commit("tool-empty", TOPIC, 3, metadata="kept"))
    consumer = functools.partial(calls.consumer_heartbeat, "tool-cg", MEMBER)
    epoch, _ = assigned(probe, probe.send(consumer(0, (TOPIC,))), consumer)
    probe.ok(calls.commit("tool-cg", TOPIC, 1, generation=epoch, member_id=MEMBER))
    share = functools.partial(calls.share_heartbeat, "tool-sg", MEMBER)
    share_epoch, _ = assigned(probe, probe.send(share(0, (TOPIC,))), share)
    init = probe.ok(calls.init_producer_id("tool-txn", SESSION_MS))
    pid, producer_epoch = init.producer_id, init.producer_epoch
    probe.normaliser.placeholder("producer", pid)
    probe.ok(calls.add_partitions("tool-txn", pid, producer_epoch, TOPIC, 1))
    producer = (pid, producer_epoch, 0)
    probe.ok(
        calls.produce(TOPIC, ["e"], partition=1, transactional_id="tool-txn", producer=producer)
    )
    return functools.partial(consumer, epoch), functools.partial(share, share_epoch)


# (label, the tool and its arguments) in the order they run
COMMANDS = [
    ("topics.describe", "topics --describe --topic tool-t"),
    ("topics.describe_unknown", "topics --describe --topic tool-none"),
    ("get_offsets.latest", "get-offsets --topic tool-t"),
    ("get_offsets.earliest", "get-offsets --topic tool-t --time -2"),
    ("get_offsets.max_timestamp", "get-offsets --topic tool-t --time -3"),
    ("configs.topic", "configs --describe --entity-type topics --entity-name tool-t"),
    ("configs.group", "configs --describe --entity-type groups --entity-name tool-classic"),
    ("groups.describe", "consumer-groups --describe --group tool-classic"),
    ("groups.members", "consumer-groups --describe --group tool-classic --members --verbose"),
    ("groups.state", "consumer-groups --describe --group tool-classic --state"),
    ("groups.empty", "consumer-groups --describe --group tool-empty"),
    ("groups.empty_state", "consumer-groups --describe --group tool-empty --state"),
    ("groups.unknown", "consumer-groups --describe --group tool-none"),
    ("groups.consumer", "consumer-groups --describe --group tool-cg"),
    ("groups.consumer_members", "consumer-groups --describe --group tool-cg --members --verbose"),
    ("groups.consumer_state", "consumer-groups --describe --group tool-cg --state"),
    ("share.describe", "share-groups --describe --group tool-sg"),
    ("share.members", "share-groups --describe --group tool-sg --members --verbose"),
    ("share.state", "share-groups --describe --group tool-sg --state"),
    ("transactions.describe", "transactions describe --transactional-id tool-txn"),
    ("transactions.producers", "transactions describe-producers --topic tool-t --partition 1"),
]
# the listings, of this scenario's names only (the other scenarios' are there too)
LISTINGS = [
    ("topics.list", "topics --list --exclude-internal"),
    ("groups.list", "consumer-groups --list"),
    ("share.list", "share-groups --list"),
    ("transactions.list", "transactions list"),
]


@scenario
def kafka_tools(probe: Probe) -> None:
    consumer_alive, share_alive = set_up(probe)
    for listing, (label, command) in [(False, c) for c in COMMANDS] + [(True, c) for c in LISTINGS]:
        probe.ok(consumer_alive())  # (their sessions end 45 s after their last heartbeat)
        probe.ok(share_alive())
        probe.tool(label, *command.split(), sort=listing, only="tool-" if listing else "")
