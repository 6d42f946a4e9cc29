"""How the tests find Kafka's tools (peer.py): set up from the peer when not unpacked yet,
and a reason to skip when they cannot run."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from .peer import MARKER, NoPeer, find_peer


def _fake_setup(folder: Path) -> Path:
    """A setup script that unpacks as the peer's does: the jar and kafka-tool into $KAFKA_REF."""
    folder.mkdir(parents=True)
    script = folder / "setup"
    script.write_text(
        "#!/bin/sh\nset -e\n"
        'mkdir -p "$KAFKA_REF/libs" && touch "$KAFKA_REF/' + MARKER + '" "$KAFKA_REF/kafka-tool"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def _java_path(tmp_path: Path) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    java = bin_dir / "java"
    java.write_text("#!/bin/sh\n")
    java.chmod(0o755)
    return str(bin_dir) + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin")  # (and sh's tools)


def test_the_peer_beside_the_repository_is_set_up_once(tmp_path: Path) -> None:
    repo = tmp_path / "work" / "repo"
    _fake_setup(tmp_path / "work" / "shared" / "peers" / "kafka")
    environ = {"PATH": _java_path(tmp_path), "KAFKA_REF": str(tmp_path / "ref")}
    peer = find_peer(tmp_path, environ, repo)
    assert peer.home == tmp_path / "ref" and (peer.home / MARKER).exists()
    assert peer.archive.parent == tmp_path


def test_rafka_kafka_peer_names_the_peer(tmp_path: Path) -> None:
    folder = tmp_path / "elsewhere"
    _fake_setup(folder)
    environ = {
        "PATH": _java_path(tmp_path),
        "KAFKA_REF": str(tmp_path / "ref"),
        "RAFKA_KAFKA_PEER": str(folder),
    }
    assert (find_peer(tmp_path, environ, tmp_path / "repo").home / MARKER).exists()


def test_without_java_or_a_peer_the_reason_is_given(tmp_path: Path) -> None:
    with pytest.raises(NoPeer, match="no java on PATH"):
        find_peer(tmp_path, {"PATH": str(tmp_path / "empty")}, tmp_path / "repo")
    environ = {"PATH": _java_path(tmp_path), "KAFKA_REF": str(tmp_path / "ref")}
    with pytest.raises(NoPeer, match="no setup script was found"):
        find_peer(tmp_path, environ, tmp_path / "repo")
    assert not os.path.exists(tmp_path / "ref" / MARKER)
