"""The gateway over trio memory streams: whatever a client sends, the broker answers correctly
or closes that one connection with a log line, and keeps serving the others."""

from __future__ import annotations

import logging
import struct
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kio.schema.api_versions.v0.request import ApiVersionsRequest as ApiVersionsRequestV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import Api, BrokerContext, ConnectionInfo
from rafka_actors.gateway.steps import Step
from rafka_actors.storage.data_plane import DataPlane

from ..wire import parse_response, request_frame


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[BrokerContext]:
    config = BrokerConfig(data_dir=tmp_path, socket_request_max_bytes=1 << 20)
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    yield BrokerContext(config, data, "127.0.0.1", 9092, API_TABLE)
    data.close()


class Client:
    """The client end of an in-memory connection whose server end runs serve_connection."""

    def __init__(self, stream: trio.testing.MemoryStapledStream[Any]) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self) -> bytes | None:
        while True:
            if len(self.buffer) >= 4:
                (length,) = struct.unpack_from(">i", self.buffer)
                if len(self.buffer) >= 4 + length:
                    frame, self.buffer = self.buffer[4 : 4 + length], self.buffer[4 + length :]
                    return frame
            chunk = await self.stream.receive_some()
            if not chunk:
                return None
            self.buffer += chunk

    async def closed_by_server(self) -> bool:
        with trio.fail_after(5):
            return await self.read_frame() is None


async def connect(nursery: trio.Nursery, ctx: BrokerContext, apis: Any = API_TABLE) -> Client:
    client_end, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(serve_connection, server_end, ctx, apis, ConnectionInfo("test", 1))
    return Client(client_end)


API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


