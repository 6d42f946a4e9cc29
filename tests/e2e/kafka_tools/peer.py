"""Apache Kafka 4.3.1's own tools and Java clients, run against our broker (issue 54 §2).

They come from the Kafka peer, unpacked into `$KAFKA_REF` (default ~/.cache/kafka-ref) by the
peer's `setup` script. `find_peer` finds that folder, runs `setup` first if its jars are not
unpacked yet and the script is found (`$RAFKA_KAFKA_PEER`, the peer's folder or its setup
script, else `../shared/peers/kafka/setup` beside the repository), and otherwise says why the
tests must skip: no `java` on PATH, or no peer.

A JVM start costs 1-2 s of CPU, so each tool runs with a small heap, the serial collector and
the client compiler only (`-XX:TieredStopAtLevel=1`: these runs are too short to pay back the
optimising compiler), and with a class-data-sharing archive of Kafka's classes made by the
session's first tool run (`-XX:ArchiveClassesAtExit`). Measured here (user + sys CPU, one
run each): `kafka-topics --list` 2.6 s with kafka-tool's default options, 0.8 s with these;
`kafka-console-consumer` reading 3 records 2.2 s without the archive, 1.35 s with it.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

REPO = Path(__file__).resolve().parents[3]
MARKER = "libs/kafka_2.13-4.3.1.jar"  # what setup unpacks
# (the JVM's own warnings, e.g. of the archive, would go to stdout: errors only, to stderr)
JVM_OPTIONS = (
    "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xss512k"
    " -Xlog:disable -Xlog:all=error:stderr"
)


class NoPeer(Exception):
    """Why Kafka's tools cannot run here (the tests skip with it)."""


@dataclass(frozen=True)
class ToolRun:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float = 0.0  # how long it ran

    @property
    def lines(self) -> list[str]:
        return [line for line in self.stdout.splitlines() if line.strip()]

    def explain(self) -> str:
        return (
            f"kafka-tool {' '.join(self.argv)} -> {self.returncode} after {self.seconds:.1f} s\n"
            f"--- stdout\n{self.stdout}\n--- stderr\n{self.stderr[-3000:]}"
        )


