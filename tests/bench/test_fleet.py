"""The load generator's fleet of group members (bench/fleet.py) against the real broker.

No timing is asserted: what is checked is that one task drives every member through the
protocol, that a member told to leave from a workload's task is timed from that moment, and
that stopping the fleet has every member leave its group.
"""

from __future__ import annotations

import trio

from rafka_actors.bench.fleet import Fleet, running

from ..broker_process import BrokerProcess


def _tasks(task: trio.lowlevel.Task) -> int:
    return 1 + sum(_tasks(child) for n in task.child_nurseries for child in n.child_tasks)


async def test_one_task_drives_every_member_to_a_stable_disjoint_assignment(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    broker: BrokerProcess = broker_factory("group.initial.rebalance.delay.ms=0")
    fleet = Fleet(broker.bootstrap, heartbeat_interval_s=0.2)
    trackers = [fleet.add_group(f"fleet-{g}", 10) for g in range(3)]
    async with running(fleet, connect_timeout=30):
        assert await fleet.wait_stable(30)
        # 30 members, and the whole run (this test, the fleet's nursery, its pump) is a few
        # tasks: a task per member would make it more than 30
        assert _tasks(trio.lowlevel.current_root_task()) < 10
        for tracker in trackers:
            assert tracker.stable_generation >= 1
            assert tracker.bad_assignments == 0
        members = fleet.members
        assert all(m.member_id and m.generation >= 1 for m in members)
        assert sum(m.is_leader for m in members) == len(trackers)
        await trio.sleep(0.5)  # heartbeats go on between the groups' rebalances
        assert not fleet.heartbeat_errors


async def test_a_member_leaving_is_timed_from_the_call_and_the_rest_rebalance(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    broker: BrokerProcess = broker_factory("group.initial.rebalance.delay.ms=0")
    # heartbeats a second apart: the fleet's pump sleeps between them, and a leave() from
    # this task must not be stamped with the time of its last pass
    fleet = Fleet(broker.bootstrap, heartbeat_interval_s=1.0)
    tracker = fleet.add_group("fleet-leave", 5)
    async with running(fleet, connect_timeout=30):
        assert await fleet.wait_stable(30)
        before = tracker.stable_generation
        await trio.sleep(0.3)
        leaver = next(m for m in fleet.members if not m.is_leader)
        called_at = trio.current_time()
        leaver.leave()
        assert leaver.left_at is not None and leaver.left_at >= called_at
        with trio.fail_after(30):
            await tracker.stable.wait()
        assert tracker.stable_generation > before
        assert tracker.expected == 4 and tracker.bad_assignments == 0
        assert leaver.member_id == ""  # its LeaveGroup was answered
        assert all(m.generation == tracker.stable_generation for m in fleet.members if m != leaver)


async def test_stopping_has_every_member_leave_its_group(
    broker_factory,  # type: ignore[no-untyped-def]
) -> None:
    broker: BrokerProcess = broker_factory("group.initial.rebalance.delay.ms=0")
    fleet = Fleet(broker.bootstrap, heartbeat_interval_s=1.0)
    fleet.add_group("fleet-stop", 6)
    async with running(fleet, connect_timeout=30):
        assert await fleet.wait_stable(30)
    assert fleet.done.is_set()
    for member in fleet.members:
        assert member.left_at is not None  # each sent a LeaveGroup...
        assert member.member_id == ""  # ...and had its answer
