"""SASL on the gateway over trio memory streams: the gate before authentication, the exchange,
failures that answer and close, the org fixed per connection, and read-ahead limits."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from kafka.net.sasl.scram import ScramClient
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse
from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest
from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse

from rafka_actors.auth.scram import Mechanism, derive_credential
from rafka_actors.auth.users import User, UserStore
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import LINGER_S, serve_connection
from rafka_actors.gateway.context import PRE_AUTH_APIS, BrokerContext, ConnectionInfo, SaslSetup
from rafka_actors.gateway.limits import ConnectionLimits
from rafka_actors.storage.data_plane import DataPlane

from ..wire import parse_response, request_frame
from .test_connection import Client

METADATA = MetadataRequest(
    topics=(), allow_auto_topic_creation=False, include_topic_authorized_operations=False
)
API_VERSIONS = ApiVersionsRequest(client_software_name="t", client_software_version="1")


def users() -> UserStore:
    credentials = {m: derive_credential(m, "pw", iterations=4096) for m in Mechanism}
    return UserStore(
        {
            "alice": User("alice", 1, (), (), credentials),
            "bob": User("bob", 2, ("team-a.",), (), credentials),
        }
    )


def make_ctx(
    tmp_path: Path, data: DataPlane, *, sasl: bool = True, **settings: Any
) -> BrokerContext:
    config = BrokerConfig(data_dir=tmp_path, socket_request_max_bytes=1 << 20, **settings)
    setup = SaslSetup(
        ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), users(), b"k" * 32, trio.CapacityLimiter(1)
    )
    return BrokerContext(
        config,
        data,
        "127.0.0.1",
        9092,
        API_TABLE,
        limits=ConnectionLimits(10, 10, config.max_connections_per_user),
        sasl=setup if sasl else None,
    )


@pytest.fixture
async def data(tmp_path: Path) -> AsyncIterator[DataPlane]:
    plane = DataPlane.open(tmp_path, segment_bytes=1 << 20)
    yield plane
    plane.close()


@pytest.fixture
def ctx(tmp_path: Path, data: DataPlane) -> BrokerContext:
    return make_ctx(tmp_path, data)


def open_conn(nursery: trio.Nursery, ctx: BrokerContext) -> tuple[Client, ConnectionInfo]:
    conn = ConnectionInfo("test", 1)
    if ctx.sasl is not None:
        conn.sasl, conn.gate = ctx.new_sasl_session(), PRE_AUTH_APIS
    client_end, server_end = trio.testing.memory_stream_pair()
    nursery.start_soon(serve_connection, server_end, ctx, API_TABLE, conn)
    return Client(client_end), conn


async def ask(client: Client, request: Any, response_cls: type, correlation_id: int = 1) -> Any:
    await client.send(request_frame(request, correlation_id=correlation_id))
    frame = await client.read_frame()
    assert frame is not None, "connection closed instead of answering"
    flexible = response_cls.__flexible__ and response_cls.__api_key__ != 18  # ApiVersions: v0
    header_version = 1 if flexible else 0
    got_id, response = parse_response(frame, response_cls, header_version=header_version)
    assert got_id == correlation_id
    return response


async def handshake(client: Client, mechanism: str) -> SaslHandshakeResponse:
    response = await ask(client, SaslHandshakeRequest(mechanism=mechanism), SaslHandshakeResponse)
    return response  # type: ignore[no-any-return]


async def authenticate(client: Client, token: bytes) -> SaslAuthenticateResponse:
    request = SaslAuthenticateRequest(auth_bytes=token)
    return await ask(client, request, SaslAuthenticateResponse)  # type: ignore[no-any-return]


async def login_plain(client: Client, user: str, password: str) -> SaslAuthenticateResponse:
    assert (await handshake(client, "PLAIN")).error_code is ErrorCode.none
    return await authenticate(client, f"\0{user}\0{password}".encode())


async def test_only_api_versions_and_sasl_before_authentication(
    ctx: BrokerContext, caplog: pytest.LogCaptureFixture
) -> None:
    async with trio.open_nursery() as nursery:
        client, conn = open_conn(nursery, ctx)
        versions = await ask(client, API_VERSIONS, ApiVersionsResponse)
        keys = {k.api_key for k in versions.api_keys}
        assert {17, 36} <= keys
        await client.send(request_frame(METADATA))
        assert await client.closed_by_server()
    assert "Metadata before authentication" in caplog.text
    assert conn.user is None and conn.org_id == 0


async def test_plain_login_fixes_the_org_and_opens_the_gate(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        client, conn = open_conn(nursery, ctx)
        response = await login_plain(client, "bob", "pw")
        assert response.error_code is ErrorCode.none
        assert conn.org_id == 2 and conn.user is not None and conn.user.name == "bob"
        assert conn.gate is None
        metadata = await ask(client, METADATA, MetadataResponse, correlation_id=5)
        assert metadata.brokers
        nursery.cancel_scope.cancel()
    assert ctx.limits.per_user["bob"] == 1


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_login_with_kafka_pythons_client(ctx: BrokerContext, mechanism: str) -> None:
    async with trio.open_nursery() as nursery:
        client, conn = open_conn(nursery, ctx)
        shake = await handshake(client, mechanism)
        assert shake.error_code is ErrorCode.none
        assert set(shake.mechanisms) == {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
        scram = ScramClient("alice", "pw", mechanism)
        first = await authenticate(client, scram.first_message())
        assert first.error_code is ErrorCode.none and conn.user is None
        scram.process_server_first_message(first.auth_bytes)
        final = await authenticate(client, scram.final_message())
        assert final.error_code is ErrorCode.none
        scram.process_server_final_message(final.auth_bytes)  # checks the server's signature
        assert conn.org_id == 1
        nursery.cancel_scope.cancel()


async def test_wrong_password_is_answered_late_then_the_connection_closes(
    ctx: BrokerContext, autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    async with trio.open_nursery() as nursery:
        client, conn = open_conn(nursery, ctx)
        assert (await handshake(client, "PLAIN")).error_code is ErrorCode.none
        start = trio.current_time()
        # the Metadata pipelined behind the bad login must never be answered
        await client.send(request_frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0no")))
        await client.send(request_frame(METADATA, correlation_id=2))
        frame = await client.read_frame()
        assert frame is not None
        _, response = parse_response(frame, SaslAuthenticateResponse, header_version=1)
        assert response.error_code is ErrorCode.sasl_authentication_failed
        assert "alice" not in (response.error_message or "")
        assert trio.current_time() - start >= 0.1  # connection.failed.authentication.delay.ms
        assert await client.closed_by_server()
    assert conn.user is None and conn.org_id == 0
    assert "authentication failed: bad password for 'alice'" in caplog.text


async def test_after_a_failed_login_the_client_may_close_first(
    ctx: BrokerContext, autojump_clock: trio.testing.MockClock
) -> None:
    """The reply is not followed at once by our close: a client that read both in one go
    (kafka-python 3.0) dropped the reply and reported a lost connection, never the failure."""
    async with trio.open_nursery() as nursery:
        client, _ = open_conn(nursery, ctx)
        assert (await handshake(client, "PLAIN")).error_code is ErrorCode.none
        response = await authenticate(client, b"\0alice\0no")
        assert response.error_code is ErrorCode.sasl_authentication_failed
        answered = trio.current_time()
        assert await client.closed_by_server()
        assert trio.current_time() - answered >= LINGER_S  # it waited for us to close first


async def test_unknown_mechanism_gets_33_and_a_close(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        client, _ = open_conn(nursery, ctx)
        response = await handshake(client, "GSSAPI")
        assert response.error_code is ErrorCode.unsupported_sasl_mechanism
        assert "PLAIN" in response.mechanisms
        assert await client.closed_by_server()


async def test_token_before_handshake_closes_unanswered(ctx: BrokerContext) -> None:
    async with trio.open_nursery() as nursery:
        client, _ = open_conn(nursery, ctx)
        await client.send(request_frame(SaslAuthenticateRequest(auth_bytes=b"\0alice\0pw")))
        assert await client.closed_by_server()


async def test_big_frames_are_refused_before_authentication(
    tmp_path: Path, data: DataPlane, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = make_ctx(tmp_path, data, sasl_server_max_receive_size=1000)
    async with trio.open_nursery() as nursery:
        client, _ = open_conn(nursery, ctx)
        await client.send(request_frame(SaslAuthenticateRequest(auth_bytes=b"x" * 2000)))
        assert await client.closed_by_server()
    assert "outside 1..1000" in caplog.text


async def test_after_login_sasl_requests_get_illegal_state_and_the_connection_stays(
    ctx: BrokerContext,
) -> None:
    async with trio.open_nursery() as nursery:
        client, _ = open_conn(nursery, ctx)
        await login_plain(client, "alice", "pw")
        again = await handshake(client, "PLAIN")
        assert again.error_code is ErrorCode.illegal_sasl_state
        token = await authenticate(client, b"\0alice\0pw")
        assert token.error_code is ErrorCode.illegal_sasl_state
        assert (await ask(client, METADATA, MetadataResponse)).brokers
        nursery.cancel_scope.cancel()


async def test_without_sasl_everyone_is_org_0_and_handshake_is_illegal(
    tmp_path: Path, data: DataPlane
) -> None:
    ctx = make_ctx(tmp_path, data, sasl=False)
    async with trio.open_nursery() as nursery:
        client, conn = open_conn(nursery, ctx)
        assert (await ask(client, METADATA, MetadataResponse)).brokers
        assert (await handshake(client, "PLAIN")).error_code is ErrorCode.illegal_sasl_state
        assert (await ask(client, METADATA, MetadataResponse)).brokers
        assert conn.org_id == 0 and conn.user is None
        nursery.cancel_scope.cancel()


async def test_a_user_over_its_connection_limit_fails_authentication(
    tmp_path: Path, data: DataPlane, autojump_clock: trio.testing.MockClock
) -> None:
    ctx = make_ctx(tmp_path, data, max_connections_per_user=1)
    async with trio.open_nursery() as nursery:
        first, _ = open_conn(nursery, ctx)
        assert (await login_plain(first, "alice", "pw")).error_code is ErrorCode.none
        second, conn = open_conn(nursery, ctx)
        refused = await login_plain(second, "alice", "pw")
        assert refused.error_code is ErrorCode.sasl_authentication_failed
        assert "Too many connections" in (refused.error_message or "")
        assert await second.closed_by_server()
        assert conn.user is None
        # another user is not affected
        third, _ = open_conn(nursery, ctx)
        assert (await login_plain(third, "bob", "pw")).error_code is ErrorCode.none
        nursery.cancel_scope.cancel()


async def test_read_ahead_answers_in_order_and_closes_after_the_last_good_request(
    tmp_path: Path, data: DataPlane, caplog: pytest.LogCaptureFixture
) -> None:
    ctx = make_ctx(tmp_path, data, sasl=False, max_in_flight_requests_per_connection=3)
    async with trio.open_nursery() as nursery:
        client, _ = open_conn(nursery, ctx)
        burst = b"".join(request_frame(METADATA, correlation_id=i) for i in range(1, 6))
        await client.send(burst + b"\x00\x00\x00\x00")  # then a zero-length frame: bad
        for expected in range(1, 6):
            frame = await client.read_frame()
            assert frame is not None
            got, _ = parse_response(frame, MetadataResponse, header_version=1)
            assert got == expected
        assert await client.closed_by_server()
    assert "frame length 0" in caplog.text
