"""Start the real broker (`rafka-actors serve`) as a child process for end-to-end tests.

The broker listens on `127.0.0.1:0` and we learn the port from its `listening on HOST:PORT`
log line, so parallel test runs never race for a port. Its log is collected by a reader
thread (a full pipe would block the broker) and is printed when a test fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

_LISTENING = re.compile(r"listening on (\S+):(\d+)")


class BrokerProcess:
    def __init__(self, data_dir: Path, *overrides: str, env: dict[str, str] | None = None):
        self.data_dir = data_dir
        self.overrides = list(overrides)
        self.env = env or {}
        self.proc: subprocess.Popen[str] | None = None
        self.lines: list[str] = []
        self.host = ""
        self.port = 0
        self._port_hint = "0"

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 30.0) -> BrokerProcess:
        args = [
            sys.executable,
            "-m",
            "rafka_actors",
            "serve",
            "--listen",
            f"127.0.0.1:{self._port_hint}",
            "--data-dir",
            str(self.data_dir),
        ]
        for item in self.overrides:
            args += ["-o", item]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.proc = subprocess.Popen(
            args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env
        )
        ready = threading.Event()
        threading.Thread(target=self._pump, args=(self.proc, ready), daemon=True).start()
        if not ready.wait(timeout):
            self.kill()
            raise RuntimeError("broker did not start:\n" + self.log_text())
        # Restarts reuse the port so clients that cached it reconnect to the same address.
        self._port_hint = str(self.port)
        return self

    def _pump(self, proc: subprocess.Popen[str], ready: threading.Event) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            self.lines.append(line.rstrip("\n"))
            match = _LISTENING.search(line)
            if match and not ready.is_set():
                self.host, self.port = match.group(1), int(match.group(2))
                ready.set()

    def log_text(self) -> str:
        return "\n".join(self.lines[-200:])

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        time.sleep(0.05)  # let the reader thread drain the last lines
        return code

    def kill(self) -> int:
        return self.stop(signal.SIGKILL)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None
