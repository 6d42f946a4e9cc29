"""The client side of SASL PLAIN and SCRAM, for our own tools (`rafka-actors groups`).

`client_exchange(mechanism, user, password)` returns an object whose `first()` is the first
SaslAuthenticate token and whose `next(server_bytes)` gives the next token (None when the
exchange is complete), raising `ClientAuthError` if the server's answer is not what a genuine
server holding the user's credential would send (a wrong server signature, a nonce that does
not extend ours).
"""

from __future__ import annotations

import base64
import hmac
import secrets

from .scram import Mechanism, credential_from_salted, escape_saslname, salted_password


class ClientAuthError(Exception):
    """The server's side of the exchange is wrong."""


class PlainClient:
    def __init__(self, user: str, password: str) -> None:
        self._token = f"\0{user}\0{password}".encode()

    def first(self) -> bytes:
        return self._token

    def next(self, server: bytes) -> bytes | None:
        return None


class ScramClient:
    def __init__(self, mechanism: Mechanism, user: str, password: str) -> None:
        self.mechanism = mechanism
        self._password = password
        self._nonce = secrets.token_urlsafe(18)
        self._bare = f"n={escape_saslname(user)},r={self._nonce}"
        self._server_signature: bytes | None = None

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def next(self, server: bytes) -> bytes | None:
        if self._server_signature is None:
            return self._final(server.decode())
        if not server.startswith(b"v=") or not hmac.compare_digest(
            base64.b64decode(server[2:]), self._server_signature
        ):
            raise ClientAuthError("the server's SCRAM signature is wrong")
        return None

    def _final(self, server_first: str) -> bytes:
        fields = dict(item.split("=", 1) for item in server_first.split(",") if "=" in item)
        nonce, salt, iterations = fields.get("r", ""), fields.get("s", ""), fields.get("i", "")
        if not nonce.startswith(self._nonce) or not salt or not iterations.isdigit():
            raise ClientAuthError(f"unexpected SCRAM server-first {server_first!r}")
        raw_salt = base64.b64decode(salt)
        salted = salted_password(self.mechanism, self._password, raw_salt, int(iterations))
        credential = credential_from_salted(self.mechanism, salted, raw_salt, int(iterations))
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self._bare},{server_first},{without_proof}".encode()
        client_key = self.mechanism.hmac(salted, b"Client Key")
        signature = self.mechanism.hmac(credential.stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()


def client_exchange(mechanism: str, user: str, password: str) -> PlainClient | ScramClient:
    if mechanism == "PLAIN":
        return PlainClient(user, password)
    return ScramClient(Mechanism(mechanism), user, password)
