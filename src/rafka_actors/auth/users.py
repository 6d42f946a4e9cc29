"""The credentials file: who may connect, in which organisation, with which prefixes.

A JSON document (UTF-8), written only by `rafka-actors users` and read by the broker at start-up:

    {
      "version": 1,
      "users": {
        "alice": {
          "org_id": 1,
          "group_prefixes": ["team-a."],      # [] = every group id
          "topic_prefixes": [],               # [] = every topic
          "transactional_id_prefixes": [],    # optional; [] or absent = every id
          "scram": {
            "SCRAM-SHA-256": {"salt": "<base64>", "iterations": 8192,
                              "stored_key": "<base64>", "server_key": "<base64>"},
            "SCRAM-SHA-512": {...}
          }
        }
      }
    }

No password is ever stored, only the salted SCRAM credentials (RFC 5802), which PLAIN also
verifies against. A user may have no credential ("scram": {}): it keeps its org and prefixes but
cannot log in (AlterUserScramCredentials deleted its last one; an upsert gives it one again).
Loading is strict: unknown keys, wrong types, iteration counts outside Kafka's [4096, 16384] or
keys of the wrong length are errors naming the user and the field. Saving writes a temporary
file (mode 0600), fsyncs it, renames it over the old one and fsyncs the directory, so a crash
leaves either the old file or the new one.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..storage.fsutil import fsync_dir
from .plain import PlainLookup
from .scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    CredentialLookup,
    Mechanism,
    ScramCredential,
)

FORMAT_VERSION = 1
MAX_NAME_BYTES = 255
_USER_KEYS = {"org_id", "group_prefixes", "topic_prefixes", "scram"}
# Optional keys: files written before transactions were served lack them.
_OPTIONAL_USER_KEYS = {"transactional_id_prefixes"}
_CREDENTIAL_KEYS = {"salt", "iterations", "stored_key", "server_key"}


class UsersFileError(ValueError):
    """The credentials file can't be read or is invalid."""


@dataclass(frozen=True, slots=True)
class User:
    name: str
    org_id: int
    group_prefixes: tuple[str, ...] = ()
    topic_prefixes: tuple[str, ...] = ()
    credentials: Mapping[Mechanism, ScramCredential] = field(default_factory=dict, repr=False)
    # as Kafka's TRANSACTIONAL_ID ACLs: which transactional ids the user may use
    transactional_id_prefixes: tuple[str, ...] = ()

    def may_use_group(self, group_id: str) -> bool:
        return _allowed(self.group_prefixes, group_id)

    def may_use_topic(self, name: str) -> bool:
        return _allowed(self.topic_prefixes, name)

    def may_use_transactional_id(self, transactional_id: str) -> bool:
        return _allowed(self.transactional_id_prefixes, transactional_id)

    def plain_credential(self) -> tuple[Mechanism, ScramCredential] | None:
        """The credential PLAIN checks a password against (SHA-256 first: cheaper)."""
        for mechanism in Mechanism:
            if mechanism in self.credentials:
                return mechanism, self.credentials[mechanism]
        return None


def _allowed(prefixes: tuple[str, ...], name: str) -> bool:
    return not prefixes or any(name.startswith(prefix) for prefix in prefixes)


@dataclass(frozen=True, slots=True)
class UserStore:
    users: Mapping[str, User] = field(default_factory=dict)

    def get(self, name: str) -> User | None:
        return self.users.get(name)

    def with_user(self, user: User) -> UserStore:
        return UserStore({**self.users, user.name: user})

    def without(self, name: str) -> UserStore:
        return UserStore({k: v for k, v in self.users.items() if k != name})

    def scram_lookup(self, mechanism: Mechanism) -> CredentialLookup:
        def lookup(name: str) -> ScramCredential | None:
            user = self.users.get(name)
            return None if user is None else user.credentials.get(mechanism)

        return lookup

    def plain_lookup(self) -> PlainLookup:
        def lookup(name: str) -> tuple[Mechanism, ScramCredential] | None:
            user = self.users.get(name)
            return None if user is None else user.plain_credential()

        return lookup

    @classmethod
    def load(cls, path: Path) -> UserStore:
        try:
            document = json.loads(path.read_bytes())
        except OSError as exc:
            raise UsersFileError(f"{path}: {exc.strerror or exc}") from exc
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UsersFileError(f"{path}: not valid JSON: {exc}") from exc
        except RecursionError:  # found by fuzzing: JSON nested deeper than Python's stack
            raise UsersFileError(f"{path}: JSON nested too deeply") from None
        try:
            return cls.from_json(document)
        except UsersFileError as exc:
            raise UsersFileError(f"{path}: {exc}") from None

    @classmethod
    def load_or_empty(cls, path: Path) -> UserStore:
        return cls.load(path) if path.exists() else cls()

    @classmethod
    def from_json(cls, document: Any) -> UserStore:
        if not isinstance(document, dict) or set(document) != {"version", "users"}:
            raise UsersFileError('want an object with exactly "version" and "users"')
        if document["version"] != FORMAT_VERSION:
            raise UsersFileError(f"unsupported version {document['version']!r}")
        if not isinstance(document["users"], dict):
            raise UsersFileError('"users" must be an object')
        return cls({name: _user_from_json(name, v) for name, v in document["users"].items()})

    def to_json(self) -> dict[str, Any]:
        users = {name: _user_to_json(self.users[name]) for name in sorted(self.users)}
        return {"version": FORMAT_VERSION, "users": users}

    def save(self, path: Path) -> None:
        data = (json.dumps(self.to_json(), indent=2) + "\n").encode()
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)


