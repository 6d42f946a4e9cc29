"""SASL PLAIN (RFC 4616), checked against the stored SCRAM credential.

The client sends `authzid NUL authcid NUL passwd` (UTF-8). The authzid must be empty or equal
the authcid (no acting as someone else). No plaintext password is ever stored: the password is
salted and hashed with the stored credential's salt and iteration count, and the StoredKey and
ServerKey it yields are compared with the stored ones in constant time. An unknown user costs the
same PBKDF2 work as a known one.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from dataclasses import dataclass, field

from .scram import (
    DEFAULT_ITERATIONS,
    AuthFailure,
    FailureKind,
    Mechanism,
    ScramCredential,
    credential_from_salted,
    salted_password,
    unknown_user,
)

MAX_FIELD_BYTES = 255  # RFC 4616's bound for authzid and authcid
MAX_MESSAGE_BYTES = 4096

# (mechanism, credential) to verify a PLAIN password against, or None for an unknown user.
PlainLookup = Callable[[str], tuple[Mechanism, ScramCredential] | None]

_DUMMY_SALT = b"\0" * 32


@dataclass(frozen=True, slots=True)
class PlainMessage:
    authzid: str
    authcid: str
    password: str = field(repr=False)


def parse_plain(message: bytes) -> PlainMessage | AuthFailure:
    if len(message) > MAX_MESSAGE_BYTES:
        return AuthFailure(FailureKind.MALFORMED, "PLAIN message too long")
    parts = message.split(b"\0")
    if len(parts) != 3:
        return AuthFailure(FailureKind.MALFORMED, "PLAIN wants authzid NUL authcid NUL passwd")
    authz, authc, passwd = parts
    if not authc or not passwd:
        return AuthFailure(FailureKind.MALFORMED, "empty PLAIN user or password")
    if len(authz) > MAX_FIELD_BYTES or len(authc) > MAX_FIELD_BYTES:
        return AuthFailure(FailureKind.MALFORMED, "PLAIN identity too long")
    try:
        authzid, authcid, password = authz.decode(), authc.decode(), passwd.decode()
    except UnicodeDecodeError:
        return AuthFailure(FailureKind.MALFORMED, "PLAIN message is not UTF-8")
    if authzid and authzid != authcid:
        return AuthFailure(FailureKind.UNSUPPORTED, "authzid differs from the user")
    return PlainMessage(authzid, authcid, password)


def verify_password(mechanism: Mechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` hashes to `credential` (constant-time comparison)."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    candidate = credential_from_salted(mechanism, salted, credential.salt, credential.iterations)
    stored_ok = hmac.compare_digest(candidate.stored_key, credential.stored_key)
    server_ok = hmac.compare_digest(candidate.server_key, credential.server_key)
    return stored_ok & server_ok


def authenticate_plain(message: bytes, lookup: PlainLookup) -> str | AuthFailure:
    """The authenticated user name, or why not."""
    parsed = parse_plain(message)
    if isinstance(parsed, AuthFailure):
        return parsed
    found = lookup(parsed.authcid)
    if found is None:
        # Same work as a real check, so timing doesn't tell whether the user exists.
        mechanism = Mechanism.SCRAM_SHA_256
        salted_password(mechanism, parsed.password, _DUMMY_SALT, DEFAULT_ITERATIONS)
        return AuthFailure(
            FailureKind.INVALID_CREDENTIALS, f"bad password for {unknown_user(parsed.authcid)}"
        )
    mechanism, credential = found
    if not verify_password(mechanism, credential, parsed.password):
        return AuthFailure(FailureKind.INVALID_CREDENTIALS, f"bad password for {parsed.authcid!r}")
    return parsed.authcid
