"""`rafka-actors` command line: `serve`, `groups` and `transactions` (the operator's tools,
over the Kafka protocol) and `pipeline` (the analytics jobs on Spark).

`serve` lives here; every other subcommand is a module with `register(subparsers)`, which adds
its parser and sets `run` (a function of the parsed arguments returning the exit status).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from collections.abc import Callable
from functools import partial
from importlib import metadata
from logging.handlers import MemoryHandler
from pathlib import Path

# kio imports Hypothesis when it is installed (dev installs), and importing Hypothesis runs
# its plugins, trio's among them, which makes trio's scheduler deterministic: a sort and a
# shuffle of every batch of runnable tasks. Right for tests, wasted work in a broker.
os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")

import trio

from . import gc_policy
from .config import ConfigError, describe_settings, load_config
from .otel_env import configure_tracing
from .refusals import refusal_in

log = logging.getLogger("rafka_actors")

SUBCOMMAND_MODULES = (
    "rafka_actors.admin.cli",
    "rafka_actors.admin.topics_cli",
    "rafka_actors.pipeline.cli",
    "rafka_actors.auth.cli",
    "rafka_actors.admin.transactions",
)


USAGE = """\
A Kafka-wire-compatible broker whose consumer groups are served by one actor per group.
Point any Kafka client (librdkafka, kafka-python, aiokafka, Kafka's own tools) at it.

  rafka-actors serve                    run the broker on 127.0.0.1:9092, data in ./rafka-data
  rafka-actors groups list              the groups, their type and state
  rafka-actors groups offsets G --watch committed offsets and lag (records, seconds), live
  rafka-actors transactions list       the transactional ids and their transactions' state
  rafka-actors users add NAME --org N   a SASL user of an organisation
  rafka-actors pipeline lag --data-dir D --out OUT   lag over time, Burrow's verdict (Spark)

`rafka-actors COMMAND --help` tells more of each; the README tells how to configure it.
"""

SERVE_USAGE = """\
Run the broker until SIGTERM or Ctrl-C. Settings use Apache Kafka's names; later sources win:
built-in defaults (--help-config lists them), --config FILE, RAFKA_<KEY> environment variables
(RAFKA_NUM_PARTITIONS=6), then --listen, --data-dir and -o KEY=VALUE.

  rafka-actors serve --listen 127.0.0.1:9092 --data-dir ./rafka-data
  rafka-actors serve -o metrics.listen=127.0.0.1:9404     Prometheus metrics on /metrics

Tracing: with the `otel` extra installed, OTEL_TRACES_EXPORTER=otlp|console and the other
OTEL_* variables send the broker's spans (README, "Watching it").
"""


def _version() -> str:
    try:
        return metadata.version("rafka-actors")
    except metadata.PackageNotFoundError:  # run from a source tree without an install
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="rafka-actors", description=USAGE, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--version", action="version", version=f"rafka-actors {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="run the broker",
        description=SERVE_USAGE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    serve.add_argument("--listen", metavar="HOST:PORT", help="default 127.0.0.1:9092")
    serve.add_argument("--data-dir", metavar="DIR", type=Path, help="default ./rafka-data")
    serve.add_argument("--config", metavar="FILE", type=Path, help="Kafka-style properties file")
    serve.add_argument(
        "--override",
        "-o",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="set any setting by its Kafka key, e.g. -o num.partitions=6",
    )
    serve.add_argument(
        "--log-level", default="INFO", help="DEBUG, INFO (default), WARNING or ERROR"
    )
    serve.add_argument(
        "--debug", action="store_true", help="show the traceback of a refusal to start"
    )
    serve.add_argument("--help-config", action="store_true", help="list every setting")
    for name in SUBCOMMAND_MODULES:
        importlib.import_module(name).register(commands)
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in args.override:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"--override wants KEY=VALUE, got {item!r}")
        values[key] = value
    if args.listen:
        values["listen"] = args.listen
    if args.data_dir:
        values["data.dir"] = str(args.data_dir)
    return values


async def _serve_until_signalled(
    config_args: argparse.Namespace, on_checked: Callable[[], None]
) -> None:
    from .broker import run_broker

    config = load_config(config_file=config_args.config, overrides=_overrides(config_args))
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(run_broker, config, on_checked=on_checked))
            gc_policy.serving()
            async for signum in signals:
                log.info("received %s, shutting down", signal.Signals(signum).name)
                nursery.cancel_scope.cancel()
                break


LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class _StartupLog:
    """The log lines of a start-up, held until it can no longer be refused, so that a
    refusal's line is the first one the operator sees (the held ones follow it)."""

    def __init__(self, level: str) -> None:
        self.stream = logging.StreamHandler(sys.stderr)
        self.stream.setFormatter(logging.Formatter(LOG_FORMAT))
        # flushed early only if a start-up logs more than this many lines
        self.held: MemoryHandler | None = MemoryHandler(
            10_000, flushLevel=logging.CRITICAL + 1, target=self.stream
        )
        root = logging.getLogger()
        root.setLevel(level.upper())
        root.addHandler(self.held)

    def release(self, first: Callable[[], None] | None = None) -> None:
        """Log from now on as it comes, after ``first`` and then the lines held."""
        if self.held is None:
            return
        root = logging.getLogger()
        root.addHandler(self.stream)
        root.removeHandler(self.held)
        if first is not None:
            first()
        self.held.close()  # flushes what it held
        self.held = None

    def close(self) -> None:
        self.release()
        logging.getLogger().removeHandler(self.stream)  # `main` may run again in-process


def _serve(args: argparse.Namespace) -> int:
    startup_log = _StartupLog(args.log_level)
    stop_tracing = configure_tracing(os.environ)
    try:
        gc_policy.starting()
        trio.run(_serve_until_signalled, args, startup_log.release)
    except BaseException as exc:
        refusal = refusal_in(exc)
        if refusal is None:
            startup_log.release()
            raise
        # one line, the first: what, where, what to do (refusals.py); the traceback if asked
        traceback = exc if args.debug else None
        startup_log.release(
            first=lambda: log.error("cannot start: %s", refusal, exc_info=traceback)
        )
        return refusal.exit_status
    finally:
        if stop_tracing is not None:
            stop_tracing()  # flushes the spans still queued
        startup_log.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "serve":
        if args.help_config:
            for key, default, doc in describe_settings():
                print(f"{key:40} {default:24} {doc}")
            return 0
        return _serve(args)
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT, stream=sys.stderr)
    run = getattr(args, "run", None)
    return int(run(args)) if run is not None else 1


if __name__ == "__main__":
    sys.exit(main())