async def test_api_versions_uses_response_header_v0(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        await client.send(request_frame(API_VERSIONS, correlation_id=7))
        frame = await client.read_frame()
        assert frame is not None
        correlation_id, response = parse_response(frame, ApiVersionsResponse, header_version=0)
        assert correlation_id == 7
        assert response.error_code == 0
        served = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert served == {a.key: (a.min_version, a.max_version) for a in API_TABLE.values()}
        await client.stream.aclose()


async def test_api_versions_answers_are_built_once_per_version(ctx: BrokerContext) -> None:
    """Answers are kept per version: a v0 asker after a v3 one still gets v0's shape."""
    served = {a.key: (a.min_version, a.max_version) for a in API_TABLE.values()}
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        for correlation_id, request, cls in (
            (1, API_VERSIONS, ApiVersionsResponse),
            (2, ApiVersionsRequestV0(), ApiVersionsResponseV0),
            (3, API_VERSIONS, ApiVersionsResponse),
        ):
            await client.send(request_frame(request, correlation_id=correlation_id))
            frame = await client.read_frame()
            assert frame is not None
            got_id, response = parse_response(frame, cls, header_version=0)
            assert got_id == correlation_id and response.error_code == 0
            assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == served
        assert sorted(ctx.api_versions_answers) == [0, 3]
        await client.stream.aclose()


async def test_unsupported_api_versions_version_gets_v0_error_35(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        frame = bytearray(request_frame(API_VERSIONS, correlation_id=9))
        struct.pack_into(">h", frame, 6, 99)  # api_version field of the header
        await client.send(bytes(frame))
        reply = await client.read_frame()
        assert reply is not None
        correlation_id, response = parse_response(reply, ApiVersionsResponseV0, header_version=0)
        assert correlation_id == 9
        assert response.error_code == 35
        assert any(k.api_key == 18 and k.max_version == 4 for k in response.api_keys)
        await client.stream.aclose()


async def test_responses_come_in_request_order(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        metadata = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        pipelined = b"".join(
            request_frame(metadata if i % 2 else API_VERSIONS, correlation_id=i) for i in range(20)
        )
        await client.send(pipelined)
        for i in range(20):
            frame = await client.read_frame()
            assert frame is not None
            cls, header = (MetadataResponse, 1) if i % 2 else (ApiVersionsResponse, 0)
            assert parse_response(frame, cls, header)[0] == i
        await client.stream.aclose()


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (struct.pack(">i", -5), "frame length -5"),
        (struct.pack(">i", 0), "frame length 0"),
        (struct.pack(">i", (1 << 20) + 1), "frame length 1048577"),
        (struct.pack(">i", 2**31 - 1), "frame length 2147483647"),
        (struct.pack(">ihhih", 10, 9999, 0, 1, -1), "unknown api key 9999"),
        (struct.pack(">ihhihB", 11, 3, 999, 1, -1, 0), "unsupported version 999 of Metadata"),
        (struct.pack(">i", 3) + b"abc", "malformed request header"),
        (struct.pack(">ihhi", 8, 3, 1, 1), "malformed request header"),
        (struct.pack(">ihhihB", 13, 3, 12, 1, -1, 0) + b"\xff\xff", "malformed Metadata v12"),
        (struct.pack(">i", 100) + b"x" * 10, "mid-frame"),
    ],
)
async def test_bad_frames_close_the_connection_with_a_log_line(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture, payload: bytes, reason: str
) -> None:
    caplog.set_level(logging.INFO)
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        await client.send(payload)
        if reason == "mid-frame":
            await client.stream.send_stream.aclose()  # hang up half-way through the frame
        assert await client.closed_by_server()
    assert reason in caplog.text


async def test_hang_up_between_frames_is_quiet(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        await client.send(request_frame(API_VERSIONS))
        assert await client.read_frame() is not None
        await client.stream.aclose()
    assert caplog.text == ""


async def test_one_bad_connection_does_not_disturb_another(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        good = await connect(nursery, ctx)
        bad = await connect(nursery, ctx)
        await good.send(request_frame(API_VERSIONS, correlation_id=1))
        await bad.send(b"\x00\x00\x00\x10garbage-garbage!")
        assert await bad.closed_by_server()
        assert await good.read_frame() is not None
        await good.send(request_frame(API_VERSIONS, correlation_id=2))
        frame = await good.read_frame()
        assert frame is not None and parse_response(frame, ApiVersionsResponse, 0)[0] == 2
        await good.stream.aclose()


async def test_handler_bug_closes_only_that_connection(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("boom")

    apis = {**API_TABLE, 3: Api(3, "Metadata", 0, 13, broken)}
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx, apis)
        metadata = MetadataRequest(
            topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
        )
        await client.send(request_frame(metadata))
        assert await client.closed_by_server()
    assert "internal error" in caplog.text and "boom" in caplog.text


async def test_idle_connection_is_closed(
    ctx: BrokerContext, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    ctx.config = ctx.config.with_values(connections_max_idle_ms=600_000)
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        start = trio.current_time()
        with trio.fail_after(10_000):
            assert await client.read_frame() is None
        assert trio.current_time() - start == pytest.approx(600, abs=1)
    assert "idle for 600s" in caplog.text


async def test_silence_inside_a_frame_is_idleness_too(
    ctx: BrokerContext, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    ctx.config = ctx.config.with_values(
        connections_max_idle_ms=5_000, socket_request_max_bytes=8 << 20
    )
    async with trio.open_nursery() as nursery:
        small, big = await connect(nursery, ctx), await connect(nursery, ctx)
        await small.send(struct.pack(">i", 100) + b"\x00\x03")  # then nothing
        await big.send(struct.pack(">i", 3 << 20) + b"\x00" * 1000)
        start = trio.current_time()
        with trio.fail_after(60):
            assert await small.read_frame() is None
            assert await big.read_frame() is None
        assert trio.current_time() - start == pytest.approx(5, abs=1)
    assert caplog.text.count("idle for 5s inside a frame") == 2
    assert ctx.frame_bytes.used == 0


async def test_a_peer_that_never_reads_its_replies_is_closed(
    ctx: BrokerContext, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    ctx.config = ctx.config.with_values(connections_max_idle_ms=5_000)
    client_end, server_end = trio.testing.lockstep_stream_pair()  # send blocks until read
    metadata = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client_end.send_all, request_frame(metadata))
        with trio.fail_after(60):  # returns once it has closed the connection
            await serve_connection(server_end, ctx, API_TABLE, ConnectionInfo("t", 1))
    assert "peer has not read its reply for 5s" in caplog.text


async def test_big_frames_wait_for_room_in_queued_max_request_bytes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Two 3 MiB frames with room for 4 MiB: the second body is read only once the first
    request is answered; every byte of the budget comes back, however a frame ends."""
    config = BrokerConfig(
        data_dir=tmp_path, socket_request_max_bytes=8 << 20, queued_max_request_bytes=4 << 20
    )
    data = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    answered: list[int] = []
    release = trio.Event()

    class Released(Step):
        async def take(self, ctx: BrokerContext) -> Any:
            await release.wait()
            return None  # acks=0 style: nothing to send

    def slow(ctx: BrokerContext, conn: ConnectionInfo, version: int, request: Any) -> Any:
        answered.append(ctx.frame_bytes.used)
        return Released()

    slow_apis = {18: API_TABLE[18], 3: Api(3, "Metadata", 0, 13, slow)}
    ctx = BrokerContext(config, data, "127.0.0.1", 9092, slow_apis)
    big = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    frame = request_frame(big)
    padded = struct.pack(">i", 3 << 20) + frame[4:] + b"\x00" * ((3 << 20) - len(frame) + 4)
    async with trio.open_nursery() as nursery:
        first, second = (
            await connect(nursery, ctx, slow_apis),
            await connect(nursery, ctx, slow_apis),
        )
        await first.send(padded)
        await trio.sleep(1)
        await second.send(padded)
        await trio.sleep(1)
        assert answered == [3 << 20]  # the second waits for room, its body unread
        release.set()
        await trio.sleep(1)
        assert answered == [3 << 20, 3 << 20]
        cut = await connect(nursery, ctx, slow_apis)
        await cut.send(struct.pack(">i", 3 << 20) + b"\x00" * 100)
        await cut.stream.aclose()  # hangs up mid-frame
        await trio.sleep(1)
        nursery.cancel_scope.cancel()
    assert ctx.frame_bytes.used == 0
    data.close()


@pytest.mark.parametrize("in_flight", [1, 4])
async def test_read_ahead_answers_what_came_before_a_bad_frame_then_closes(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture, in_flight: int
) -> None:
    ctx.config = ctx.config.with_values(max_in_flight_requests_per_connection=in_flight)
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        good = b"".join(request_frame(API_VERSIONS, correlation_id=i) for i in range(3))
        await client.send(good + struct.pack(">i", -5))
        for i in range(3):
            frame = await client.read_frame()
            assert frame is not None and parse_response(frame, ApiVersionsResponse, 0)[0] == i
        assert await client.closed_by_server()
    assert "frame length -5" in caplog.text
    assert "internal error" not in caplog.text


@pytest.mark.parametrize("in_flight", [1, 4])
async def test_idle_read_ahead_connection_is_closed(
    ctx: BrokerContext,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
    in_flight: int,
) -> None:
    ctx.config = ctx.config.with_values(
        connections_max_idle_ms=5_000, max_in_flight_requests_per_connection=in_flight
    )
    async with trio.open_nursery() as nursery:
        client = await connect(nursery, ctx)
        await client.send(request_frame(API_VERSIONS))
        assert await client.read_frame() is not None
        start = trio.current_time()
        with trio.fail_after(60):
            assert await client.read_frame() is None
        assert trio.current_time() - start == pytest.approx(5, abs=0.01)
    assert "idle for 5s" in caplog.text
