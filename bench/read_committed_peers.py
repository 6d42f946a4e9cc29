"""The cost read_committed adds to a Fetch, over loopback, side by side with the peers that
serve transactions (tansu and noida-db, see harness/brokers.py).

Each broker gets two one-partition topics of `--records` 100-byte records in batches of 10:
`plain` from a plain producer, and `txn` from a transactional one, with one transaction per
batch and one transaction in 10 aborted. Then one raw connection reads each topic from
offset 0 to its end, `--rounds` times: Fetch v11 requests of `--fetch-bytes`, one at a time,
first read_uncommitted, then read_committed. The bench prints the time to read the topic
(best round; comparable across brokers, which size their answers differently: noida-db
answers with the whole partition whatever the limit), the microseconds per Fetch, and the
records a read_committed client keeps, which checks the broker's aborted list.

The peers are filled with confluent-kafka's transactional producer. rafka-actors' data dir
is filled before it starts, through its data plane in process: the same batches, and the
markers its transaction coordinator would write. That way the bench needs nothing beyond the
data plane.

    .venv/bin/python bench/read_committed_peers.py [--brokers rafka-actors,tansu,noida-db]
        [--records 20000] [--rounds 5] [--fetch-bytes 65536]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import socket
import struct
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")  # as in handler_cost.py

import confluent_kafka
import confluent_kafka.admin
import trio
from kio.schema.fetch.v11 import request as fetch_req
from kio.schema.fetch.v11 import response as fetch_resp
from kio.schema.types import TopicName
from kio.serial import entity_reader
from kio.serial.errors import SerialError as KioError
from kio.static.primitive import i8, i32, i32Timedelta, i64

from harness.brokers import Broker, BrokerUnavailable, running
from rafka_actors.protocol.codec import encode_request
from rafka_actors.storage.control_batches import ABORT, read_marker
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.record_batch import HEADER_SIZE, parse_header, split_batches

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.batch_builder import build_batch

PER_TXN = 10
VALUE = b"x" * 100
TXN = 0x10


def _aborted(i: int) -> bool:
    return i % 10 == 9


def _fill_rafka(data_dir: Path, records: int) -> None:
    data = DataPlane.open(data_dir, segment_bytes=1 << 30)
    try:
        plain, txn = data.create_topic("plain", 1), data.create_topic("txn", 1)
        values: list[tuple[bytes | None, bytes | None]] = [(None, VALUE)] * PER_TXN
        for i in range(records // PER_TXN):
            data.append(plain, 0, split_batches(build_batch(values)))
            raw = build_batch(values, producer_id=1, producer_epoch=0,
                              base_sequence=i * PER_TXN, attributes=TXN)  # fmt: skip
            data.append(txn, 0, split_batches(raw))
            trio.run(data.write_txn_markers, 0, 1, 0, not _aborted(i), [("txn", 0)])
    finally:
        data.close()


def _fill_peer(bootstrap: str, records: int) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    topics = [confluent_kafka.admin.NewTopic(t, 1, 1) for t in ("plain", "txn")]
    futures = admin.create_topics(topics)
    for future in futures.values():
        future.result(timeout=30)
    plain = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 50, "batch.num.messages": PER_TXN}
    )
    for _ in range(records):
        plain.produce("plain", VALUE, partition=0)
        plain.poll(0)
    assert plain.flush(60) == 0
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": "bench-read-committed",
         "linger.ms": 50}
    )  # fmt: skip
    producer.init_transactions(30)
    for i in range(records // PER_TXN):
        producer.begin_transaction()
        for _ in range(PER_TXN):
            producer.produce("txn", VALUE, partition=0)
        if _aborted(i):
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)


class _Connection:
    def __init__(self, bootstrap: str) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=30)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.read_response = entity_reader(fetch_resp.FetchResponse)

    def _read(self, n: int) -> bytes:
        chunks, left = [], n
        while left:
            chunk = self.sock.recv(left, socket.MSG_WAITALL)  # may stop short of a big frame
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def fetch(self, topic: str, offset: int, isolation: int, fetch_bytes: int) -> Any:
        partition = fetch_req.FetchPartition(
            partition=i32(0), fetch_offset=i64(offset), partition_max_bytes=i32(fetch_bytes)
        )
        request = fetch_req.FetchRequest(
            # min_bytes 1 and a wait: tansu answers a zero wait with no partitions at all
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=500)),
            min_bytes=i32(1),
            max_bytes=i32(fetch_bytes),
            isolation_level=i8(isolation),
            topics=(fetch_req.FetchTopic(topic=TopicName(topic), partitions=(partition,)),),
            forgotten_topics_data=(),
        )
        self.sock.sendall(encode_request(request, 1, "bench"))
        (size,) = struct.unpack(">i", self._read(4))
        frame = self._read(size)
        response, _ = self.read_response(frame, 4)  # after the correlation id (header v0)
        return response.responses[0].partitions[0]


def _kept(
    blob: bytes, aborted: list[tuple[int, int]], state: set[int], pending: list[tuple[int, int]]
) -> int:
    """Records a read_committed client keeps of `blob` (Kafka's consumer algorithm)."""
    pending.extend(sorted(aborted, key=lambda t: t[1]))
    kept, pos = 0, 0
    while pos + HEADER_SIZE <= len(blob):
        header = parse_header(blob, pos)
        if pos + header.size > len(blob):
            break  # a partial batch at the end of a size-limited answer
        if header.producer_id >= 0:  # as the Java consumer: markers consume the list too
            while pending and pending[0][1] <= header.last_offset:
                state.add(pending.pop(0)[0])
        if header.is_control:
            marker = read_marker(bytes(blob[pos + HEADER_SIZE : pos + HEADER_SIZE + 32]))
            if marker is not None and marker[0] == ABORT:
                state.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in state):
            kept += header.records_count
        pos += header.size
    return kept


