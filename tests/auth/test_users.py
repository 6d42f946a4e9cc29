"""The credentials file: round trip, strict validation, atomic save, prefix rules."""

from __future__ import annotations

import copy
import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient

from rafka_actors.auth.scram import AuthFailure, Mechanism, ScramExchange, derive_credential
from rafka_actors.auth.session import SaslSession
from rafka_actors.auth.users import User, UsersFileError, UserStore


def sample_store() -> UserStore:
    return UserStore(
        {
            "alice": User(
                "alice",
                1,
                group_prefixes=("team-a.",),
                topic_prefixes=("a.", "shared."),
                credentials={m: derive_credential(m, "pw", iterations=4096) for m in Mechanism},
            ),
            "bob": User(
                "bob",
                2,
                credentials={
                    Mechanism.SCRAM_SHA_256: derive_credential(
                        Mechanism.SCRAM_SHA_256, "pw2", iterations=4096
                    )
                },
            ),
        }
    )


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    store = sample_store()
    store.save(path)
    assert UserStore.load(path) == store
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert not (tmp_path / "users.json.tmp").exists()
    text = path.read_text()
    assert '"pw"' not in text and "password" not in text


def test_loaded_credentials_authenticate(tmp_path: Path) -> None:
    path = tmp_path / "users.json"
    sample_store().save(path)
    store = UserStore.load(path)
    client = ScramClient("alice", "pw", "SCRAM-SHA-512")
    server = ScramExchange(
        Mechanism.SCRAM_SHA_512,
        store.scram_lookup(Mechanism.SCRAM_SHA_512),
        server_nonce="n0nce",
        fake_salt_key=b"k",
    )
    first = server.start(client.first_message())
    assert isinstance(first, bytes)
    client.process_server_first_message(first)
    assert isinstance(server.finish(client.final_message()), bytes)
    assert store.scram_lookup(Mechanism.SCRAM_SHA_512)("bob") is None


def test_a_user_without_credentials_loads_but_cannot_log_in(tmp_path: Path) -> None:
    # AlterUserScramCredentials may delete a user's last credential: the user keeps its org
    # and prefixes (an upsert gives it a credential again), and no mechanism lets it in.
    doc = valid_document()
    doc["users"]["alice"]["scram"] = {}
    path = tmp_path / "users.json"
    path.write_text(json.dumps(doc))
    store = UserStore.load(path)
    alice = store.users["alice"]
    assert alice.credentials == {} and alice.org_id == 1 and alice.group_prefixes == ("team-a.",)
    assert store.plain_lookup()("alice") is None
    for mechanism in Mechanism:
        assert store.scram_lookup(mechanism)("alice") is None
    session = SaslSession(("PLAIN",), store, fake_salt_key=b"k" * 32)
    assert session.handshake("PLAIN")
    assert isinstance(session.step(b"\0alice\0pw"), AuthFailure)
    store.save(path)
    assert UserStore.load(path) == store


def test_save_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "users.json"
    sample_store().save(path)
    before = path.read_bytes()

    def boom(*args: Any) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        sample_store().without("bob").save(path)
    assert path.read_bytes() == before


def test_prefix_rules() -> None:
    alice = sample_store().users["alice"]
    assert alice.may_use_group("team-a.payments")
    assert not alice.may_use_group("team-b.x")
    assert not alice.may_use_group("team-a")
    assert alice.may_use_topic("shared.events") and alice.may_use_topic("a.x")
    assert not alice.may_use_topic("b.x")
    bob = sample_store().users["bob"]
    assert bob.may_use_group("anything") and bob.may_use_topic("anything")


def valid_document() -> dict[str, Any]:
    return sample_store().to_json()


def mutate(doc: dict[str, Any], change: str) -> None:
    alice = doc["users"]["alice"]
    sha = alice["scram"]["SCRAM-SHA-256"]
    match change:
        case "version":
            doc["version"] = 2
        case "extra-top":
            doc["extra"] = 1
        case "users-list":
            doc["users"] = []
        case "org-negative":
            alice["org_id"] = -1
        case "org-bool":
            alice["org_id"] = True
        case "org-string":
            alice["org_id"] = "1"
        case "missing-key":
            del alice["topic_prefixes"]
        case "password-key":
            alice["password"] = "pw"
        case "prefix-empty-string":
            alice["group_prefixes"] = [""]
        case "prefix-not-list":
            alice["group_prefixes"] = "team-a."
        case "scram-list":
            alice["scram"] = []
        case "bad-mechanism":
            alice["scram"]["SCRAM-SHA-1"] = sha
        case "few-iterations":
            sha["iterations"] = 4095
        case "many-iterations":
            sha["iterations"] = 16385
        case "bad-base64":
            sha["salt"] = "not base64!"
        case "short-key":
            sha["stored_key"] = "AAAA"
        case "empty-name":
            doc["users"][""] = doc["users"].pop("alice")


CHANGES = [
    "version",
    "extra-top",
    "users-list",
    "org-negative",
    "org-bool",
    "org-string",
    "missing-key",
    "password-key",
    "prefix-empty-string",
    "prefix-not-list",
    "scram-list",
    "bad-mechanism",
    "few-iterations",
    "many-iterations",
    "bad-base64",
    "short-key",
    "empty-name",
]


@pytest.mark.parametrize("change", CHANGES)
def test_validation_errors(tmp_path: Path, change: str) -> None:
    doc = copy.deepcopy(valid_document())
    mutate(doc, change)
    path = tmp_path / "users.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(UsersFileError) as info:
        UserStore.load(path)
    assert str(path) in str(info.value)
    if change not in ("version", "extra-top", "users-list", "empty-name"):
        assert "'alice'" in str(info.value)


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(UsersFileError, match="No such file"):
        UserStore.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(UsersFileError, match="not valid JSON"):
        UserStore.load(bad)
    assert UserStore.load_or_empty(tmp_path / "missing.json") == UserStore()
