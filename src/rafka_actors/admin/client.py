"""A small synchronous Kafka client for the operator's tools: one blocking TCP socket, our codec.

The tools send a handful of requests and print the answers, so there is nothing to gain from
an event loop: `KafkaClient.call(request)` writes one frame and reads one frame back. Requests
are kio dataclasses of a fixed version each; `encode_request` frames them (size prefix, request
header v1 or v2) and `decode_response` reads the answer, whose header version follows from the
request's api key and version. Correlation ids count up from 1 and every answer is checked
against the request it belongs to.

`call_tagged` also sends tagged fields in the request header and returns those of the response
header (KIP-482): how the tools ask this broker for group identities (`cgp_` id and RRL,
protocol/group_identity.py), which Kafka's responses have no field for.

On connecting the client asks ApiVersions (v3) which versions the broker serves; a call with a
version outside the broker's range fails before anything is sent, with a message naming the
API and the range, instead of the broker closing the connection on us.

`--bootstrap` may list several `HOST:PORT` addresses (comma separated, as Kafka's tools take
them; `[::1]:9092` for IPv6): the first that accepts a connection is used. This broker is the
coordinator of every group and leader of every partition, so the tools never look for other
brokers.

Failures form one small hierarchy: `ConnectionFailed` (nothing listening, the connection lost,
no answer in time, an answer we cannot read: exit status 2) and `BrokerError` (the broker
answered with a Kafka error code: exit status 1), both `AdminError`s, chained with `from`.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from typing import Any

from kio.schema.api_versions.v3 import request as api_versions_v3
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.sasl_authenticate.v2 import request as sasl_authenticate_v2
from kio.schema.sasl_handshake.v1 import request as sasl_handshake_v1

from ..auth.client import ClientAuthError, client_exchange
from ..protocol.codec import decode_tagged_response, encode_request
from ..protocol.errors import ProtocolError
from .security import ClientSecurity

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_ID = "rafka-actors-admin"
_SIZE = struct.Struct(">i")
_MAX_FRAME = 1 << 30


class AdminError(Exception):
    """Base of everything the operator's tools report instead of a traceback."""

    exit_status = 1


class ConnectionFailed(AdminError):
    """The broker could not be reached or stopped answering."""

    exit_status = 2


class BrokerError(AdminError):
    """The broker answered with an error code; `code.name` is Kafka's name for it."""

    def __init__(self, code: int, what: str, hint: str = "") -> None:
        self.code = ErrorCode(code)
        self.what = what
        self.hint = hint
        super().__init__(f"{what}: {error_name(code)}" + (f" ({hint})" if hint else ""))


class UnsupportedByBroker(AdminError):
    """The broker does not serve the API version a tool needs."""


def error_name(code: int) -> str:
    """Kafka's name of an error code, e.g. 69 -> GROUP_ID_NOT_FOUND."""
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"UNKNOWN_ERROR_CODE_{code}"


def api_name(api_key: int) -> str:
    """Kafka's name of an API, e.g. 16 -> ListGroups."""
    snake = api_key_map.get(api_key, f"api_{api_key}")
    return "".join(part.title() for part in snake.split("_"))


def parse_addresses(bootstrap: str) -> list[tuple[str, int]]:
    """`host:port[,host:port...]` -> [(host, port)]; ValueError on malformed input."""
    addresses = []
    for item in filter(None, (s.strip() for s in bootstrap.split(","))):
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"expected HOST:PORT, got {item!r}")
        addresses.append((host.strip("[]"), int(port)))
    if not addresses:
        raise ValueError("no address given")
    return addresses