def check_name(name: str) -> None:
    try:
        encoded = name.encode()
    except UnicodeEncodeError:  # found by fuzzing: a lone surrogate is not UTF-8
        raise UsersFileError(f"user name {name!r} is not valid UTF-8") from None
    if not name or len(encoded) > MAX_NAME_BYTES:
        raise UsersFileError(f"user name must be 1..{MAX_NAME_BYTES} bytes")
    if not name.isprintable():
        raise UsersFileError(f"user name {name!r} has control characters")


def check_prefixes(what: str, prefixes: Any) -> tuple[str, ...]:
    if not isinstance(prefixes, list | tuple) or not all(
        isinstance(p, str) and p for p in prefixes
    ):
        raise UsersFileError(f"{what} must be a list of non-empty strings ([] = all)")
    return tuple(prefixes)


def _user_from_json(name: str, entry: Any) -> User:
    try:
        check_name(name)
        if not isinstance(entry, dict) or not _USER_KEYS <= set(entry) <= (
            _USER_KEYS | _OPTIONAL_USER_KEYS
        ):
            raise UsersFileError(
                f"want the keys {sorted(_USER_KEYS)}, optionally {sorted(_OPTIONAL_USER_KEYS)}"
            )
        org_id = entry["org_id"]
        if type(org_id) is not int or not 0 <= org_id < 2**63:
            raise UsersFileError("org_id must be an integer >= 0")
        scram = entry["scram"]
        if not isinstance(scram, dict):
            raise UsersFileError("scram must be an object")
        credentials = {_mechanism(k): _credential_from_json(k, v) for k, v in scram.items()}
        return User(
            name=name,
            org_id=org_id,
            group_prefixes=check_prefixes("group_prefixes", entry["group_prefixes"]),
            topic_prefixes=check_prefixes("topic_prefixes", entry["topic_prefixes"]),
            credentials=credentials,
            transactional_id_prefixes=check_prefixes(
                "transactional_id_prefixes", entry.get("transactional_id_prefixes", [])
            ),
        )
    except UsersFileError as exc:
        raise UsersFileError(f"user {name!r}: {exc}") from None


def _mechanism(name: str) -> Mechanism:
    try:
        return Mechanism(name)
    except ValueError:
        known = ", ".join(m.value for m in Mechanism)
        raise UsersFileError(f"unknown mechanism {name!r} (known: {known})") from None


def _credential_from_json(mechanism_name: str, entry: Any) -> ScramCredential:
    mechanism = Mechanism(mechanism_name)
    if not isinstance(entry, dict) or set(entry) != _CREDENTIAL_KEYS:
        raise UsersFileError(f"{mechanism_name}: want exactly the keys {sorted(_CREDENTIAL_KEYS)}")
    iterations = entry["iterations"]
    if type(iterations) is not int or not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UsersFileError(
            f"{mechanism_name}: iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]"
        )
    salt = _b64(mechanism_name, "salt", entry["salt"])
    if not salt:
        raise UsersFileError(f"{mechanism_name}: empty salt")
    keys = [_b64(mechanism_name, k, entry[k]) for k in ("stored_key", "server_key")]
    if any(len(key) != mechanism.digest_size for key in keys):
        raise UsersFileError(f"{mechanism_name}: keys must be {mechanism.digest_size} bytes")
    return ScramCredential(salt, keys[0], keys[1], iterations)


def _b64(mechanism_name: str, key: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise UsersFileError(f"{mechanism_name}: {key} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):  # ValueError: non-ASCII text (found by fuzzing)
        raise UsersFileError(f"{mechanism_name}: {key} is not valid base64") from None


def _user_to_json(user: User) -> dict[str, Any]:
    def encode(c: ScramCredential) -> dict[str, Any]:
        return {
            "salt": base64.b64encode(c.salt).decode(),
            "iterations": c.iterations,
            "stored_key": base64.b64encode(c.stored_key).decode(),
            "server_key": base64.b64encode(c.server_key).decode(),
        }

    return {
        "org_id": user.org_id,
        "group_prefixes": list(user.group_prefixes),
        "topic_prefixes": list(user.topic_prefixes),
        "transactional_id_prefixes": list(user.transactional_id_prefixes),
        "scram": {m.value: encode(user.credentials[m]) for m in Mechanism if m in user.credentials},
    }
