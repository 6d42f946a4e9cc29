"""librdkafka's own integration tests against the broker, one test per `test-runner` process.

librdkafka's `tests/` (confluentinc/librdkafka, at the tag nearest our confluent-kafka's
librdkafka: v2.15.0 for 2.16.0) hold about 200 tests; those that need a broker and nothing
else (not flagged TEST_F_LOCAL, which use a mock cluster, or TEST_F_MANUAL) are run here.
Each runs in its own `test-runner` process, against a fresh broker of its own (a temporary
data dir; `num.partitions=4`, as the trivup cluster librdkafka's tests are written for creates
topics, whose tests produce to partitions 1-3 of a topic they have auto-created;
`auto.create.topics.enable=false` and TEST_SCENARIO=noautocreate for the tests of that
scenario), with TEST_KAFKA_VERSION=4.0.0, as issue 55 prescribes. The runner itself skips
what needs more (SSL, SASL, several brokers, a newer broker version). A few tests create
topics with Kafka's `bin/kafka-topics.sh` (0045, 0052), or set ACLs with `kafka-acls.sh`
(0109, 0115, 0119): when Kafka's tools are found (`--kafka-tool`, default
`$KAFKA_REF/kafka-tool`, i.e. ~/.cache/kafka-ref/kafka-tool), scripts that call it are made
and KAFKA_PATH and BROKERS are set, as trivup does.

With `--split 0081`, 0081_admin runs once per sub-test function called by its do_test_apis
(SUBTESTS=do_test_NAME:), so one failing sub-test (its ACL ones expect an authorizer) does not
hide the others. `--bootstrap HOST:PORT` runs against a broker already running (Apache Kafka,
to compare) instead: then the noautocreate tests are skipped.

Nothing is fetched: point `--librdkafka` at a checkout, built by this script if its
tests/test-runner is missing (`./configure && make libs && make -C tests build`):

    git clone --depth 1 --branch v2.15.0 https://github.com/confluentinc/librdkafka /tmp/lrk
    .venv/bin/python bench/librdkafka_suite.py --librdkafka /tmp/lrk [--tests 0011,0052]
        [--split 0081] [--timeout 900] [--json results.json] [--bootstrap HOST:PORT]
        [--jobs 6] [--group-protocol consumer]

`--jobs N` runs N tests at once, each against its own broker on a free port (threads, each
waiting on its test-runner); with `--bootstrap` they share that broker, where a test's regex
subscription can match another's topics (0045). `--group-protocol consumer` sets
TEST_CONSUMER_GROUP_PROTOCOL, which test.c turns into each consumer's `group.protocol`
(KIP-848).

Prints one line per test as it ends (PASS, FAIL with the first failure line, SKIP with the
runner's reason, TIMEOUT), then the counts; exit status 1 if any test failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.brokers import Broker, running

KAFKA_VERSION = "4.0.0"
NOAUTOCREATE = "noautocreate"
BROKER_SETTINGS = ("num.partitions=4",)  # trivup's num_partitions
KAFKA_TOOL = (
    Path(os.environ.get("KAFKA_REF") or Path.home() / ".cache" / "kafka-ref") / "kafka-tool"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class Case:
    """One test-runner run: TESTS=number (every test of that number, e.g. 0045's five, whose
    scenario is this one), maybe one sub-test of them."""

    number: str  # "0011"
    scenario: str = "default"
    subtest: str = ""  # SUBTESTS: a substring of the sub-test's name

    @property
    def label(self) -> str:
        label = self.number if self.scenario == "default" else f"{self.number} ({self.scenario})"
        return f"{label} [{self.subtest.removesuffix(':')}]" if self.subtest else label


@dataclass(frozen=True)
class Outcome:
    case: str
    result: str  # PASS, FAIL, SKIP, TIMEOUT
    seconds: float
    reason: str = ""


def broker_tests(test_c: str) -> list[Case]:
    """The tests of test.c's `tests[]` that need a broker only (not TEST_F_LOCAL, not
    TEST_F_MANUAL), as runs: one per number and scenario (the first a test names)."""
    table = test_c[test_c.index("struct test tests[] = {") :]
    table = table[: table.index("{NULL}")]
    cases = []
    for entry in re.split(r"\b_TEST\(", table)[1:]:
        name = entry.split(",", 1)[0].strip()
        if not re.fullmatch(r"\d{4}_\w+", name):
            continue
        if "TEST_F_LOCAL" in entry or "TEST_F_MANUAL" in entry:
            continue
        scenario = re.search(r'\.scenario\s*=\s*"([^",]+)', entry)
        cases.append(Case(name[:4], scenario.group(1) if scenario else "default"))
    return list(dict.fromkeys(cases))


def subtests_of(test_source: str, function: str = "do_test_apis") -> list[str]:
    """The `do_test_NAME` functions `function` calls, once each, in order."""
    start = test_source.index(f"static void {function}(")
    body = test_source[start : test_source.index("\n}\n", start)]
    names = re.findall(r"\bdo_test_(\w+)\(", body)
    return list(dict.fromkeys(name for name in names if f"do_test_{name}(" != f"{function}("))


def outcome_of(case: Case, code: int | None, log: str, seconds: float) -> Outcome:
    """The verdict from the runner's summary table, whose rows name each test it ran (PASSED,
    FAILED, or SKIPPED with the reason): PASS if one passed and none failed, with the first
    failure's message otherwise; TIMEOUT if the run was stopped."""
    if code is None:
        return Outcome(case.label, "TIMEOUT", seconds)
    text = _ANSI.sub("", log)
    rows = re.findall(rf"\|\s+{case.number}_\w+\s+\|\s+(\w+)\s+\|[^|\n]*\|?([^\n]*)", text)
    verdicts = {verdict for verdict, _ in rows}
    if code == 0 and verdicts == {"SKIPPED"}:
        return Outcome(case.label, "SKIP", seconds, rows[0][1].strip())
    if code == 0 and "PASSED" in verdicts and verdicts <= {"PASSED", "SKIPPED"}:
        return Outcome(case.label, "PASS", seconds)
    failed = re.search(r"### Test .*?###\n(.+)", text)
    lines = text.strip().splitlines()
    reason = failed.group(1).strip() if failed else (lines[-1] if lines else f"exit {code}")
    return Outcome(case.label, "FAIL", seconds, reason[:300])