class KafkaClient:
    """One connection to a broker. Use as a context manager; `call` sends a request."""

    def __init__(
        self,
        bootstrap: str = DEFAULT_BOOTSTRAP,
        timeout: float = 30.0,
        security: ClientSecurity | None = None,
    ) -> None:
        self.bootstrap = bootstrap
        self.timeout = timeout
        self.security = security or ClientSecurity()
        self.versions: dict[int, tuple[int, int]] = {}
        self._sock: socket.socket | None = None
        self._address = ""
        self._correlation = 0

    def __enter__(self) -> KafkaClient:
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> None:
        """Open the first reachable address, then learn the broker's API versions."""
        try:
            addresses = parse_addresses(self.bootstrap)
        except ValueError as exc:
            raise ConnectionFailed(f"bad --bootstrap {self.bootstrap!r}: {exc}") from exc
        failures = []
        for host, port in addresses:
            try:
                self._sock = self._open(host, port)
                self._address = f"{host}:{port}"
                break
            except OSError as exc:
                failures.append(f"{host}:{port}: {exc.strerror or exc}")
        else:
            raise ConnectionFailed("cannot connect to the broker at " + "; ".join(failures))
        self._learn_versions()
        if self.security.sasl:
            self._authenticate()

    def _open(self, host: str, port: int) -> socket.socket:
        sock = socket.create_connection((host, port), timeout=self.timeout)
        tls = self.security.tls_context()
        if tls is None:
            return sock
        try:
            return tls.wrap_socket(sock, server_hostname=host)
        except OSError:
            sock.close()
            raise

    def _authenticate(self) -> None:
        """SaslHandshake, then SaslAuthenticate until the exchange completes."""
        mechanism = self.security.mechanism
        shake = self._exchange(sasl_handshake_v1.SaslHandshakeRequest(mechanism=mechanism))
        if shake.error_code != ErrorCode.none:
            offered = ", ".join(shake.mechanisms) or "none"
            raise BrokerError(shake.error_code, f"SASL {mechanism}", f"the broker offers {offered}")
        exchange = client_exchange(mechanism, self.security.username, self.security.password)
        token: bytes | None = exchange.first()
        try:
            while token is not None:
                request = sasl_authenticate_v2.SaslAuthenticateRequest(auth_bytes=token)
                answer = self._exchange(request)
                if answer.error_code != ErrorCode.none:
                    raise BrokerError(
                        answer.error_code, "SASL authentication", answer.error_message or ""
                    )
                token = exchange.next(answer.auth_bytes)
        except ClientAuthError as exc:
            raise ConnectionFailed(f"{self._address}: {exc}") from exc

    def _learn_versions(self) -> None:
        request = api_versions_v3.ApiVersionsRequest(
            client_software_name=CLIENT_ID, client_software_version="1"
        )
        response = self._exchange(request)
        if response.error_code != ErrorCode.none:
            raise BrokerError(response.error_code, "ApiVersions")
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    def supports(self, api_key: int, version: int) -> bool:
        low, high = self.versions.get(api_key, (0, -1))
        return low <= version <= high

    def call(self, request: object) -> Any:
        """Send `request` (a kio request entity) and return the broker's response entity."""
        return self.call_tagged(request)[0]

    def call_tagged(
        self, request: object, tags: Mapping[int, bytes] | None = None
    ) -> tuple[Any, dict[int, bytes]]:
        """`call`, with `tags` in the request header; also returns the response header's."""
        cls: Any = type(request)
        key, version = cls.__api_key__, cls.__version__
        if not self.supports(key, version):
            served = self.versions.get(key)
            range_ = f"it serves v{served[0]}-v{served[1]}" if served else "it does not serve it"
            raise UnsupportedByBroker(
                f"the broker at {self._address} cannot answer {api_name(key)} v{version} ({range_})"
            )
        return self._exchange_tagged(request, tags)

    def _exchange(self, request: Any) -> Any:
        return self._exchange_tagged(request, None)[0]

    def _exchange_tagged(
        self, request: Any, tags: Mapping[int, bytes] | None
    ) -> tuple[Any, dict[int, bytes]]:
        cls: Any = type(request)
        self._correlation += 1
        frame = encode_request(request, self._correlation, CLIENT_ID, tags)
        try:
            self._socket().sendall(frame)
            answer = self._read_frame()
            correlation, response, header_tags = decode_tagged_response(
                cls.__api_key__, cls.__version__, answer
            )
        except TimeoutError as exc:
            raise ConnectionFailed(
                f"no answer from {self._address} within {self.timeout:g}s"
            ) from exc
        except OSError as exc:
            raise ConnectionFailed(f"connection to {self._address} lost: {exc}") from exc
        except ProtocolError as exc:
            raise ConnectionFailed(f"cannot read the answer of {self._address}: {exc}") from exc
        if correlation != self._correlation:
            raise ConnectionFailed(
                f"{self._address} answered request {correlation}, expected {self._correlation}"
            )
        return response, header_tags

    def _socket(self) -> socket.socket:
        if self._sock is None:
            raise ConnectionFailed("not connected")
        return self._sock

    def _read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exactly(_SIZE.size))
        if not 0 <= size <= _MAX_FRAME:
            raise ConnectionFailed(f"{self._address} sent a frame of {size} bytes")
        return self._read_exactly(size)

    def _read_exactly(self, n: int) -> bytes:
        sock, chunks, left = self._socket(), [], n
        while left:
            chunk = sock.recv(min(left, 1 << 20))
            if not chunk:
                raise ConnectionFailed(f"{self._address} closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
