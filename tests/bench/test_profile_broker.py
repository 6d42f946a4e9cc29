"""bench/profile_broker.py charges each py-spy sample to the part of the broker its innermost
frame is in (the sampling itself needs ptrace rights, so it is not run here)."""

from __future__ import annotations

import pytest

import profile_broker  # bench/profile_broker.py: bench/ is on pytest's pythonpath

pytestmark = pytest.mark.bench

RAW = """\
x;run (trio/_core/_run.py:2532);_nonblocking_helper (trio/_socket.py:1050) 30
x;EpollIOManager.get_events (trio/_core/_io_epoll.py:245) 25
<module> (rafka-actors:8);unrolled_run (trio/_core/_run.py:2767) 5
x;_reply (rafka_actors/gateway/connection.py:105);_decode (rafka_actors/protocol/codec.py:73) 10
x;check (<generated guard kio.schema.offset_commit.v8.request.OffsetCommitRequest>) 4
x;_fill_to (rafka_actors/gateway/frames.py:90) 1
x;answer (rafka_actors/gateway/connection.py:140) 9
x;GroupActor._step_batch (rafka_actors/actors/group_actor.py:220) 3
x;handle (rafka_actors/group/machine.py:80) 2
x;_write_all (rafka_actors/storage/coordinator_segments.py:700) 4
x;DurableCoordinatorLog.append (rafka_actors/storage/durable_log.py:240) 1
x;__init__ (<string>:2) 6
thread;WorkerThread._work (trio/_core/_thread_cache.py:200) 40
thread;FsyncThread._serve (rafka_actors/storage/fsync_thread.py:80) 40

not a sample line
"""


def test_each_sample_goes_to_the_part_of_its_innermost_frame() -> None:
    profile = profile_broker.aggregate(RAW.splitlines())
    assert profile.samples == 100
    parts = dict(profile.parts)
    assert parts == {
        "socket system calls (send, recv)": 30,
        "epoll (waiting for and polling sockets)": 25,
        "trio scheduler, scopes, channels": 5,
        "wire codec (kio, headers, frames)": 15,
        "gateway (dispatch, handlers)": 9,
        "group actor and state machine": 5,  # actors/ and group/, durable_log excepted
        "coordinator log and storage": 5,
        profile_broker.OTHER: 6,
    }
    assert profile.functions["_nonblocking_helper (_socket.py)"] == 30


def test_lean_streams_reads_and_writes_are_socket_system_calls() -> None:
    profile = profile_broker.aggregate(
        [
            "x;LeanSocketStream.send_all (rafka_actors/gateway/lean_stream.py:60) 3",
            "x;LeanSocketStream._read (rafka_actors/gateway/lean_stream.py:70) 2",
            "x;LeanSocketStream.receive_some (rafka_actors/gateway/lean_stream.py:50) 1",
        ]
    )
    assert dict(profile.parts) == {
        "socket system calls (send, recv)": 5,
        "gateway (dispatch, handlers)": 1,
    }


def test_the_report_gives_each_part_its_share_of_the_cpu_per_request() -> None:
    profile = profile_broker.aggregate(RAW.splitlines())
    text = profile_broker.report("commit", 10_000, 80.0, profile, top=3)
    assert "## commit: 10,000 requests/s, broker CPU 80 us per request" in text
    assert "| socket system calls (send, recv) | 30% | 24.0 |" in text
    assert "| epoll (waiting for and polling sockets) | 25% | 20.0 |" in text
    assert text.count("\n- ") == 3