def _read_all(conn: _Connection, topic: str, isolation: int, fetch_bytes: int) -> tuple[int, int]:
    """(Fetch requests, records a client keeps) to read `topic` from 0 to its end."""
    offset = fetches = kept = 0
    state: set[int] = set()
    pending: list[tuple[int, int]] = []
    while True:
        part = conn.fetch(topic, offset, isolation, fetch_bytes)
        fetches += 1
        blob = bytes(part.records or b"")
        aborted = [(a.producer_id, a.first_offset) for a in part.aborted_transactions or ()]
        kept += _kept(blob, aborted, state, pending)
        pos, last = 0, None
        while pos + HEADER_SIZE <= len(blob):
            header = parse_header(blob, pos)
            if pos + header.size > len(blob):
                break
            last = header
            pos += header.size
        if last is None:
            raise SystemExit(f"{topic}: no whole batch at offset {offset}")
        offset = last.last_offset + 1
        if offset >= (part.last_stable_offset if isolation else part.high_watermark):
            return fetches, kept


def _measure(name: str, bootstrap: str, args: argparse.Namespace) -> None:
    conn = _Connection(bootstrap)
    for topic in ("plain", "txn"):
        for isolation, label in ((0, "read_uncommitted"), (1, "read_committed")):
            best = float("inf")
            fetches = kept = 0
            try:
                for _ in range(args.rounds):
                    start = time.perf_counter()
                    fetches, kept = _read_all(conn, topic, isolation, args.fetch_bytes)
                    best = min(best, time.perf_counter() - start)
            except (KioError, OSError, ValueError) as exc:
                print(f"{name:12} {topic:5} {label:16}: not measured: {type(exc).__name__} {exc}")
                conn.sock.close()
                conn = _Connection(bootstrap)
                continue
            keeps = f"; a read_committed client keeps {kept:,} records" if isolation else ""
            print(
                f"{name:12} {topic:5} {label:16}: {best * 1e3:7.1f} ms to read it all, "
                f"{best / fetches * 1e6:7.1f} us per Fetch ({fetches} Fetches{keeps})"
            )
    conn.sock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--brokers", default="rafka-actors,tansu,noida-db")
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fetch-bytes", type=int, default=65_536)
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/read_committed_peers.py', *sys.argv[1:]])}")
    expected = args.records - args.records // PER_TXN // 10 * PER_TXN
    print(f"# a read_committed client should keep {args.records:,} plain, {expected:,} txn")
    for kind in args.brokers.split(","):
        try:
            if kind == "rafka-actors":
                with tempfile.TemporaryDirectory() as tmp:
                    _fill_rafka(Path(tmp), args.records)
                    with running(Broker(kind, kind), Path(tmp)) as target:
                        _measure(kind, target.bootstrap, args)
            else:
                with running(Broker(kind, kind)) as target:
                    _fill_peer(target.bootstrap, args.records)
                    _measure(kind, target.bootstrap, args)
        except BrokerUnavailable as exc:
            print(f"{kind}: not run: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
