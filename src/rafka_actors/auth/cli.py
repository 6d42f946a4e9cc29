"""`rafka-actors users`: write the broker's credentials file (sasl.users.file, docs/tenancy.md).

  add NAME --org N [--password P] [--mechanism SCRAM-SHA-256|SCRAM-SHA-512|both]
      [--iterations N] [--group-prefix P ...] [--topic-prefix P ...]
      [--transactional-id-prefix P ...]   add or replace a user
  list                                                                  users, orgs, prefixes
  remove NAME                                                           delete a user

Every subcommand works on the file the broker reads: `sasl.users.file`, else
`<data.dir>/users.json`, found as `serve` finds them (`--config FILE`, the `RAFKA_*`
environment, `--data-dir DIR`: default ./rafka-data/users.json); `--file PATH` names another.
Without `--password`, the password is read from standard input (one line) when it is not a
terminal, else prompted for twice without echo. Only salted SCRAM credentials are written,
never the password; `list` never prints them. Exit status: 0 done; 1 no such user (remove)
or no users file (list, remove); 2 a usage error or an unusable file.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path
from typing import Any

from ..config import ConfigError, load_config
from .scram import DEFAULT_ITERATIONS, MAX_ITERATIONS, MIN_ITERATIONS, Mechanism, derive_credential
from .users import User, UsersFileError, UserStore, check_name, check_prefixes

MECHANISM_CHOICES = {
    "SCRAM-SHA-256": (Mechanism.SCRAM_SHA_256,),
    "SCRAM-SHA-512": (Mechanism.SCRAM_SHA_512,),
    "both": tuple(Mechanism),
}


def register(subparsers: Any) -> None:
    """Add `users` and its subcommands to the `rafka-actors` parser."""
    parser = subparsers.add_parser(
        "users",
        help="add, list and remove SASL users (PLAIN / SCRAM credentials)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="users_command", required=True, metavar="COMMAND")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--file", type=Path, help="the credentials file (default: the one the broker reads)"
    )
    common.add_argument("--data-dir", type=Path, metavar="DIR", help="the broker's data dir")
    common.add_argument("--config", type=Path, metavar="FILE", help="the broker's properties")

    add = commands.add_parser("add", parents=[common], help="add or replace a user")
    add.add_argument("name")
    add.add_argument("--org", type=int, required=True, help="the user's organisation id")
    add.add_argument("--password", help="default: stdin, or a prompt without echo")
    add.add_argument("--mechanism", choices=sorted(MECHANISM_CHOICES), default="both")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    add.add_argument("--group-prefix", action="append", default=[], dest="group_prefixes")
    add.add_argument("--topic-prefix", action="append", default=[], dest="topic_prefixes")
    add.add_argument(
        "--transactional-id-prefix", action="append", default=[], dest="transactional_id_prefixes"
    )
    add.set_defaults(run=_add)

    listing = commands.add_parser("list", parents=[common], help="list users (no secrets)")
    listing.set_defaults(run=_list)

    remove = commands.add_parser("remove", parents=[common], help="delete a user")
    remove.add_argument("name")
    remove.set_defaults(run=_remove)


def _error(message: str, status: int = 2) -> int:
    print(f"rafka-actors users: {message}", file=sys.stderr)
    return status


def users_file(args: argparse.Namespace) -> Path:
    """`--file`, else the file the broker reads with the same settings (config.py)."""
    if args.file is not None:
        return Path(args.file)
    overrides = {} if args.data_dir is None else {"data.dir": str(args.data_dir)}
    try:
        return load_config(config_file=args.config, overrides=overrides).users_file
    except ConfigError as exc:
        raise UsersFileError(f"cannot tell which users file the broker reads: {exc}") from exc


def _no_file(path: Path) -> int:
    return _error(f"no users file at {path} (add a user first, or give --file)", 1)


def _read_password(args: argparse.Namespace) -> str:
    if args.password is not None:
        return str(args.password)
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    password = getpass.getpass(f"Password for {args.name}: ")
    if password != getpass.getpass("Again: "):
        raise UsersFileError("the passwords differ")
    return password


def _add(args: argparse.Namespace) -> int:
    try:
        check_name(args.name)
        group_prefixes = check_prefixes("--group-prefix", args.group_prefixes)
        topic_prefixes = check_prefixes("--topic-prefix", args.topic_prefixes)
        txn_prefixes = check_prefixes("--transactional-id-prefix", args.transactional_id_prefixes)
        if args.org < 0:
            raise UsersFileError("--org must be >= 0")
        if not MIN_ITERATIONS <= args.iterations <= MAX_ITERATIONS:
            raise UsersFileError(f"--iterations must be in [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
        path = users_file(args)
        store = UserStore.load_or_empty(path)
        password = _read_password(args)
        if not password:
            raise UsersFileError("refusing an empty password")
    except UsersFileError as exc:
        return _error(str(exc))
    credentials = {
        m: derive_credential(m, password, iterations=args.iterations)
        for m in MECHANISM_CHOICES[args.mechanism]
    }
    existed = store.get(args.name) is not None
    user = User(
        args.name,
        args.org,
        group_prefixes,
        topic_prefixes,
        credentials,
        transactional_id_prefixes=txn_prefixes,
    )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)  # a data dir no broker made yet
        store.with_user(user).save(path)
    except OSError as exc:
        return _error(f"cannot write {path}: {exc.strerror or exc}")
    print(f"{'updated' if existed else 'added'} user {args.name} (org {args.org}) in {path}")
    return 0


def _list(args: argparse.Namespace) -> int:
    try:
        path = users_file(args)
        if not path.exists():
            return _no_file(path)
        store = UserStore.load(path)
    except UsersFileError as exc:
        return _error(str(exc))
    rows = [("USER", "ORG", "MECHANISMS", "GROUP-PREFIXES", "TOPIC-PREFIXES")]
    for name in sorted(store.users):
        user = store.users[name]
        rows.append(
            (
                name,
                str(user.org_id),
                ",".join(m.value for m in Mechanism if m in user.credentials) or "-",
                ",".join(user.group_prefixes) or "*",
                ",".join(user.topic_prefixes) or "*",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )
    return 0


def _remove(args: argparse.Namespace) -> int:
    try:
        path = users_file(args)
        if not path.exists():
            return _no_file(path)
        store = UserStore.load(path)
    except UsersFileError as exc:
        return _error(str(exc))
    if store.get(args.name) is None:
        return _error(f"no user {args.name!r} in {path}", 1)
    store.without(args.name).save(path)
    print(f"removed user {args.name}")
    return 0
