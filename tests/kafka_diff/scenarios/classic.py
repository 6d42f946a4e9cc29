"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup, DescribeGroups): wrong members,
stale generations, bad sessions and protocols, and what DescribeGroups shows."""

from __future__ import annotations

from .. import calls
from ..probe import Probe, scenario
from ..steps import joined, topic


@scenario
def classic_group_errors(probe: Probe) -> None:
    topic(probe, "classic-t")
    member, generation = joined(probe, "classic-g", label="joined")
    probe.observe("heartbeat.ok", calls.heartbeat("classic-g", generation, member))
    probe.observe("heartbeat.unknown_member", calls.heartbeat("classic-g", generation, "nobody"))
    probe.observe(
        "heartbeat.stale_generation", calls.heartbeat("classic-g", generation - 1, member)
    )
    probe.observe(
        "heartbeat.future_generation", calls.heartbeat("classic-g", generation + 1, member)
    )
    probe.observe("heartbeat.unknown_group", calls.heartbeat("classic-nogroup", 1, member))
    probe.observe("sync.unknown_member", calls.sync("classic-g", generation, "nobody"))
    probe.observe("sync.stale_generation", calls.sync("classic-g", generation - 1, member))
    probe.observe("join.unknown_member", calls.join("classic-g", "nobody"))
    probe.observe("join.session_too_short", calls.join("classic-g2", session_ms=10))
    probe.observe("join.session_too_long", calls.join("classic-g2", session_ms=3_600_000))
    probe.observe("join.no_protocols", calls.join("classic-g2", protocols=()))
    probe.observe("join.empty_protocol_type", calls.join("classic-g2", protocol_type=""))
    probe.observe("join.empty_group_id", calls.join(""))
    probe.observe(
        "join.other_protocol_type", calls.join("classic-g", member, protocol_type="connect")
    )
    probe.observe("join.no_common_protocol", calls.join("classic-g", protocols=(("rr", b""),)))
    commit = "commit"
    probe.observe(
        f"{commit}.ok",
        calls.commit("classic-g", "classic-t", 1, generation=generation, member_id=member),
    )
    probe.observe(
        f"{commit}.unknown_member",
        calls.commit("classic-g", "classic-t", 1, generation=generation, member_id="nobody"),
    )
    probe.observe(
        f"{commit}.stale_generation",
        calls.commit("classic-g", "classic-t", 1, generation=generation - 1, member_id=member),
    )
    probe.observe(f"{commit}.no_member_in_live_group", calls.commit("classic-g", "classic-t", 1))
    probe.observe("describe.stable", calls.describe_groups("classic-g"))
    probe.observe("leave.unknown_member", calls.leave("classic-g", "nobody"))
    probe.observe("leave.ok", calls.leave("classic-g", member))
    probe.observe("leave.unknown_group", calls.leave("classic-nogroup", member))
    probe.observe("describe.empty", calls.describe_groups("classic-g"))
    probe.observe("describe.unknown", calls.describe_groups("classic-nogroup"))
    probe.observe("describe.empty_group_id", calls.describe_groups(""))
