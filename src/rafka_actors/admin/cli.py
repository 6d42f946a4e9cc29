"""`rafka-actors groups`: the operator's consumer-group tools, over the Kafka protocol.

Shaped like Kafka's kafka-consumer-groups.sh, one subcommand per action:

  list                         groups with their type (classic / consumer / share) and state
  describe G                   state, assignor, epochs, members and their assignments
  offsets G... | --all-groups  CURRENT-OFFSET, LOG-END-OFFSET and LAG per partition
      [--watch [SECONDS]]      refreshed in place, with lag in seconds too
  reset-offsets G (--topic T[:P,P] ... | --all-topics)
      (--to-earliest | --to-latest | --to-offset N | --shift-by N) [--dry-run | --execute]
  delete G...                  delete empty groups and their offsets

Every subcommand takes `--bootstrap HOST:PORT` (default 127.0.0.1:9092) and `--output
table|json`. Without `--execute`, reset-offsets only prints the offsets it would commit.
Exit status: 0 done; 1 the broker answered with an error (printed with Kafka's name, e.g.
GROUP_ID_NOT_FOUND) or the command could not be done as asked; 2 the broker could not be
reached (or a usage error).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from ..config import ConfigError
from . import calls, groups, render, topic_calls
from .client import DEFAULT_BOOTSTRAP, AdminError, KafkaClient
from .model import CLASSIC, CONSUMER, SHARE
from .security import load_command_config

Command = Callable[[KafkaClient, argparse.Namespace], int]


def register(subparsers: Any) -> None:
    """Add `groups` and its subcommands to the `rafka-actors` parser."""
    parser = subparsers.add_parser(
        "groups",
        help="list, describe, inspect lag of, reset and delete consumer groups",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="groups_command", required=True, metavar="COMMAND")
    common = _common_options()
    _add_list(commands, common)
    _add_describe(commands, common)
    _add_offsets(commands, common)
    _add_reset(commands, common)
    _add_delete(commands, common)


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--bootstrap",
        "--bootstrap-server",
        dest="bootstrap",
        metavar="HOST:PORT",
        default=DEFAULT_BOOTSTRAP,
        help=f"the broker to ask (default {DEFAULT_BOOTSTRAP}; a comma-separated list works)",
    )
    common.add_argument("--output", choices=("table", "json"), default="table")
    common.add_argument(
        "--timeout", type=float, default=30.0, metavar="SECONDS", help="per request (default 30)"
    )
    common.add_argument(
        "--command-config",
        type=Path,
        metavar="FILE",
        help="client properties for a SASL listener (security.protocol, sasl.mechanism, "
        "sasl.username, sasl.password, ssl.ca.location)",
    )
    return common


def _subcommand(
    commands: Any, name: str, common: argparse.ArgumentParser, command: Command, help: str
) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(
        name, parents=[common], help=help, description=help
    )
    parser.set_defaults(run=_runner(command), parser=parser)
    return parser


def _runner(command: Command) -> Callable[[argparse.Namespace], int]:
    """Connect, run the command, and turn our errors into a message and an exit status."""

    def run(args: argparse.Namespace) -> int:
        check = getattr(args, "check", None)
        if check is not None:
            check(args)  # usage errors before connecting: argparse's message, status 2
        try:
            security = load_command_config(args.command_config)
        except ConfigError as exc:
            print(f"error: --command-config: {exc}", file=sys.stderr)
            return 2
        try:
            with KafkaClient(args.bootstrap, args.timeout, security) as client:
                return command(client, args)
        except AdminError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return exc.exit_status

    return run


def _kind(group_type: str) -> str:
    """How Kafka's tools name a group: kafka-share-groups.sh says "Share group"."""
    return "Share group" if group_type == SHARE else "Consumer group"


def _emit(text: str) -> None:
    if text:
        print(text)


