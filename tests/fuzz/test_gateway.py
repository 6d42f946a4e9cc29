"""Fuzzing the gateway: hostile frames over a real `serve_connection` loop (trio memory
streams, a GroupRegistry on a MemoryCoordinatorLog, trio's autojumping MockClock, as in
tests/gateway). Each example sends a few frames (mutated requests of every served api, noise,
forged size prefixes) on one connection; the server must answer with well-framed responses or
close that connection, log no internal error, and a well-formed ApiVersions and Metadata on a
NEW connection must still be answered.

The hostile connection is one of three kinds: unauthenticated on a plain listener (org 0),
not yet authenticated on a SASL listener (the pre-auth gate and the SASL exchange), or
authenticated as a user of org 1 restricted to the group prefix `g` and the topic prefix `t`
(the authorization paths).
"""

from __future__ import annotations

import logging
import struct
import tempfile
import uuid
from pathlib import Path
from typing import Any

import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.api_versions.v3.response import ApiVersionsResponse
from kio.schema.metadata.v12.request import MetadataRequest
from kio.schema.metadata.v12.response import MetadataResponse

from rafka_actors.actors.group_registry import GroupRegistry
from rafka_actors.actors.txn_markers import MarkerWriter
from rafka_actors.actors.txn_registry import TransactionRegistry
from rafka_actors.auth.scram import Mechanism, derive_credential
from rafka_actors.auth.users import User, UserStore
from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import serve_connection
from rafka_actors.gateway.context import PRE_AUTH_APIS, BrokerContext, ConnectionInfo, SaslSetup
from rafka_actors.group_common.effects import GroupConfig
from rafka_actors.storage.coordinator_log import MemoryCoordinatorLog
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.transaction.state import TxnConfig

from ..wire import parse_response, request_frame
from .budget import COUNTS, fuzz_settings
from .frames import any_frame, valid_frame

MAX_BYTES = 1 << 16


class ErrorLog(logging.Handler):
    """Collects ERROR records of the broker: an internal error is a finding."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _prefixed(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


@st.composite
def wire_input(draw: st.DrawFn) -> bytes:
    """What one hostile client writes: frames, some valid, maybe a forged size prefix."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 4)) == 0:
            parts.append(_prefixed(draw(valid_frame())[2]))
        else:
            parts.append(_prefixed(draw(any_frame())))
    if draw(st.booleans()):
        forged = draw(st.sampled_from([-1, 0, MAX_BYTES + 1, 2**31 - 1, 50]))
        parts.append(struct.pack(">i", forged) + draw(st.binary(max_size=20)))
    return b"".join(parts)


async def _read_all(stream: Any) -> bytes:
    data = b""
    while chunk := await stream.receive_some():
        data += chunk
    return data


def _frames(data: bytes) -> list[bytes]:
    frames, at = [], 0
    while at < len(data):
        assert at + 4 <= len(data), "response with a torn size prefix"
        (length,) = struct.unpack_from(">i", data, at)
        assert 4 <= length <= len(data) - at - 4, f"bad response size {length}"
        frames.append(data[at + 4 : at + 4 + length])
        at += 4 + length
    return frames


CREDENTIALS = {m: derive_credential(m, "pw", iterations=4096) for m in Mechanism}
RESTRICTED = User("fuzzer", 1, ("g",), ("t",), CREDENTIALS)
KINDS = ("plaintext", "sasl-before-auth", "restricted-user")


def _hostile_conn(ctx: BrokerContext, kind: str) -> ConnectionInfo:
    conn = ConnectionInfo("fuzz", 1)
    if kind == "sasl-before-auth":
        conn.sasl, conn.gate = ctx.new_sasl_session(), PRE_AUTH_APIS
    elif kind == "restricted-user":
        conn.user, conn.org_id = RESTRICTED, RESTRICTED.org_id
    return conn


async def _session(ctx: BrokerContext, payload: bytes, kind: str) -> None:
    client, server = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        conn = _hostile_conn(ctx, kind)
        nursery.start_soon(serve_connection, server, ctx, API_TABLE, conn)
        await client.send_all(payload)
        await client.send_eof()
        with trio.fail_after(3600):  # mock time: the idle timeout closes a stalled connection
            replies = _frames(await _read_all(client))
        COUNTS["gateway: responses to hostile frames"] += len(replies)
        await client.aclose()


