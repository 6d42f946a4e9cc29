"""What transactions cost the data plane: the cost read_committed adds to a Fetch, and the
start-up cost of rebuilding producer state from the partition logs.

fetch: the gateway's frame-to-reply step (`connection.answer`, as bench/handler_cost.py) for
Fetch v11 requests of `--fetch-bytes` at offsets spread over two partitions of the same
records (`--records`, 10 per batch): one written by plain producers, one by transactional
ones (10 records per transaction, one batch each, from 8 producers in turn, every 10th
transaction aborted, a marker after each). Each partition is fetched read_uncommitted and
read_committed; every answer is checked to hold records.

startup: `--batches` one-record batches written to one partition, then the time to open it
again (PartitionLog.open: the header scan that rebuilds the offset index) and the time of
the producer-state replay that follows (producer_recovery.rebuild_producers), for batches of
plain and of idempotent producers; then, for the idempotent ones, the rebuild from the
snapshot a clean shutdown leaves.

    .venv/bin/python bench/txn_data_plane.py [--records 200000] [--requests 3000]
        [--rounds 5] [--fetch-bytes 65536] [--batches 500000]
"""

from __future__ import annotations

import argparse
import datetime
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HYPOTHESIS_NO_PLUGINS", "1")  # as in handler_cost.py

import trio
from kio.schema.fetch.v11 import request as fetch_req
from kio.schema.types import TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from rafka_actors.config import BrokerConfig
from rafka_actors.gateway.apis import API_TABLE
from rafka_actors.gateway.connection import answer
from rafka_actors.gateway.context import BrokerContext, ConnectionInfo
from rafka_actors.protocol.codec import encode_request
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.partition_log import PartitionLog
from rafka_actors.storage.producer_recovery import rebuild_producers, write_snapshot
from rafka_actors.storage.record_batch import split_batches

sys.path.insert(0, str(Path(__file__).parent.parent))
from tests.batch_builder import build_batch

PER_BATCH = 10
PRODUCERS = 8
TXN = 0x10


def _fill(data: DataPlane, records: int) -> None:
    plain = data.create_topic("plain", 1)
    txn = data.create_topic("txn", 1)
    values: list[tuple[bytes | None, bytes | None]] = [(None, b"x" * 100)] * PER_BATCH
    seqs = [0] * PRODUCERS
    for i in range(records // PER_BATCH):
        data.append(plain, 0, split_batches(build_batch(values)))
        pid = i % PRODUCERS
        raw = build_batch(values, producer_id=pid, producer_epoch=0, base_sequence=seqs[pid],
                          attributes=TXN)  # fmt: skip
        seqs[pid] += PER_BATCH
        assert data.append(txn, 0, split_batches(raw)).error == 0
        trio.run(data.write_txn_markers, 0, pid, 0, i % 10 != 9, [("txn", 0)])


def _frame(topic: str, offset: int, isolation: int, fetch_bytes: int) -> bytes:
    partition = fetch_req.FetchPartition(
        partition=i32(0), fetch_offset=i64(offset), partition_max_bytes=i32(fetch_bytes)
    )
    request = fetch_req.FetchRequest(
        max_wait=i32Timedelta.parse(datetime.timedelta(0)),
        min_bytes=i32(0),
        max_bytes=i32(fetch_bytes),
        isolation_level=i8(isolation),
        topics=(fetch_req.FetchTopic(topic=TopicName(topic), partitions=(partition,)),),
        forgotten_topics_data=(),
    )
    return encode_request(request, 1, "bench")[4:]


async def _fetch_costs(data: DataPlane, args: argparse.Namespace, data_dir: Path) -> None:
    ctx = BrokerContext(BrokerConfig(data_dir=data_dir), data, "127.0.0.1", 9092, API_TABLE)
    conn = ConnectionInfo("127.0.0.1", 1)
    variants: dict[str, list[bytes]] = {}
    for topic in ("plain", "txn"):
        topic_data = data.topics.by_name(topic)
        assert topic_data is not None
        # Start far enough from the end that every Fetch fills its bytes.
        span = topic_data.partitions[0].log_end_offset - 2 * args.fetch_bytes // 100
        if span <= 0:
            raise SystemExit("--records too few for --fetch-bytes")
        offsets = [k * 7919 % span for k in range(args.requests)]
        for isolation, label in ((0, "read_uncommitted"), (1, "read_committed")):
            frames = [_frame(topic, o, isolation, args.fetch_bytes) for o in offsets]
            variants[f"{topic:5} {label:16}"] = frames
    costs: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.rounds):  # interleaved, so a busy machine slows each alike
        for name, frames in variants.items():
            start = time.perf_counter()
            for frame in frames:
                reply = await answer(frame, ctx, API_TABLE, conn)
                if reply is None or len(reply) < args.fetch_bytes // 2:
                    raise SystemExit(f"{name}: an answer without records")
            costs[name].append((time.perf_counter() - start) / len(frames) * 1e6)
    for name, values in costs.items():
        values.sort()
        print(
            f"fetch {name}: best {values[0]:6.1f} us, median {statistics.median(values):6.1f} us"
            f" per Fetch of {args.fetch_bytes:,} bytes"
        )


def _startup(batches: int, data_dir: Path, *, producers: bool) -> None:
    log = PartitionLog.open(data_dir / ("idempotent" if producers else "plain"))
    for i in range(batches):
        if producers:
            raw = build_batch([(None, b"x" * 100)], producer_id=i % 1000, producer_epoch=0,
                              base_sequence=i // 1000)  # fmt: skip
        else:
            raw = build_batch([(None, b"x" * 100)])
        log.append(split_batches(raw))
    log.close()
    start = time.perf_counter()
    log = PartitionLog.open(log.directory)
    opened = time.perf_counter()
    state, _ = rebuild_producers(log)  # no snapshot: the whole log is replayed
    rebuilt = time.perf_counter()
    kind = "idempotent" if producers else "plain"
    print(
        f"startup {kind:10} {batches:,} batches: PartitionLog.open {opened - start:.3f} s, "
        f"producer-state replay {rebuilt - opened:.3f} s "
        f"({(rebuilt - opened) / batches * 1e6:.2f} us per batch; {len(state.entries)} producers)"
    )
    if producers:
        write_snapshot(log, state)  # as a clean shutdown leaves it
        start = time.perf_counter()
        again, covered = rebuild_producers(log)
        took = time.perf_counter() - start
        assert covered == log.log_end_offset and len(again.entries) == len(state.entries)
        print(f"startup {kind:10} {batches:,} batches: from the snapshot {took:.3f} s")
    log.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--fetch-bytes", type=int, default=65_536)
    parser.add_argument("--batches", type=int, default=500_000)
    args = parser.parse_args()
    print(f"# {shlex.join(['bench/txn_data_plane.py', *sys.argv[1:]])}")
    with tempfile.TemporaryDirectory() as tmp:
        data = DataPlane.open(Path(tmp), segment_bytes=1 << 30)
        try:
            _fill(data, args.records)
            trio.run(_fetch_costs, data, args, Path(tmp))
        finally:
            data.close()
    for producers in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            _startup(args.batches, Path(tmp), producers=producers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