@dataclass
class KafkaPeer:
    home: Path  # $KAFKA_REF: kafka-tool and libs/
    archive: Path  # the class-data-sharing archive, made by the first run

    def run(
        self, tool: str, *args: str, input: str | None = None, timeout: float = 90.0
    ) -> ToolRun:
        """One of Kafka's tools (an alias of kafka-tool, e.g. `consumer-groups`), to its end."""
        options, dumping = self._jvm_options()
        began = time.monotonic()
        done = subprocess.run(
            [str(self.home / "kafka-tool"), tool, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "KAFKA_TOOL_HEAP": options},
            check=False,
        )
        if dumping and self._pending.exists():
            self._pending.rename(self.archive)  # whole, for the other workers to read
        return ToolRun(
            (tool, *args), done.returncode, done.stdout, done.stderr, time.monotonic() - began
        )

    def ok(self, tool: str, *args: str, input: str | None = None, timeout: float = 90.0) -> str:
        """The tool's output; it must succeed."""
        result = self.run(tool, *args, input=input, timeout=timeout)
        assert result.returncode == 0, result.explain()
        return result.stdout

    def start(self, tool: str, *args: str) -> RunningTool:
        """A tool left running (a console consumer that stays in its group)."""
        process = subprocess.Popen(
            [str(self.home / "kafka-tool"), tool, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "KAFKA_TOOL_HEAP": self._shared_options()},
        )
        return RunningTool((tool, *args), process)

    def _shared_options(self) -> str:
        if self.archive.exists():
            return f"{JVM_OPTIONS} -XX:SharedArchiveFile={self.archive}"
        return JVM_OPTIONS

    def _jvm_options(self) -> tuple[str, bool]:
        """The JVM options of a run, and whether it makes the archive: the first run of the
        session (of any xdist worker) does."""
        if self.archive.exists():
            return self._shared_options(), False
        try:
            fd = os.open(self.archive.with_suffix(".lock"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:  # another run makes it
            return JVM_OPTIONS, False
        os.close(fd)
        return f"{JVM_OPTIONS} -XX:ArchiveClassesAtExit={self._pending}", True

    @property
    def _pending(self) -> Path:
        return self.archive.with_suffix(".pending")


def find_peer(
    archive_dir: Path, environ: Mapping[str, str] = os.environ, repo: Path = REPO
) -> KafkaPeer:
    """The Kafka peer, set up if need be, or NoPeer with the reason."""
    if shutil.which("java", path=environ.get("PATH")) is None:
        raise NoPeer("no java on PATH (Kafka's tools need Java 17)")
    home = Path(environ.get("KAFKA_REF") or Path.home() / ".cache" / "kafka-ref")
    if not (home / MARKER).exists():
        _set_up(home, environ, repo)
    if not (home / "kafka-tool").exists():
        raise NoPeer(f"the Kafka peer in {home} has no kafka-tool")
    return KafkaPeer(home, archive_dir / "kafka-tools.jsa")


def setup_script(environ: Mapping[str, str], repo: Path) -> Path | None:
    """$RAFKA_KAFKA_PEER (the peer's folder or its setup script), else the peer beside
    the repository."""
    given = environ.get("RAFKA_KAFKA_PEER")
    candidates = [Path(given), Path(given) / "setup"] if given else []
    candidates.append(repo.parent / "shared" / "peers" / "kafka" / "setup")
    return next((c for c in candidates if c.is_file()), None)


def _set_up(home: Path, environ: Mapping[str, str], repo: Path) -> None:
    script = setup_script(environ, repo)
    if script is None:
        raise NoPeer(
            f"no Kafka peer: {home / MARKER} is absent and no setup script was found "
            "($RAFKA_KAFKA_PEER, or ../shared/peers/kafka/setup beside the repository)"
        )
    home.mkdir(parents=True, exist_ok=True)
    with open(home.parent / f".{home.name}.setup.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one xdist worker unpacks, the others wait
        if not (home / MARKER).exists():
            done = subprocess.run(
                [str(script)],
                capture_output=True,
                text=True,
                env={**environ, "KAFKA_REF": str(home)},
                timeout=600,
                check=False,
            )
            if done.returncode != 0 or not (home / MARKER).exists():
                raise NoPeer(f"{script} failed ({done.returncode}): {done.stderr[-500:]}")


class RunningTool:
    """A tool running in the background; a thread collects what it prints."""

    def __init__(self, argv: tuple[str, ...], process: subprocess.Popen[str]) -> None:
        self.argv, self.process = argv, process
        self.lines: list[str] = []
        self.errors: list[str] = []
        assert process.stdout is not None and process.stderr is not None
        self._readers = [
            threading.Thread(target=self._read, args=(process.stdout, self.lines), daemon=True),
            threading.Thread(target=self._read, args=(process.stderr, self.errors), daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream: IO[str], into: list[str]) -> None:
        for line in stream:
            into.append(line.rstrip("\n"))

    def wait_for_lines(self, count: int, timeout: float = 60.0) -> list[str]:
        """Its first `count` lines, once it has printed them."""
        deadline = time.monotonic() + timeout
        while len(self.lines) < count and time.monotonic() < deadline:
            if self.process.poll() is not None and not self._readers[0].is_alive():
                break
            time.sleep(0.1)
        assert len(self.lines) >= count, self.explain()
        return self.lines[:count]

    def stop(self, timeout: float = 30.0) -> ToolRun:
        """SIGTERM, as Ctrl-C: the tool closes its clients (a consumer leaves its group)."""
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for reader in self._readers:
            reader.join(5)
        stdout = "".join(line + "\n" for line in self.lines)
        stderr = "".join(line + "\n" for line in self.errors)
        return ToolRun(self.argv, self.process.returncode, stdout, stderr)

    def explain(self) -> str:
        return f"kafka-tool {' '.join(self.argv)} printed:\n" + "\n".join(self.lines)
