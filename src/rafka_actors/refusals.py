"""Start-up refusals: a mistake the operator can fix, said in one line, with its own exit status.

`rafka-actors serve` refuses to start on a bad setting, a missing file, a data dir it cannot
use or that another broker holds, an address it cannot listen on, or a damaged log. Each is
one log line, the first it prints, naming what is wrong, where, and what to do, and a
distinct exit status (sysexits.h's, so a supervisor can tell them apart: systemd's
RestartPreventExitStatus, for one), with no traceback unless `--debug` is given. Anything
else that ends start-up is a bug: exit 1, with its traceback.

| status | refusal |
|---|---|
| 78 (EX_CONFIG) | a setting: unknown key, bad value, inconsistent values |
| 66 (EX_NOINPUT) | a file named is missing: TLS certificate or key, users file, --config |
| 73 (EX_CANTCREAT) | the data dir cannot be created, read or written |
| 75 (EX_TEMPFAIL) | another broker holds the data dir's lock (storage/data_dir_lock.py) |
| 69 (EX_UNAVAILABLE) | the listen address is taken, or not ours to bind |
| 65 (EX_DATAERR) | a log or state file is damaged |

A refused start changes nothing in the data dir (broker.py says in which order it starts).
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from .config import ConfigError, ConfigFileMissing

__all__ = [
    "BadSetting",
    "CannotListen",
    "CorruptLog",
    "DataDirLocked",
    "MissingFile",
    "StartupRefusal",
    "UnusableDataDir",
    "refusal_in",
    "unusable_data_dir",
]


HELP_CONFIG = "fix it; `rafka-actors serve --help-config` lists every setting and its default"


class StartupRefusal(Exception):
    """The broker will not start: `problem` (what, where); `remedy` (what the operator can do)."""

    exit_status: ClassVar[int] = 1

    def __init__(self, problem: str, remedy: str) -> None:
        super().__init__(f"{problem}; {remedy}")
        self.problem = problem
        self.remedy = remedy


class BadSetting(StartupRefusal):
    exit_status = 78


class MissingFile(StartupRefusal):
    exit_status = 66


class UnusableDataDir(StartupRefusal):
    exit_status = 73


class DataDirLocked(StartupRefusal):
    """Another broker holds the data dir: retrying once it has stopped is right, hence
    EX_TEMPFAIL rather than a configuration error."""

    exit_status = 75


class CannotListen(StartupRefusal):
    exit_status = 69


class CorruptLog(StartupRefusal):
    exit_status = 65


def unusable_data_dir(data_dir: Path, exc: OSError) -> UnusableDataDir:
    if data_dir.exists() and not data_dir.is_dir():
        why = "it is not a directory"
    else:
        why = f"{exc.filename or data_dir}: {exc.strerror}"
    return UnusableDataDir(
        f"cannot use the data dir {data_dir}: {why}",
        "give a directory this user can create, read and write (--data-dir DIR, or data.dir)",
    )


def refusal_in(exc: BaseException) -> StartupRefusal | None:
    """The refusal that ended start-up, also from inside the exception groups trio's
    nurseries wrap it in; None if there is none (a bug)."""
    if isinstance(exc, StartupRefusal):
        return exc
    if isinstance(exc, ConfigFileMissing):
        return MissingFile(str(exc), "fix the path given to --config")
    if isinstance(exc, ConfigError):
        return BadSetting(f"bad setting: {exc}", HELP_CONFIG)
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = refusal_in(inner)
            if found is not None:
                return found
    return None
