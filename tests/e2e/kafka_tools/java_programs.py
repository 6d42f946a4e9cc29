"""The tests' own small Java programs (java/: TxnCopier, TimedOutTransaction), and Kafka's
tools run with a log configuration of the test's, on the Kafka peer's jars (peer.py finds
them: `KafkaPeer.home`).

`java_classes` compiles the programs once, into pytest's cache, keyed by their source, and
`java_command` runs one. `debug_log4j` writes a log4j2 configuration that logs the Java
producer's transaction manager and network client at DEBUG: the transaction version it chose
("isTV2 enabled to ...") and the version of every request it sends ("apiKey=END_TXN,
apiVersion=5"). `kafka_tool` runs one of Kafka's tools with it (kafka-tool, which
`KafkaPeer.run` uses, sets the tools' own log configuration).
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest

JAVA_SOURCES = Path(__file__).resolve().parent / "java"
TOOL_TIMEOUT_S = 120.0

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
    home: Path, tool: str, *args: str, log4j: Path, timeout: float = TOOL_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's tools (kafka-tool's alias or a class name) to completion with the
    log configuration `log4j`, its output captured, never raising on a non-zero exit (the
    caller asserts on it)."""
    command = [*java_command(home, []), f"-Dlog4j2.configurationFile={log4j}"]
    return subprocess.run(
        [*command, _tool_class(home, tool), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@functools.cache
def _tool_classes(home: Path) -> dict[str, str]:
    listed = subprocess.run(
        [str(home / "kafka-tool"), "--list"], capture_output=True, text=True, check=True
    )
    return dict(line.split() for line in listed.stdout.splitlines() if line.strip())


def _tool_class(home: Path, alias: str) -> str:
    return _tool_classes(home).get(alias.removeprefix("kafka-"), alias)


def java_command(home: Path, classpath_extra: list[Path]) -> list[str]:
    """`java` with Kafka's jars (and `classpath_extra`) on the class path, tuned to start
    quickly (the tests' programs are short)."""
    classpath = os.pathsep.join([str(home / "libs" / "*"), *map(str, classpath_extra)])
    return [
        "java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
        "-Djava.awt.headless=true", "-cp", classpath,
    ]  # fmt: skip


def run_java(
    home: Path, classes: Path, main: str, *args: str, timeout: float = TOOL_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """Run one of the tests' Java programs (`java_classes`) to completion, with Kafka's
    tools' logging (WARN and up, to stderr)."""
    logging = f"-Dlog4j2.configurationFile={home / 'log4j2-tools.properties'}"
    command = [*java_command(home, [classes]), logging, main, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def java_classes(home: Path, cache: pytest.Cache) -> Path:
    """The tests' Java programs compiled (once per source version, shared by every run)."""
    if shutil.which("javac") is None:
        pytest.skip("no javac on PATH (the tests' Java programs are compiled with Java 17's)")
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    target = cache.mkdir("java-classes") / digest
    if target.is_dir():
        return target
    building = target.with_name(f"{digest}.{os.getpid()}")
    building.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["javac", "-d", str(building), "-cp", str(home / "libs" / "*"), *map(str, sources)],
        check=True,
        capture_output=True,
        timeout=TOOL_TIMEOUT_S,
    )
    try:
        building.rename(target)  # (another worker may have won the race: its copy is as good)
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return target