def kafka_path(kafka_tool: Path, into: Path) -> Path:
    """A KAFKA_PATH for librdkafka's tests: the `bin/kafka-*.sh` they call (topics, acls),
    each running Kafka's tool."""
    for tool in ("topics", "acls"):
        script = into / "bin" / f"kafka-{tool}.sh"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(f'#!/bin/sh\nexec {shlex.quote(str(kafka_tool))} {tool} "$@"\n')
        script.chmod(0o755)
    return into


def run_case(
    runner: Path,
    case: Case,
    bootstrap: str,
    timeout: float,
    keep: Path,
    kafka_tool: Path | None = None,
    group_protocol: str = "",
) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="lrk-") as work:
        conf = Path(work) / "test.conf"
        conf.write_text(f"bootstrap.servers={bootstrap}\n")
        root = runner.parent.parent
        env = {
            **os.environ,
            "TESTS": case.number,
            "TEST_KAFKA_VERSION": KAFKA_VERSION,
            "TEST_SCENARIO": case.scenario,
            "RDKAFKA_TEST_CONF": str(conf),
            "LD_LIBRARY_PATH": f"{root / 'src'}:{root / 'src-cpp'}",
        }
        if case.subtest:
            env["SUBTESTS"] = case.subtest
        if group_protocol:  # test.c sets each consumer's group.protocol from it
            env["TEST_CONSUMER_GROUP_PROTOCOL"] = group_protocol
        if kafka_tool is not None:
            env["KAFKA_PATH"] = str(kafka_path(kafka_tool, Path(work) / "kafka"))
            env["BROKERS"] = bootstrap
        started = time.monotonic()
        with open(Path(work) / "log", "w+b") as log:
            proc = subprocess.Popen(
                [str(runner)], cwd=runner.parent, env=env, stdout=log, stderr=subprocess.STDOUT
            )
            try:
                code: int | None = proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                code = None
            log.seek(0)
            text = log.read().decode(errors="replace")
        name = re.sub(r"\W+", "_", case.label).strip("_")
        (keep / f"{name}.log").write_text(text)
        return outcome_of(case, code, text, time.monotonic() - started)