async def _still_serving(ctx: BrokerContext) -> None:
    client, server = trio.testing.memory_stream_pair()
    api_versions = ApiVersionsRequest(client_software_name="fuzz", client_software_version="1")
    metadata = MetadataRequest(
        topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(serve_connection, server, ctx, API_TABLE, ConnectionInfo("ok", 2))
        await client.send_all(request_frame(api_versions, 1) + request_frame(metadata, 2))
        await client.send_eof()
        with trio.fail_after(60):
            replies = _frames(await _read_all(client))
        assert len(replies) == 2
        assert parse_response(replies[0], ApiVersionsResponse, 0)[0] == 1
        assert parse_response(replies[1], MetadataResponse, 1)[0] == 2
        await client.aclose()


def _run(data: DataPlane, root: Path, payload: bytes, kind: str = "plaintext") -> None:
    async def main() -> None:
        config = BrokerConfig(data_dir=root, socket_request_max_bytes=MAX_BYTES)
        sasl = SaslSetup(
            ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
            UserStore({RESTRICTED.name: RESTRICTED}),
            b"k" * 32,
            trio.CapacityLimiter(1),
        )
        async with trio.open_nursery() as nursery:
            registry = GroupRegistry(
                nursery, GroupConfig(initial_rebalance_delay_ms=0), MemoryCoordinatorLog()
            )
            transactions = TransactionRegistry(  # as the broker has (broker.py)
                nursery,
                TxnConfig(max_timeout_ms=config.transaction_max_timeout_ms),
                MemoryCoordinatorLog(),
                MarkerWriter(data, registry.ask),
                data.producer_ids.allocate,
            )
            ctx = BrokerContext(
                config,
                data,
                "127.0.0.1",
                9092,
                API_TABLE,
                groups=registry,
                sasl=sasl,
                transactions=transactions,
            )
            await _session(ctx, payload, kind)
            await _still_serving(ctx)
            nursery.cancel_scope.cancel()

    # Not 0: hashing a password and the users file run in worker threads, which the clock cannot
    # see; at 0 it jumped to the 3600 s deadline while a thread worked on a busy machine.
    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0.05))


ROOT = Path(tempfile.mkdtemp(prefix="rafka-fuzz-gateway-"))
DATA = DataPlane.open(ROOT, segment_bytes=1 << 20)
DATA.create_topic("t", 2)


@fuzz_settings(150, deadline_ms=None)
@given(wire_input(), st.sampled_from(KINDS))
def test_hostile_connection_is_answered_or_closed_and_broker_serves_on(
    payload: bytes, kind: str
) -> None:
    errors = ErrorLog()
    logger = logging.getLogger("rafka_actors")
    logger.addHandler(errors)
    try:
        COUNTS["gateway: connections"] += 1
        COUNTS[f"gateway: connections {kind}"] += 1
        COUNTS["gateway: bytes sent"] += len(payload)
        _run(DATA, ROOT, payload, kind)
    finally:
        logger.removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]


# Found by this fuzzer: a null top-level array (compact length 0) reached the OffsetFetch and
# ListOffsets handlers as None. The frame guard now refuses null non-nullable arrays.
def test_offset_fetch_v8_with_null_groups_is_not_an_internal_error() -> None:
    payload = (
        b"\x00\x00\x00\x12\x00\t\x00\x08\x00\x00\x00\x00\xff\xff\x00\x00\x00\x00\x00\x00\x01\x00"
    )
    errors = ErrorLog()
    logger = logging.getLogger("rafka_actors")
    logger.addHandler(errors)
    try:
        _run(DATA, ROOT, payload)
    finally:
        logger.removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]


def test_metadata_v11_with_a_null_topic_name_is_answered() -> None:
    """Found by this fuzzer: a Metadata v10/v11 topic with a null name and a null id got a
    response topic with a null name, which v10/v11 can't encode (an internal error)."""
    from kio.schema.metadata.v11.request import MetadataRequest, MetadataRequestTopic

    from rafka_actors.protocol.codec import encode_request

    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=uuid.UUID(int=0), name=None),),
        allow_auto_topic_creation=False,
        include_topic_authorized_operations=False,
    )
    payload = encode_request(request, correlation_id=7, client_id="fuzz")
    errors = ErrorLog()
    logger = logging.getLogger("rafka_actors")
    logger.addHandler(errors)
    try:
        _run(DATA, ROOT, payload)
    finally:
        logger.removeHandler(errors)
    assert not errors.records, [r.getMessage() for r in errors.records]
