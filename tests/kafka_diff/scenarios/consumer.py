"""Consumer groups (KIP-848) and share groups (KIP-932): heartbeats of unknown members and
fenced epochs, groups of the other kind, and what ConsumerGroupDescribe and
ShareGroupDescribe show of a group with one member."""

from __future__ import annotations

import functools
from typing import Any

from .. import calls
from ..probe import Probe, scenario
from ..steps import assigned, joined, topic

MEMBER = "kafka-diff-member-0000001"  # KIP-1082: the client names its member (v1)
FENCED = 1000  # an epoch ahead of the group's


def seen(probe: Probe, epoch: int, assignment: Any) -> dict[str, Any]:
    plain = probe.normaliser.plain
    return {"epoch": plain(epoch, "member_epoch"), "assignment": plain(assignment)}


@scenario
def consumer_group(probe: Probe) -> None:
    topic(probe, "cg-t", 2)
    topic(probe, "cg-t2")
    joined_ = probe.observe(
        "join", calls.consumer_heartbeat("cg-g", MEMBER, 0, ("cg-t",), assignor="uniform")
    )
    probe.record("join.first_epoch", joined_.member_epoch)
    heartbeat = functools.partial(calls.consumer_heartbeat, "cg-g", MEMBER)
    epoch, assignment = assigned(probe, joined_, heartbeat)
    probe.record("assigned", seen(probe, epoch, assignment))
    # a new subscription: a new epoch, so that the one before it is not 0 (a join)
    resubscribed = probe.ok(heartbeat(epoch, ("cg-t", "cg-t2")))
    epoch, assignment = assigned(probe, resubscribed, heartbeat, newer_than=epoch)
    probe.record("resubscribed", seen(probe, epoch, assignment))
    owned = tuple(assignment.topic_partitions)
    probe.observe("heartbeat.unknown_member", calls.consumer_heartbeat("cg-g", "nobody", epoch))
    probe.observe("heartbeat.fenced_epoch", calls.consumer_heartbeat("cg-g", MEMBER, FENCED))
    probe.observe("heartbeat.stale_epoch", calls.consumer_heartbeat("cg-g", MEMBER, epoch - 1))
    probe.observe("heartbeat.empty_member_id", calls.consumer_heartbeat("cg-g", "", 0, ("cg-t",)))
    probe.observe("heartbeat.empty_group", calls.consumer_heartbeat("", MEMBER, 0, ("cg-t",)))
    probe.observe("heartbeat.join_without_topics", calls.consumer_heartbeat("cg-g", "m2", 0))
    probe.observe(
        "heartbeat.unknown_assignor",
        calls.consumer_heartbeat("cg-g", "m3", 0, ("cg-t",), assignor="nope"),
    )
    probe.observe("heartbeat.ok", calls.consumer_heartbeat("cg-g", MEMBER, epoch, owned=owned))
    probe.observe(
        "commit.stale_epoch",
        calls.commit("cg-g", "cg-t", 1, generation=epoch - 1, member_id=MEMBER),
    )
    probe.observe(
        "commit.fenced_epoch", calls.commit("cg-g", "cg-t", 1, generation=FENCED, member_id=MEMBER)
    )
    probe.observe(
        "commit.unknown_member",
        calls.commit("cg-g", "cg-t", 1, generation=epoch, member_id="nobody"),
    )
    probe.observe("commit.ok", calls.commit("cg-g", "cg-t", 1, generation=epoch, member_id=MEMBER))
    probe.observe("commit.no_member", calls.commit("cg-g", "cg-t", 1))
    probe.observe(
        "fetch_offsets.stale_epoch", calls.fetch_offsets(("cg-g", None), member=(MEMBER, epoch - 1))
    )
    probe.observe(
        "fetch_offsets.unknown_member",
        calls.fetch_offsets(("cg-g", None), member=("nobody", epoch)),
    )
    probe.observe(
        "fetch_offsets.member", calls.fetch_offsets(("cg-g", None), member=(MEMBER, epoch))
    )
    probe.observe("describe.stable", calls.consumer_describe("cg-g"))
    probe.observe("describe_groups.consumer", calls.describe_groups("cg-g"))
    probe.observe("join_group.onto_consumer_group", calls.join("cg-g"))
    probe.observe(
        "share_heartbeat.onto_consumer_group", calls.share_heartbeat("cg-g", MEMBER, 0, ("cg-t",))
    )
    probe.observe("leave", calls.consumer_heartbeat("cg-g", MEMBER, -1))
    probe.observe("describe.empty", calls.consumer_describe("cg-g"))
    probe.observe("describe.unknown", calls.consumer_describe("cg-nogroup"))
    probe.observe("describe.unknown.empty_id", calls.consumer_describe(""))
    joined(probe, "cg-classic")
    probe.observe("describe.classic_group", calls.consumer_describe("cg-classic"))
    probe.observe(
        "heartbeat.onto_classic_group", calls.consumer_heartbeat("cg-classic", MEMBER, 0, ("cg-t",))
    )


@scenario
def share_group(probe: Probe) -> None:
    topic(probe, "sg-t", 2)
    joined_ = probe.observe("join", calls.share_heartbeat("sg-g", MEMBER, 0, ("sg-t",)))
    epoch, assignment = assigned(
        probe, joined_, functools.partial(calls.share_heartbeat, "sg-g", MEMBER)
    )
    probe.record("join.first_epoch", joined_.member_epoch)
    probe.record("assigned", seen(probe, epoch, assignment))
    probe.observe("heartbeat.unknown_member", calls.share_heartbeat("sg-g", "nobody", epoch))
    probe.observe("heartbeat.fenced_epoch", calls.share_heartbeat("sg-g", MEMBER, FENCED))
    probe.observe("heartbeat.empty_member_id", calls.share_heartbeat("sg-g", "", 0, ("sg-t",)))
    probe.observe("heartbeat.join_without_topics", calls.share_heartbeat("sg-g", "m2", 0))
    probe.observe("heartbeat.ok", calls.share_heartbeat("sg-g", MEMBER, epoch))
    probe.observe("describe.stable", calls.share_describe("sg-g"))
    probe.observe("describe_groups.share", calls.describe_groups("sg-g"))
    probe.observe("consumer_describe.share", calls.consumer_describe("sg-g"))
    probe.observe("join_group.onto_share_group", calls.join("sg-g"))
    probe.observe(
        "consumer_heartbeat.onto_share_group",
        calls.consumer_heartbeat("sg-g", MEMBER, 0, ("sg-t",)),
    )
    probe.observe("commit.onto_share_group", calls.commit("sg-g", "sg-t", 1))
    probe.observe("leave", calls.share_heartbeat("sg-g", MEMBER, -1))
    probe.observe("describe.empty", calls.share_describe("sg-g"))
    probe.observe("describe.unknown", calls.share_describe("sg-nogroup"))
    joined(probe, "sg-classic")
    probe.observe("describe.classic_group", calls.share_describe("sg-classic"))
    probe.observe(
        "heartbeat.onto_classic_group", calls.share_heartbeat("sg-classic", MEMBER, 0, ("sg-t",))
    )
