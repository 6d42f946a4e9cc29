"""Kafka's own Java tools and client in the tests: Apache Kafka 4.3.1's jars, unpacked by the
peer's `setup` into $KAFKA_REF (default ~/.cache/kafka-ref), run with the `java` on PATH.

`JAVA_MISSING` is why they cannot run here (None when they can): tests that need them are
marked `needs_kafka_java`, so they run in the default suite where Java is present and are
skipped, with that reason, where it is not. `kafka_tool` runs one of Kafka's command-line
tools (kafka-tool's aliases: `transactions`, `producer-perf-test`, ...); `java_classes`
compiles the tests' own small Java programs (tests/e2e/java/) once, into pytest's cache,
keyed by their source, and `java_command` runs one. `DEBUG_LOG4J` writes a log4j2
configuration that logs the Java producer's transaction manager and network client at DEBUG:
the transaction version it chose ("isTV2 enabled to ...") and the version of every request
it sends ("apiKey=END_TXN, apiVersion=5").
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

KAFKA_REF = Path(os.environ.get("KAFKA_REF", "~/.cache/kafka-ref")).expanduser()
JAVA_SOURCES = Path(__file__).resolve().parent / "java"
TOOL_TIMEOUT_S = 120.0


def _missing() -> str | None:
    if shutil.which("java") is None:
        return "no java on PATH (Kafka's Java tools and client need Java 17)"
    if not (KAFKA_REF / "kafka-tool").exists() or not (KAFKA_REF / "libs").is_dir():
        return f"Kafka 4.3.1's jars are not unpacked in {KAFKA_REF} (run the Kafka peer's setup)"
    return None


JAVA_MISSING = _missing()
needs_kafka_java = pytest.mark.skipif(JAVA_MISSING is not None, reason=JAVA_MISSING or "")

DEBUG_LOG4J = """\
status = warn
appender.err.type = Console
appender.err.name = STDERR
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = STDERR
logger.txn.name = org.apache.kafka.clients.producer.internals.TransactionManager
logger.txn.level = DEBUG
logger.net.name = org.apache.kafka.clients.NetworkClient
logger.net.level = DEBUG
"""


def debug_log4j(directory: Path) -> Path:
    path = directory / "log4j2-debug.properties"
    path.write_text(DEBUG_LOG4J)
    return path


def kafka_tool(
    tool: str, *args: str, timeout: float = TOOL_TIMEOUT_S, log4j: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (kafka-tool's alias or a class name) to completion, its output
    captured, never raising on a non-zero exit (the caller asserts on it). It runs the JVM
    kafka-tool would, with the flags of `java_command`: a tool's run is mostly JVM start-up."""
    logging = log4j or KAFKA_REF / "log4j2-tools.properties"
    command = [*java_command([]), f"-Dlog4j2.configurationFile={logging}", _tool_class(tool)]
    return subprocess.run(
        [*command, *args], capture_output=True, text=True, timeout=timeout, check=False
    )


@functools.cache
def _tool_classes() -> dict[str, str]:
    listed = subprocess.run(
        [str(KAFKA_REF / "kafka-tool"), "--list"], capture_output=True, text=True, check=True
    )
    return dict(line.split() for line in listed.stdout.splitlines() if line.strip())


def _tool_class(alias: str) -> str:
    return _tool_classes().get(alias.removeprefix("kafka-"), alias)


def java_command(classpath_extra: list[Path]) -> list[str]:
    """`java` with Kafka's jars (and `classpath_extra`) on the class path, tuned to start
    quickly (the tests' programs are short)."""
    classpath = os.pathsep.join([str(KAFKA_REF / "libs" / "*"), *map(str, classpath_extra)])
    return [
        "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
        "-Djava.awt.headless=true", "-cp", classpath,
    ]  # fmt: skip


def run_java(
    classes: Path, main: str, *args: str, timeout: float = TOOL_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run one of the tests' Java programs (`java_classes`) to completion, Kafka's tools'
    logging (WARN and up, to stderr)."""
    logging = f"-Dlog4j2.configurationFile={KAFKA_REF / 'log4j2-tools.properties'}"
    command = [*java_command([classes]), logging, main, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def java_classes(cache: pytest.Cache) -> Path:
    """The tests' Java programs compiled (once per source version, shared by every run)."""
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    target = cache.mkdir("java-classes") / digest
    if target.is_dir():
        return target
    building = target.with_name(f"{digest}.{os.getpid()}")
    building.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(building), "-cp", str(KAFKA_REF / "libs" / "*"), *map(str, sources)],
        check=True,
        capture_output=True,
        timeout=TOOL_TIMEOUT_S,
    )
    try:
        building.rename(target)  # (another worker may have won the race: its copy is as good)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return target
