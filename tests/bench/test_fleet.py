"""The load generator's fleet of group members (bench/harness/fleet.py) against the real broker.

No timing is asserted: what is checked is that one task drives every member through the
protocol, that a member told to leave from a workload's task is timed from that moment,
that stopping the fleet has every member leave its group, and (against a broker that never
answers a JoinGroup, on trio's mock clock) that an unanswered request fails the fleet.
"""

from __future__ import annotations

import datetime
import functools

import pytest
import trio
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.errors import ErrorCode

from harness.fleet import Fleet, running
from harness.loadgen import LoadgenError
from rafka_actors.protocol.codec import encode_response
from rafka_actors.protocol.headers import parse_request_header

from ..broker_process import BrokerProcess

pytestmark = pytest.mark.bench


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


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


async def _silent_broker(stream: trio.SocketStream) -> None:
    """Answers ApiVersions (JoinGroup v4-v9 and the rest), then reads and never answers."""
    versions = [ApiVersion(api_key=k, min_version=0, max_version=9) for k in (11, 12, 13, 14, 18)]
    buffer = b""
    async for data in stream:
        buffer += data
        while len(buffer) >= 4 and len(buffer) >= 4 + int.from_bytes(buffer[:4], "big"):
            size = int.from_bytes(buffer[:4], "big")
            frame, buffer = buffer[4 : 4 + size], buffer[4 + size :]
            header, _ = parse_request_header(frame)
            if header.api_key == 18:
                response = ApiVersionsResponse(
                    error_code=ErrorCode.none,
                    api_keys=tuple(versions),
                    throttle_time=datetime.timedelta(0),
                )
                await stream.send_all(encode_response(header, response))


async def test_a_request_never_answered_fails_the_fleet(autojump_clock: trio.abc.Clock) -> None:
    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(
            functools.partial(trio.serve_tcp, _silent_broker, 0, host="127.0.0.1")
        )
        port = listeners[0].socket.getsockname()[1]
        fleet = Fleet(f"127.0.0.1:{port}", rebalance_timeout_s=1.0)
        fleet.add_group("fleet-silent", 2)
        started = trio.current_time()
        with pytest.raises(BaseExceptionGroup) as caught:
            async with running(fleet, connect_timeout=30):
                await trio.sleep(3600)  # the fleet fails first
        [failure] = _leaves(caught.value)
        assert isinstance(failure, LoadgenError)
        assert "no answer to JoinGroup in time" in str(failure)
        # JoinGroup's timeout is the rebalance timeout and 10 s; the watchdog looks twice a
        # second
        assert 11.0 <= trio.current_time() - started <= 12.0
        nursery.cancel_scope.cancel()
