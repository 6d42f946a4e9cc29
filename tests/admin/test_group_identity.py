"""A group's `cgp_` id is minted once (issue #7 point 3): `rafka-actors groups list` and
`describe` show the same id while its members all leave and rejoin, and after the broker
restarts; the RRL stays `<org>/consumer-groups/<slug>` throughout.

Its own broker (not the module's of conftest.py): the test stops and restarts it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from rafka_actors.cli import main

from ..broker_process import BrokerProcess
from ..e2e.group_clients import ConfluentMember, wait_until
from .conftest import SETTINGS, Member, _settled, describe, make_topic, unique

pytestmark = pytest.mark.e2e


def identities(capsys: pytest.CaptureFixture[str], broker: BrokerProcess) -> dict[str, Any]:
    """{group: (cgp_id, rrl, state)} as `groups list` prints it, checked against `describe`."""
    capsys.readouterr()
    assert main(["groups", "list", "--output", "json", "--bootstrap", broker.bootstrap]) == 0
    listed = json.loads(capsys.readouterr().out)
    found = {}
    for g in listed:
        described = describe(broker, g["group"])
        assert (described.cgp_id, described.rrl) == (g["cgp_id"], g["rrl"])
        found[g["group"]] = (g["cgp_id"], g["rrl"], g["state"])
    return found


def run_members(broker: BrokerProcess, topic: str, groups: dict[str, str]) -> list[Member]:
    """One member per group (protocol "classic" or "consumer"), each settled and committed."""
    members = []
    for group, protocol in groups.items():
        member = Member(
            lambda g=group, p=protocol: ConfluentMember(
                broker.bootstrap, g, topic, auto_commit=False, protocol=p
            )
        )
        member.start()
        members.append(member)
    for group in groups:
        wait_until(lambda g=group: _settled(broker, g), f"group {group} to settle")
    for member in members:
        member.call(lambda m: m.commit({0: 1}))  # offsets keep an Empty group for good
    return members


def test_cgp_id_survives_members_leaving_rejoining_and_a_restart(
    broker_factory: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    broker: BrokerProcess = broker_factory(*SETTINGS)
    topic = make_topic(broker)
    groups = {unique("Classic.Group"): "classic", unique("kip848"): "consumer"}
    for member in run_members(broker, topic, groups):
        member.close()  # every member leaves
    first = identities(capsys, broker)
    for group in groups:
        cgp_id, rrl, state = first[group]
        assert cgp_id.startswith("cgp_") and state == "Empty"
        assert rrl == f"0/consumer-groups/{group.lower()}"
    assert len({first[g][0] for g in groups}) == 2  # one id per group

    rejoined = run_members(broker, topic, groups)
    again = identities(capsys, broker)
    for member in rejoined:
        member.close()
    for group in groups:
        assert again[group][:2] == first[group][:2] and again[group][2] == "Stable"

    broker.stop()
    broker.start()
    restarted = identities(capsys, broker)
    for group in groups:
        assert restarted[group] == first[group]  # same id and RRL, Empty again
    for member in run_members(broker, topic, groups):
        member.close()
    assert identities(capsys, broker) == first
