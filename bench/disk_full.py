"""The broker on a full disk: its RSS, its log lines and its recovery (issue 47).

The data dir is put on a small tmpfs (needs root); a confluent-kafka producer sends 1 KB
records at about 800/s; after a few healthy seconds a ballast file fills the disk, and every
two seconds the broker's RSS, the records acknowledged and the log lines written since are
printed; then the ballast is deleted and the records delivered in the next 4 s are counted.

    sudo .venv/bin/python bench/disk_full.py [--seconds 30] [--size 8m]

Session 35, 2-vCPU VM: healthy 49 MB; disk full for 30 s: 49-54 MB and 5 log lines (before
the storage failures were answers without reference cycles: 169 MB and 2 590 lines).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.broker_process import BrokerProcess


def rss_mb(broker: BrokerProcess) -> float:
    assert broker.proc is not None
    with open(f"/proc/{broker.proc.pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def fill(disk: Path) -> Path:
    ballast = disk / "ballast"
    with open(ballast, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError:
            pass
    return ballast


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="how long the disk is full")
    parser.add_argument("--size", default="8m", help="the tmpfs size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        disk = Path(tmp)
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={args.size}", "tmpfs", tmp], check=True
        )
        try:
            run(disk, args.seconds)
        finally:
            subprocess.run(["umount", "-l", tmp], check=False)


def run(disk: Path, seconds: float) -> None:
    broker = BrokerProcess(disk / "data", "num.partitions=2").start()
    acked = [0]

    def delivered(err: Any, _msg: Any) -> None:
        if err is None:
            acked[0] += 1

    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5, "log_level": 0})
    stop = threading.Event()

    def produce() -> None:
        while not stop.is_set():
            for _ in range(80):
                try:
                    producer.produce("t", b"v" * 1000, on_delivery=delivered)
                except BufferError:
                    pass
            producer.poll(0)
            time.sleep(0.1)

    sender = threading.Thread(target=produce)
    sender.start()
    try:
        time.sleep(3)
        print(f"healthy: rss {rss_mb(broker):.0f} MB, acked {acked[0]}", flush=True)
        ballast = fill(disk)
        lines = len(broker.lines)
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            time.sleep(2)
            print(
                f"full {time.monotonic() - start:4.0f}s: rss {rss_mb(broker):.0f} MB, "
                f"acked {acked[0]}, log lines {len(broker.lines) - lines}",
                flush=True,
            )
        os.unlink(ballast)
        before = acked[0]
        time.sleep(4)
        print(f"ballast deleted: +{acked[0] - before} acked in 4 s, rss {rss_mb(broker):.0f} MB")
    finally:
        stop.set()
        sender.join()
        producer.flush(10)
        broker.stop()
    print("\n".join(broker.lines[-12:]))


if __name__ == "__main__":
    main()
