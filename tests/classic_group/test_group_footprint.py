"""What a classic group costs the cycle collector: with 100 000 groups held, every object
a group keeps tracked is 100 000 more for each full collection to walk (gc_policy.py)."""

from __future__ import annotations

import gc
from dataclasses import fields

from rafka_actors.classic_group.state import ClassicGroup, GroupState


def test_an_idle_group_holds_no_tracked_containers_of_its_own() -> None:
    group = ClassicGroup("g", "cgp_1")
    group.pending_sync["m-1"] = None  # as a rebalance leaves it: str keys only
    values = {f.name: getattr(group, f.name) for f in fields(group)}
    tracked = [n for n, v in values.items() if gc.is_tracked(v) and type(v) is not GroupState]
    assert tracked == []  # (its states are shared enum members)


def test_departures_are_kept_for_the_next_record_once_someone_departs() -> None:
    group = ClassicGroup("g", "cgp_1")
    assert group.departed is None
    group.depart("m-1", "left")
    group.depart("m-2", "session timeout")
    assert group.departed == [("m-1", "left"), ("m-2", "session timeout")]
