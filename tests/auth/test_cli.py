"""`rafka-actors users add | list | remove`, in-process."""

from __future__ import annotations

import base64
import io
import json
import os
from pathlib import Path

import pytest

from rafka_actors.auth.plain import authenticate_plain
from rafka_actors.auth.scram import Mechanism
from rafka_actors.auth.users import UserStore
from rafka_actors.cli import main


def add(
    path: Path, name: str, *extra: str, password: str = "secret\n", monkeypatch: pytest.MonkeyPatch
) -> int:
    monkeypatch.setattr("sys.stdin", io.StringIO(password))
    return main(["users", "add", name, "--file", str(path), *extra])


def test_add_list_remove(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "users.json"
    assert (
        add(
            path,
            "alice",
            "--org",
            "1",
            "--group-prefix",
            "team-a.",
            "--topic-prefix",
            "a.",
            "--iterations",
            "4096",
            monkeypatch=monkeypatch,
        )
        == 0
    )
    assert (
        add(
            path,
            "bob",
            "--org",
            "2",
            "--mechanism",
            "SCRAM-SHA-512",
            "--iterations",
            "4096",
            monkeypatch=monkeypatch,
        )
        == 0
    )
    assert "added user bob (org 2)" in capsys.readouterr().out

    store = UserStore.load(path)
    alice = store.users["alice"]
    assert alice.org_id == 1 and alice.group_prefixes == ("team-a.",)
    assert set(alice.credentials) == set(Mechanism)
    assert set(store.users["bob"].credentials) == {Mechanism.SCRAM_SHA_512}
    assert authenticate_plain(b"\0alice\0secret", store.plain_lookup()) == "alice"
    assert "secret" not in path.read_text()

    assert main(["users", "list", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["USER", "ORG", "MECHANISMS", "GROUP-PREFIXES", "TOPIC-PREFIXES"]
    assert lines[1].split() == ["alice", "1", "SCRAM-SHA-256,SCRAM-SHA-512", "team-a.", "a."]
    assert lines[2].split() == ["bob", "2", "SCRAM-SHA-512", "*", "*"]
    salt = alice.credentials[Mechanism.SCRAM_SHA_256].salt
    assert base64.b64encode(salt).decode() not in out

    assert main(["users", "remove", "alice", "--file", str(path)]) == 0
    assert set(UserStore.load(path).users) == {"bob"}
    assert main(["users", "remove", "alice", "--file", str(path)]) == 1
    assert "no user 'alice'" in capsys.readouterr().err


def test_add_replaces_and_password_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "users.json"
    assert add(path, "alice", "--org", "1", "--iterations", "4096", monkeypatch=monkeypatch) == 0
    assert (
        main(
            [
                "users",
                "add",
                "alice",
                "--org",
                "3",
                "--password",
                "new",
                "--iterations",
                "4096",
                "--file",
                str(path),
            ]
        )
        == 0
    )
    assert "updated user alice (org 3)" in capsys.readouterr().out
    store = UserStore.load(path)
    assert store.users["alice"].org_id == 3
    assert authenticate_plain(b"\0alice\0new", store.plain_lookup()) == "alice"


@pytest.mark.parametrize(
    ("extra", "password", "message"),
    [
        ((), "\n", "empty password"),
        ((), "", "empty password"),
        (("--iterations", "1000"), "pw\n", "--iterations"),
        (("--group-prefix", ""), "pw\n", "--group-prefix"),
    ],
)
def test_add_refuses(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    extra: tuple[str, ...],
    password: str,
    message: str,
) -> None:
    path = tmp_path / "users.json"
    assert add(path, "alice", "--org", "1", *extra, password=password, monkeypatch=monkeypatch) == 2
    assert message in capsys.readouterr().err
    assert not path.exists()


def test_prompt_without_echo(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    answers = iter(["pw", "pw"])
    monkeypatch.setattr("sys.stdin", Tty())
    monkeypatch.setattr("getpass.getpass", lambda prompt: next(answers))
    path = tmp_path / "users.json"
    assert (
        main(["users", "add", "alice", "--org", "1", "--iterations", "4096", "--file", str(path)])
        == 0
    )
    answers = iter(["pw", "other"])
    assert main(["users", "add", "bob", "--org", "1", "--file", str(path)]) == 2
    assert "differ" in capsys.readouterr().err
    assert set(UserStore.load(path).users) == {"alice"}


def test_negative_org_and_broken_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "users.json"
    assert add(path, "alice", "--org", "-1", monkeypatch=monkeypatch) == 2
    path.write_text("[]")
    assert main(["users", "list", "--file", str(path)]) == 2
    assert main(["users", "remove", "x", "--file", str(path)]) == 2
    assert add(path, "alice", "--org", "1", monkeypatch=monkeypatch) == 2
    assert "version" in capsys.readouterr().err


def test_transactional_id_prefixes_are_written_and_optional_when_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "users.json"
    extra = ("--org", "1", "--transactional-id-prefix", "etl.", "--iterations", "4096")
    assert add(path, "alice", *extra, monkeypatch=monkeypatch) == 0
    alice = UserStore.load(path).users["alice"]
    assert alice.transactional_id_prefixes == ("etl.",)
    assert alice.may_use_transactional_id("etl.copier")
    assert not alice.may_use_transactional_id("other")
    # a file written before transactions were served has no such key: every id is allowed
    document = json.loads(path.read_text())
    del document["users"]["alice"]["transactional_id_prefixes"]
    path.write_text(json.dumps(document))
    assert UserStore.load(path).users["alice"].may_use_transactional_id("other")


def test_the_file_defaults_to_the_one_the_broker_reads(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without --file: <data.dir>/users.json, data.dir as `serve` finds it (./rafka-data,
    --data-dir, RAFKA_DATA_DIR, --config), or sasl.users.file."""
    monkeypatch.chdir(tmp_path)
    for name in [n for n in os.environ if n.startswith("RAFKA_")]:
        monkeypatch.delenv(name)
    monkeypatch.setattr("sys.stdin", io.StringIO("pw\n"))
    assert main(["users", "add", "alice", "--org", "1", "--iterations", "4096"]) == 0
    assert set(UserStore.load(tmp_path / "rafka-data" / "users.json").users) == {"alice"}
    assert "rafka-data/users.json" in capsys.readouterr().out

    assert main(["users", "list"]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[0] == "alice"

    monkeypatch.setenv("RAFKA_DATA_DIR", str(tmp_path / "elsewhere"))
    monkeypatch.setattr("sys.stdin", io.StringIO("pw\n"))
    assert main(["users", "add", "bob", "--org", "2", "--iterations", "4096"]) == 0
    assert set(UserStore.load(tmp_path / "elsewhere" / "users.json").users) == {"bob"}
    monkeypatch.delenv("RAFKA_DATA_DIR")

    chosen = tmp_path / "chosen.json"
    properties = tmp_path / "server.properties"
    properties.write_text(f"sasl.users.file={chosen}\n")
    monkeypatch.setattr("sys.stdin", io.StringIO("pw\n"))
    assert main(["users", "add", "carol", "--org", "3", "--config", str(properties)]) == 0
    assert set(UserStore.load(chosen).users) == {"carol"}
    assert main(["users", "list", "--data-dir", str(tmp_path / "elsewhere")]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split()[0] == "bob"


def test_no_users_file_is_an_error_not_an_empty_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "missing.json"
    assert main(["users", "list", "--file", str(missing)]) == 1
    assert f"no users file at {missing}" in capsys.readouterr().err
    assert main(["users", "remove", "alice", "--data-dir", str(tmp_path)]) == 1
    assert f"no users file at {tmp_path / 'users.json'}" in capsys.readouterr().err
    assert not missing.exists() and not (tmp_path / "users.json").exists()