# -- list ---------------------------------------------------------------------------------
def _add_list(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = _subcommand(commands, "list", common, _list, "list groups with type and state")
    parser.add_argument(
        "--state", action="append", default=[], help="only groups in this state (repeatable)"
    )
    parser.add_argument(
        "--type",
        action="append",
        default=[],
        choices=(CLASSIC, CONSUMER, SHARE),
        help="only groups of this type (repeatable)",
    )


def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    _emit(render.listing(calls.list_groups(client, args.state, args.type), args.output))
    return 0


# -- describe -----------------------------------------------------------------------------
def _add_describe(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = _subcommand(
        commands, "describe", common, _describe, "a group's state, assignor and members"
    )
    parser.add_argument("group")


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    group = groups.require_group(client, args.group)
    # the group's dynamic configs (issue 45): those set for it, shown when there are any
    dynamic = []
    if client.supports(topic_calls.DESCRIBE_CONFIGS, 4):  # (an older broker: none to show)
        configs = topic_calls.configs(client, topic_calls.GROUP, group.group_id)
        dynamic = [c for c in configs if c.source == "group"]
    if args.output == "json":
        described = json.loads(render.description(group, args.output))
        described["dynamic_configs"] = {c.name: c.value for c in dynamic}
        _emit(render.as_json(described))
    elif dynamic:
        rows = [(group.group_id, c.name, c.value) for c in dynamic]
        configs_table = render.table(("GROUP", "DYNAMIC-CONFIG", "VALUE"), rows)
        _emit(render.description(group, args.output) + "\n\n" + configs_table)
    else:
        _emit(render.description(group, args.output))
    if not group.members and args.output == "table":
        render.note(f"\n{_kind(group.group_type)} '{group.group_id}' has no active members.")
    return 0


# -- offsets ------------------------------------------------------------------------------
def _add_offsets(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = _subcommand(
        commands, "offsets", common, _offsets, "committed offsets, log-end offsets and lag"
    )
    parser.add_argument("group", nargs="*", help="one or more groups")
    parser.add_argument("--all-groups", action="store_true", help="every group of the broker")
    parser.add_argument(
        "--watch",
        nargs="?",
        type=float,
        const=WATCH_SECONDS,
        metavar="SECONDS",
        help=f"refresh the table in place every SECONDS (default {WATCH_SECONDS:g}), with lag "
        "in records and in seconds, until Ctrl-C",
    )
    parser.set_defaults(check=_check_offsets)


WATCH_SECONDS = 2.0


def _check_offsets(args: argparse.Namespace) -> None:
    if bool(args.group) == args.all_groups:
        args.parser.error("name one or more groups, or give --all-groups (not both)")
    if args.watch is not None and (args.watch <= 0 or args.output != "table"):
        args.parser.error("--watch wants a positive number of seconds and --output table")


def _offsets(client: KafkaClient, args: argparse.Namespace) -> int:
    if args.watch is not None:
        return _watch(client, args)
    group_ids = groups.all_group_ids(client) if args.all_groups else args.group
    show_progress = args.output == "table" and len(group_ids) > 1
    results = groups.many_group_offsets(
        client, group_ids, render.progress if show_progress else None
    )
    if args.output == "table":
        for result in results:
            if not result.group.members:
                kind = _kind(result.group.group_type)
                render.note(f"{kind} '{result.group.group_id}' has no active members.")
    _emit(render.offsets(results, args.output))
    return 0


def _watch(client: KafkaClient, args: argparse.Namespace) -> int:
    """Redraw the offsets table every `--watch` seconds: in place on a terminal (the screen
    is cleared), one table after another otherwise."""
    clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else ""
    try:
        while True:
            group_ids = groups.all_group_ids(client) if args.all_groups else args.group
            results = groups.many_group_offsets(client, group_ids, times=True)
            now = time.time()
            stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now))
            head = f"every {args.watch:g}s: groups offsets {' '.join(group_ids)}   {stamp}"
            body = render.watched_offsets(results, int(now * 1000))
            sys.stdout.write(f"{clear}{head}\n\n{body}\n\n")
            sys.stdout.flush()
            time.sleep(args.watch)
    except KeyboardInterrupt:
        return 0


# -- reset-offsets ------------------------------------------------------------------------
def _add_reset(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = _subcommand(
        commands,
        "reset-offsets",
        common,
        _reset,
        "plan (dry run) or --execute new committed offsets for an inactive group",
    )
    parser.add_argument("group")
    scope = parser.add_mutually_exclusive_group(required=True)
    scope.add_argument(
        "--topic",
        action="append",
        type=_topic_scope,
        metavar="TOPIC[:P,P...]",
        help="a topic, or some of its partitions (repeatable)",
    )
    scope.add_argument(
        "--all-topics", action="store_true", help="every partition the group has offsets for"
    )
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to-earliest", action="store_true", help="the log start")
    mode.add_argument("--to-latest", action="store_true", help="the log end")
    mode.add_argument("--to-offset", type=int, metavar="N", help="offset N (clamped to the log)")
    mode.add_argument("--shift-by", type=int, metavar="N", help="the committed offset plus N")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--dry-run", action="store_true", help="print the plan only (default)")
    action.add_argument("--execute", action="store_true", help="commit the new offsets")


def _topic_scope(value: str) -> groups.TopicScope:
    topic, sep, partitions = value.partition(":")
    if not topic:
        raise argparse.ArgumentTypeError(f"no topic in {value!r}")
    if not sep:
        return topic, None
    try:
        return topic, tuple(sorted({int(p) for p in partitions.split(",")}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected TOPIC:P,P..., got {value!r}") from None


def _reset_spec(args: argparse.Namespace) -> groups.ResetSpec:
    if args.to_earliest:
        return groups.ResetSpec("earliest")
    if args.to_latest:
        return groups.ResetSpec("latest")
    if args.to_offset is not None:
        return groups.ResetSpec("offset", args.to_offset)
    return groups.ResetSpec("shift", args.shift_by)


def _reset(client: KafkaClient, args: argparse.Namespace) -> int:
    scope = None if args.all_topics else args.topic
    plan = groups.plan_reset(client, args.group, scope, _reset_spec(args))
    for warning in plan.warnings:
        render.note(f"WARN: {warning}")
    if args.execute:
        plan = groups.execute_reset(client, plan)
    elif args.output == "table":
        render.note("Dry run: nothing was committed (add --execute to commit these offsets).")
        if groups.is_active(plan.group):
            render.note(
                f"Note: group '{args.group}' is {plan.group.state}: the broker accepts new "
                "offsets only while it has no active members."
            )
    _emit(render.reset(plan, args.output))
    return 0


# -- delete -------------------------------------------------------------------------------
def _add_delete(commands: Any, common: argparse.ArgumentParser) -> None:
    parser = _subcommand(
        commands, "delete", common, _delete, "delete empty groups with their offsets"
    )
    parser.add_argument("group", nargs="+")


def _delete(client: KafkaClient, args: argparse.Namespace) -> int:
    results = groups.delete_groups(client, args.group)
    _emit(render.deletion(results, args.output))
    return 0 if all(code == ErrorCode.none for code in results.values()) else 1
