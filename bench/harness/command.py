"""`bench/run.py`: workloads (a)-(h) against peer brokers, one table from one run.

Without --bootstrap it starts every broker of --brokers itself, on loopback with a data dir
of its own, and runs every workload --runs times against each (one that measures what the
broker holds, (g), against a broker of its own per run), then prints one Markdown table:
median (min-max) per figure and broker, and each peer's ratio to the first broker. With
--bootstrap it measures that one running broker instead.

The brokers take turns: all are started at once, and each run of a workload goes to every
broker before the next run starts (every other run in the reverse order), so the brokers' runs
of a figure are seconds apart. On a shared host the machine's own throughput drifts by 10-30%
over minutes; taken in turns, a ratio compares brokers under the same drift. A broker waiting
for its turn is idle (it sits in epoll_wait). --no-interleave runs them one after another
instead, each with all its runs.

A broker of --brokers is `[NAME=]KIND[@PYTHON][[KEY=VALUE,...]]` (brokers.parse_brokers):
KIND is rafka-actors, noida-db, tansu or kafka (Apache Kafka 4.3.1, from $KAFKA_REF); `[...]`
adds rafka-actors settings; `@PYTHON` runs another installation of rafka-actors, `PYTHON -m
rafka_actors serve ...` (an older commit in a venv of its own); NAME is the table's column. A
column "vs X" is the first broker's median over X's, oriented so that above 1.0 the first did
better: with the new build first, "vs old" reads new/old, the two taking turns within the run:

    .venv/bin/python bench/run.py --workloads c \
        --brokers 'new=rafka-actors,old=rafka-actors@/work/baseline/.venv/bin/python'

    .venv/bin/python bench/run.py [--brokers rafka-actors,kafka,noida-db,tansu] [--runs 3]
        [--no-interleave] [--workloads abcdefgh] [--quick] [--json FILE]
        [--rafka-override KEY=VALUE ...] [--bootstrap HOST:PORT [--kip848]]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import logging
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager

from .core import Figure, Options, Target, Workload

log = logging.getLogger(__name__)

DEFAULT_BROKERS = "rafka-actors,rafka-actors[coordinator.log.fsync=never],kafka,noida-db,tansu"
# Kafka's 3 s initial rebalance delay would be the whole of (a) and (b); the peers wait
# about 0.3 s. 100 ms still gathers consumers that start together into one rebalance.
RAFKA_BENCH_SETTINGS = ("group.initial.rebalance.delay.ms=100",)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python bench/run.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--brokers",
        default=DEFAULT_BROKERS,
        help="comma-separated [NAME=]KIND[@PYTHON][[KEY=VALUE,...]] (default: %(default)s)",
    )
    parser.add_argument("--bootstrap", metavar="HOST:PORT", help="measure this broker only")
    parser.add_argument("--kip848", action="store_true", help="--bootstrap serves KIP-848")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--interleave",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="start every broker at once, runs taking turns (default); or one after another",
    )
    parser.add_argument("--workloads", default="abcdefgh", help="letters, e.g. abcd")
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke test)")
    parser.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    parser.add_argument(
        "--rafka-override",
        metavar="KEY=VALUE",
        action="append",
        default=list(RAFKA_BENCH_SETTINGS),
        help="a setting for every rafka-actors broker started (default: %(default)s)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(
        level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    return run(args, list(sys.argv[1:] if argv is None else argv))


def workloads() -> dict[str, Workload]:
    from .consumer_workloads import WORKLOADS as CLIENT
    from .scale_workloads import WORKLOADS as SCALE

    return {**CLIENT, **SCALE}


Fresh = Callable[[], AbstractContextManager[Target]]


def measure(
    target: Target,
    chosen: list[Workload],
    opts: Options,
    progress: Callable[[str], None],
    fresh: Fresh | None = None,
) -> dict[str, Figure]:
    """Every chosen workload `opts.runs` times against `target`, or, for a workload that
    wants a fresh broker, against one `fresh()` starts per run; figures merged by key."""
    return measure_in_turns([(target, fresh)], chosen, opts, progress)[target.name]


def measure_in_turns(
    targets: list[tuple[Target, Fresh | None]],
    chosen: list[Workload],
    opts: Options,
    progress: Callable[[str], None],
) -> dict[str, dict[str, Figure]]:
    """`measure` for several targets at once, taking turns: each run of a workload goes to
    every target before the next run, in the listed order on odd runs and the reverse on even
    ones, so that no target always goes first, or always right after the same other one;
    figures merged by target name, then key."""
    merged: dict[str, dict[str, Figure]] = {target.name: {} for target, _ in targets}
    for workload in chosen:
        applicable = []
        for target, fresh in targets:
            if workload.needs(target):
                applicable.append((target, fresh))
            else:
                progress(f"{target.name}: ({workload.letter}) not applicable")
        for run in range(1, opts.runs + 1):
            for target, fresh in applicable if run % 2 else applicable[::-1]:
                started = time.monotonic()
                if workload.fresh_broker and fresh is not None:
                    with fresh() as own:
                        figures = workload.run(own, opts)
                else:
                    figures = workload.run(target, opts)
                for figure in figures:
                    mine = merged[target.name].setdefault(
                        figure.key,
                        Figure(figure.key, figure.label, figure.unit, figure.higher_is_better),
                    )
                    mine.values.extend(figure.values)
                took = time.monotonic() - started
                progress(f"{target.name}: ({workload.letter}) run {run}/{opts.runs}, {took:.1f} s")
    return merged


def run(args: argparse.Namespace, argv: Sequence[str] = ()) -> int:
    from .brokers import BrokerUnavailable, parse_brokers, running, split_broker_list
    from .table import Results, as_json, machine, markdown

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    known = workloads()
    chosen = [known[letter] for letter in args.workloads if letter in known]
    try:
        listed = [] if args.bootstrap else split_broker_list(args.brokers)
        to_start = parse_brokers(listed, args.rafka_override)
    except ValueError as exc:
        progress(f"--brokers: {exc}")
        return 2
    named = [broker.name for broker in to_start]
    if len(set(named)) != len(named):
        progress(f"two brokers of the same name in {named}: give them NAME= prefixes")
        return 2
    opts = Options(runs=args.runs, quick=args.quick)
    started = time.monotonic()
    results = Results([], {})
    if args.bootstrap:
        target = Target("external", args.bootstrap, kip848=args.kip848)
        results.targets.append(target.name)
        results.figures[target.name] = measure(target, chosen, opts, progress)
    elif args.interleave:
        with contextlib.ExitStack() as stack:
            started_targets: list[tuple[Target, Fresh | None]] = []
            for broker in to_start:
                try:
                    target = stack.enter_context(running(broker))
                except BrokerUnavailable as exc:
                    progress(f"{broker.name}: skipped ({exc})")
                    continue
                progress(f"{broker.name}: started at {target.bootstrap}")
                results.targets.append(broker.name)
                started_targets.append((target, functools.partial(running, broker)))
            results.figures.update(measure_in_turns(started_targets, chosen, opts, progress))
    else:
        for broker in to_start:
            try:
                with running(broker) as target:
                    progress(f"{broker.name}: started at {target.bootstrap}")
                    results.targets.append(broker.name)
                    results.figures[broker.name] = measure(
                        target, chosen, opts, progress, fresh=functools.partial(running, broker)
                    )
            except BrokerUnavailable as exc:
                progress(f"{broker.name}: skipped ({exc})")
    if not results.targets:
        progress("no broker could be measured")
        return 1
    command = shlex.join(["bench/run.py", *argv])
    header = [
        f"# rafka-actors bench, {datetime.date.today().isoformat()}",
        "",
        f"- machine: {machine()}; client and broker share it",
        f"- command: `{command}` ({time.monotonic() - started:.0f} s)",
        f"- runs per figure: {opts.runs}; cells: median (min-max)"
        + ("; quick sizes" if opts.quick else "")
        + ("" if args.bootstrap else _order(args.interleave)),
    ]
    if not args.bootstrap:  # an external broker's settings are not ours to report
        header.append(f"- rafka-actors settings: {', '.join(args.rafka_override) or 'defaults'}")
    if any(broker.python for broker in to_start):
        pythons = [
            f"{b.name} under {b.python or sys.executable + ' (this venv)'}"
            for b in to_start
            if b.kind == "rafka-actors" and b.name in results.targets
        ]
        header.append(f"- rafka-actors installations: {'; '.join(pythons)}")
    print(markdown(results, header))
    if args.json:
        meta = {"header": header, "runs": opts.runs, "quick": opts.quick}
        with open(args.json, "w") as out:
            out.write(as_json(results, meta))
    return 0


def _order(interleave: bool) -> str:
    return "; the brokers took turns run by run" if interleave else "; one broker after another"
