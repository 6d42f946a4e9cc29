"""Offsets: ListOffsets' special timestamps and times between records, before and after
DeleteRecords; Fetch and DeleteRecords out of range; OffsetCommit and OffsetFetch edge cases
(unknown groups, topics and partitions, metadata at and over its limit, several groups in one
request); OffsetDelete; FindCoordinator's wrong keys."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from ...batch_builder import DEFAULT_TIMESTAMP as T
from .. import calls
from ..probe import Probe, scenario
from ..steps import assigned, offsets_at, topic
from .consumer import MEMBER

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5


@scenario
def list_offsets(probe: Probe) -> None:
    topic(probe, "lo-t")
    offsets_at(probe, "empty", "lo-t", [EARLIEST, LATEST, MAX_TIMESTAMP, T])
    stamps = [T + 10, T + 40, T + 20, T + 30, T]  # the largest at offset 1
    probe.observe("produce", calls.produce("lo-t", list("abcde"), timestamps=stamps))
    specials = [EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED]
    offsets_at(probe, "specials", "lo-t", specials)
    offsets_at(probe, "by_time", "lo-t", [T - 1, T, T + 15, T + 40, T + 41])
    offsets_at(probe, "unknown_special", "lo-t", [-9])
    offsets_at(probe, "unknown_partition", "lo-t", [LATEST], partition=7)
    offsets_at(probe, "unknown_topic", "lo-none", [LATEST])
    probe.observe("delete_records.beyond_end", calls.delete_records("lo-t", 0, 99))
    probe.observe("delete_records.unknown_partition", calls.delete_records("lo-t", 3, 1))
    probe.observe("delete_records.ok", calls.delete_records("lo-t", 0, 2))
    probe.observe("delete_records.backwards", calls.delete_records("lo-t", 0, 1))
    offsets_at(probe, "after_delete", "lo-t", [*specials, T - 1, T + 15])
    probe.observe("fetch.below_start", calls.fetch("lo-t", 0, 1))
    probe.observe("fetch.beyond_end", calls.fetch("lo-t", 0, 6))
    probe.observe("fetch.at_end", calls.fetch("lo-t", 0, 5))
    probe.observe("fetch.from_start", calls.fetch("lo-t", 0, 2))
    probe.observe("fetch.unknown_partition", calls.fetch("lo-t", 4, 0))
    probe.observe("fetch.unknown_topic", calls.fetch("lo-none", 0, 0))
    probe.observe("delete_records.to_end", calls.delete_records("lo-t", 0, -1))
    offsets_at(probe, "after_delete_all", "lo-t", specials)


@scenario
def offset_commit_fetch(probe: Probe) -> None:
    topic(probe, "of-t", 2)
    commit = calls.commit
    probe.observe("commit.simple", commit("of-g", "of-t", 3, metadata="m", leader_epoch=7))
    probe.observe("commit.null_metadata", commit("of-g", "of-t", 4, partition=1, metadata=None))
    probe.observe("commit.metadata_at_limit", commit("of-g2", "of-t", 1, metadata="x" * 4096))
    probe.observe("commit.metadata_over_limit", commit("of-g2", "of-t", 1, metadata="x" * 4097))
    probe.observe("commit.unknown_topic", commit("of-g2", "of-none", 1))
    probe.observe("commit.unknown_partition", commit("of-g2", "of-t", 1, partition=5))
    probe.observe("commit.negative_offset", commit("of-g2", "of-t", -5))
    probe.observe("commit.empty_group_id", commit("", "of-t", 1))
    probe.observe(
        "commit.member_of_no_group", commit("of-g3", "of-t", 1, generation=1, member_id="m")
    )
    fetch = calls.fetch_offsets
    probe.observe("fetch.all", fetch(("of-g", None)))
    probe.observe("fetch.some", fetch(("of-g", {"of-t": [0, 1]})))
    probe.observe("fetch.unknown_group", fetch(("of-nogroup", {"of-t": [0]})))
    probe.observe("fetch.unknown_group_all", fetch(("of-nogroup", None)))
    probe.observe("fetch.unknown_topic", fetch(("of-g", {"of-none": [0]})))
    probe.observe("fetch.unknown_partition", fetch(("of-g", {"of-t": [5]})))
    probe.observe("fetch.two_groups", fetch(("of-g", {"of-t": [0]}), ("of-g2", None)))
    probe.observe("fetch.empty_group_id", fetch(("", None)))
    probe.observe("fetch.member_of_no_group", fetch(("of-g", None), member=("m", 3)))
    delete = calls.offset_delete
    probe.observe("offset_delete.unknown_group", delete("of-nogroup", "of-t"))
    probe.observe("offset_delete.unknown_topic", delete("of-g", "of-none"))
    probe.observe("offset_delete.ok", delete("of-g", "of-t"))
    probe.observe("fetch.after_delete", fetch(("of-g", None)))
    joined = probe.send(calls.consumer_heartbeat("of-cg", MEMBER, 0, ("of-t",)))
    epoch, _ = assigned(probe, joined, lambda e: calls.consumer_heartbeat("of-cg", MEMBER, e))
    probe.ok(commit("of-cg", "of-t", 1, generation=epoch, member_id=MEMBER))
    probe.observe("offset_delete.subscribed", delete("of-cg", "of-t"))
    probe.observe("delete_groups.not_empty", calls.delete_groups("of-cg", "of-g", "of-nogroup"))


@scenario
def find_coordinator(probe: Probe) -> None:
    probe.observe("group", calls.find_coordinator(0, "fc-g"))
    probe.observe("transaction", calls.find_coordinator(1, "fc-txn"))
    probe.observe("group.empty_key", calls.find_coordinator(0, ""))
    probe.observe("transaction.empty_key", calls.find_coordinator(1, ""))
    probe.observe("share.malformed_key", calls.find_coordinator(2, "fc-g"))
    probe.observe("unknown_key_type", calls.find_coordinator(7, "fc-g"))
    # Kafka creates its share-state topic on the first share key and answers
    # COORDINATOR_NOT_AVAILABLE until it is loaded: a client retries, and so does this
    share_key = calls.find_coordinator(2, "fc-g:AAAAAAAAAAAAAAAAAAAAAQ:0")
    deadline = time.monotonic() + 60
    while probe.send(share_key).coordinators[0].error_code == ErrorCode.coordinator_not_available:
        assert time.monotonic() < deadline, "no share coordinator after 60 s"
        time.sleep(0.2)
    probe.observe("share.key", share_key)
    probe.observe("several_keys", calls.find_coordinator(0, "fc-a", "fc-b"))
    probe.observe("v3.group", calls.find_coordinator_v3(0, "fc-g"))
    probe.observe("v3.transaction", calls.find_coordinator_v3(1, "fc-txn"))
    probe.observe("v3.share", calls.find_coordinator_v3(2, "fc-g:AAAAAAAAAAAAAAAAAAAAAQ:0"))
    probe.observe("v3.unknown_key_type", calls.find_coordinator_v3(7, "fc-g"))
