"""`rafka-actors --help` and `--version` are written for users, not about module internals."""

from __future__ import annotations

import pytest

from rafka_actors.cli import main

COMMANDS = ([], ["serve"], ["groups"], ["pipeline"], ["users"], ["transactions"])


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c) or "top")
def test_help_speaks_to_users(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "usage: rafka-actors" in text
    for internal in ("register(", "subparsers", "rafka_actors.", "module"):
        assert internal not in text, f"{internal!r} in the help of {command}"


def test_the_top_help_names_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    listed = text.split("positional arguments:")[1].split()
    for command in ("serve", "groups", "topics", "pipeline", "users", "transactions"):
        assert command in listed, command
    assert "rafka-actors transactions list" in text  # among the examples, as groups are


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith("rafka-actors 0.")