@contextmanager
def broker_for(case: Case, bootstrap: str | None) -> Iterator[str]:
    if bootstrap is not None:
        yield bootstrap
        return
    settings: tuple[str, ...] = BROKER_SETTINGS
    if case.scenario == NOAUTOCREATE:
        settings += ("auto.create.topics.enable=false",)
    with running(Broker("rafka-actors", "rafka-actors", settings)) as target:
        yield target.bootstrap


def build(librdkafka: Path) -> Path:
    runner = librdkafka / "tests" / "test-runner"
    if not runner.exists():
        for step in (["./configure"], ["make", "libs"], ["make", "-C", "tests", "build"]):
            subprocess.run(step, cwd=librdkafka, check=True)
    return runner


def cases_to_run(librdkafka: Path, tests: set[str], split: set[str]) -> list[Case]:
    cases = []
    for case in broker_tests((librdkafka / "tests" / "test.c").read_text()):
        if tests and case.number not in tests:
            continue
        if case.number not in split:
            cases.append(case)
            continue
        [source] = (librdkafka / "tests").glob(f"{case.number}-*.c")
        for name in subtests_of(source.read_text()):
            cases.append(Case(case.number, case.scenario, f"do_test_{name}:"))
    return cases


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--librdkafka", type=Path, required=True, help="a librdkafka checkout")
    parser.add_argument("--tests", default="", help="comma-separated numbers (default: all)")
    parser.add_argument("--split", default="", help="tests to run sub-test by sub-test")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    parser.add_argument("--bootstrap", help="an already running broker to test instead")
    parser.add_argument(
        "--kafka-tool",
        type=Path,
        default=KAFKA_TOOL,
        help="Kafka's kafka-tool (kafka-topics.sh, kafka-acls.sh)",
    )
    parser.add_argument(
        "--group-protocol",
        default="",
        help="the consumers' group.protocol (consumer: KIP-848), as TEST_CONSUMER_GROUP_PROTOCOL",
    )
    parser.add_argument("--jobs", type=int, default=1, help="runs at once, each its own broker")
    parser.add_argument("--logs", type=Path, help="keep each run's output here")
    parser.add_argument("--json", type=Path, help="write the outcomes here")
    args = parser.parse_args(argv)
    runner = build(args.librdkafka.resolve())
    tests = {t.strip() for t in args.tests.split(",") if t.strip()}
    split = {t.strip() for t in args.split.split(",") if t.strip()}
    cases = cases_to_run(args.librdkafka.resolve(), tests, split)
    logs = args.logs or Path(tempfile.mkdtemp(prefix="librdkafka-suite-"))
    logs.mkdir(parents=True, exist_ok=True)
    kafka_tool = args.kafka_tool.resolve() if args.kafka_tool.exists() else None
    print(f"{len(cases)} runs; each one's output in {logs}; Kafka's tools: {kafka_tool}")

    def one(case: Case) -> Outcome:
        if args.bootstrap and case.scenario == NOAUTOCREATE:
            return Outcome(case.label, "SKIP", 0.0, "noautocreate needs our broker")
        with broker_for(case, args.bootstrap) as bootstrap:
            return run_case(
                runner, case, bootstrap, args.timeout, logs, kafka_tool, args.group_protocol
            )

    # Each run has its own broker on its own free port, so runs on threads share nothing
    # (but with --bootstrap they share that broker).
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        order = {pool.submit(one, case): index for index, case in enumerate(cases)}
        ended = {}
        for future in as_completed(order):  # printed as they end, kept in the tests' order
            outcome = ended[order[future]] = future.result()
            print(f"{outcome.case:60} {outcome.result:7} {outcome.seconds:6.0f}s  {outcome.reason}")
            sys.stdout.flush()
    outcomes = [ended[index] for index in range(len(cases))]
    counts = {r: sum(o.result == r for o in outcomes) for r in ("PASS", "FAIL", "SKIP", "TIMEOUT")}
    print(" ".join(f"{r.lower()} {n}" for r, n in counts.items()), f"of {len(outcomes)}")
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1) + "\n")
    return 1 if counts["FAIL"] or counts["TIMEOUT"] else 0


if __name__ == "__main__":
    sys.exit(main())
