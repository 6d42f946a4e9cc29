"""Debian's `prometheus` binary, run against a broker's metrics endpoint for one test module.

It scrapes every second into a temp dir and answers PromQL on a free loopback port; `query`
is its HTTP API's instant query. A test that needs it skips when the binary is absent
(`.ci/run` installs it from Debian's archive).
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

BINARY = shutil.which("prometheus")
SKIP_REASON = "the prometheus binary is absent (apt-get install prometheus; .ci/run does)"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrometheusProcess:
    def __init__(self, workdir: Path, target: str) -> None:
        assert BINARY is not None
        self.port = free_port()
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: rafka\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.log = (workdir / "prometheus.log").open("w")
        self.proc = subprocess.Popen(
            [
                BINARY,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        self.workdir = workdir

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("prometheus exited:\n" + self.log_text())
            try:
                with urllib.request.urlopen(self.url("/-/ready"), timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise RuntimeError("prometheus not ready:\n" + self.log_text())

    def query(self, promql: str) -> list[dict[str, Any]]:
        """The instant vector (or scalar, as one sample) of `promql` now."""
        url = self.url("/api/v1/query?" + urllib.parse.urlencode({"query": promql}))
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        data = body["data"]
        if data["resultType"] in ("scalar", "string"):
            return [{"metric": {}, "value": data["result"]}]
        result: list[dict[str, Any]] = data["result"]
        return result

    def wait_for(
        self, promql: str, check: Any = bool, timeout: float = 30.0
    ) -> list[dict[str, Any]]:
        """Poll `promql` until `check(result)` holds; return that result."""
        deadline = time.monotonic() + timeout
        result: list[dict[str, Any]] = []
        while time.monotonic() < deadline:
            result = self.query(promql)
            if check(result):
                return result
            time.sleep(0.25)
        raise AssertionError(f"{promql}: still {result} after {timeout}s")

    def log_text(self) -> str:
        self.log.flush()
        return (self.workdir / "prometheus.log").read_text()[-4000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
