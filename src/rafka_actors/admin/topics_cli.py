"""`rafka-actors topics`: the operator's topic tools, over the Kafka protocol.

  list                              topics and their partition counts
  describe T                        partitions with log start, log end and size; configs and
                                    where each comes from (topic, broker, default)
  create T [--partitions N] [--config K=V ...]
  alter T [--partitions N] [--config K=V ...] [--delete-config K ...]
  delete T

The same options and exit statuses as `rafka-actors groups` (`--bootstrap`, `--output`,
`--command-config`; 0 done, 1 an error from the broker, 2 unreachable or a usage error).
"""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from . import render, topic_calls
from .cli import _common_options, _emit, _subcommand
from .client import KafkaClient


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "topics",
        help="list, describe, create, alter and delete topics",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="topics_command", required=True, metavar="COMMAND")
    common = _common_options()
    _subcommand(commands, "list", common, _list, "topics and their partition counts")
    describe = _subcommand(
        commands, "describe", common, _describe, "partitions, offsets, sizes and configs"
    )
    describe.add_argument("topic")
    create = _subcommand(commands, "create", common, _create, "create a topic")
    create.add_argument("topic")
    create.add_argument("--partitions", type=int, default=-1, help="default num.partitions")
    _config_options(create)
    alter = _subcommand(commands, "alter", common, _alter, "change configs or add partitions")
    alter.add_argument("topic")
    alter.add_argument("--partitions", type=int, help="grow the topic to this many")
    _config_options(alter)
    alter.add_argument(
        "--delete-config", action="append", default=[], metavar="KEY", help="back to default"
    )
    delete = _subcommand(commands, "delete", common, _delete, "delete a topic")
    delete.add_argument("topic")


def _config_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="a topic config"
    )


def _configs(args: argparse.Namespace) -> dict[str, str]:
    values = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            args.parser.error(f"--config wants KEY=VALUE, got {item!r}")
        values[key.strip()] = value.strip()
    return values


def _list(client: KafkaClient, args: argparse.Namespace) -> int:
    topics = topic_calls.topic_names(client)
    if args.output == "json":
        _emit(render.as_json([{"topic": t, "partitions": n} for t, n in sorted(topics.items())]))
    else:
        _emit(render.table(("TOPIC", "PARTITIONS"), sorted(topics.items())))
    return 0


def _describe(client: KafkaClient, args: argparse.Namespace) -> int:
    topic = topic_calls.describe_topic(client, args.topic)
    if args.output == "json":
        _emit(render.as_json(asdict(topic)))
        return 0
    partitions = render.table(
        ("TOPIC", "PARTITION", "LOG-START-OFFSET", "LOG-END-OFFSET", "SIZE-BYTES"),
        [
            (topic.name, p.partition, p.log_start_offset, p.log_end_offset, p.size_bytes)
            for p in topic.partitions
        ],
    )
    configs = render.table(
        ("CONFIG", "VALUE", "SOURCE"), [(c.name, c.value, c.source) for c in topic.configs]
    )
    _emit(f"Topic {topic.name} (id {topic.topic_id})\n\n{partitions}\n\n{configs}")
    return 0


def _create(client: KafkaClient, args: argparse.Namespace) -> int:
    topic_calls.create_topic(client, args.topic, args.partitions, _configs(args))
    render.note(f"Created topic {args.topic}.")
    return 0


def _alter(client: KafkaClient, args: argparse.Namespace) -> int:
    configs = _configs(args)
    if args.partitions is None and not configs and not args.delete_config:
        args.parser.error("nothing to alter: give --partitions, --config or --delete-config")
    if configs or args.delete_config:
        topic_calls.alter_configs(
            client, topic_calls.TOPIC, args.topic, configs, args.delete_config
        )
    if args.partitions is not None:
        topic_calls.add_partitions(client, args.topic, args.partitions)
    render.note(f"Altered topic {args.topic}.")
    return 0


def _delete(client: KafkaClient, args: argparse.Namespace) -> int:
    topic_calls.delete_topic(client, args.topic)
    render.note(f"Deleted topic {args.topic}.")
    return 0
