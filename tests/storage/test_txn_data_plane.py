"""The data plane's transactions on real partition logs: producer batches checked, markers
written as Kafka control batches, read_committed reads, and all of it rebuilt from the log
when the data dir is opened again (without a clean close, as after a SIGKILL)."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
import trio
from kio.schema.errors import ErrorCode

from rafka_actors.config import BrokerConfig
from rafka_actors.data_dir import _open_data_plane
from rafka_actors.storage.control_batches import marker_batch, read_marker
from rafka_actors.storage.data_plane import DataPlane
from rafka_actors.storage.partition_log import PartitionLog
from rafka_actors.storage.producer_recovery import SNAPSHOT_NAME, rebuild_producers
from rafka_actors.storage.producer_state import AbortedTxn
from rafka_actors.storage.record_batch import HEADER_SIZE, parse_header, split_batches

from ..batch_builder import build_batch, decode_batches
from ..disk_faults import failing_write

TXN = 0x10


def batch(pid: int, seq: int, n: int = 2, *, epoch: int = 0, txn: bool = True) -> list[memoryview]:
    records = [(None, f"{pid}-{seq + i}".encode()) for i in range(n)]
    raw = build_batch(
        records,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TXN if txn else 0,
    )
    return split_batches(raw)


def open_plane(path: Path) -> DataPlane:
    return DataPlane.open(path, segment_bytes=1 << 20)


def values(blob: bytes) -> list[bytes | None]:
    return [r.value for r in decode_batches(blob)]


def test_markers_are_kafka_control_batches() -> None:
    raw = marker_batch(9, 3, True, 7, 1234)
    header = parse_header(raw)
    assert (header.is_control, header.is_transactional) == (True, True)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (9, 3, -1)
    assert split_batches(raw)  # whole, with a good CRC
    (record,) = decode_batches(raw)
    assert record.key == struct.pack(">hh", 0, 1) and record.value == struct.pack(">hi", 0, 7)
    assert read_marker(raw[HEADER_SIZE:]) == (1, 7)
    assert read_marker(marker_batch(9, 3, False, 0, 1)[HEADER_SIZE:]) == (0, 0)


def test_read_committed_stops_at_the_lso_and_lists_aborted_transactions(tmp_path: Path) -> None:
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 1)
    assert data.append(topic, 0, batch(1, 0)).base_offset == 0  # pid 1: 0-1, aborted at 4
    assert data.append(topic, 0, batch(2, 0)).base_offset == 2  # pid 2: 2-3, committed at 5
    codes = trio.run(data.write_txn_markers, 0, 1, 0, False, [("t", 0), ("nope", 0), ("t", 7)])
    assert codes == {("t", 0): 0, ("nope", 0): 3, ("t", 7): 3}
    assert data.last_stable_offset(topic, 0) == 2  # pid 2 is still open
    records, aborted, _ = data.read_committed(topic, 0, 0, 1 << 20)
    assert values(records) == [b"1-0", b"1-1"] and aborted == [AbortedTxn(1, 0, 4, 2)]
    assert trio.run(data.write_txn_markers, 0, 2, 0, True, [("t", 0)]) == {("t", 0): 0}
    assert data.last_stable_offset(topic, 0) == 6 == topic.partitions[0].log_end_offset
    records, aborted, _ = data.read_committed(topic, 0, 2, 1 << 20)
    assert values(records)[:2] == [b"2-0", b"2-1"] and aborted == [AbortedTxn(1, 0, 4, 2)]
    assert data.read_committed(topic, 0, 5, 1 << 20)[1] == []  # past the aborted one
    # A repeated marker of an ended transaction writes nothing.
    assert trio.run(data.write_txn_markers, 0, 2, 0, True, [("t", 0)]) == {("t", 0): 0}
    assert topic.partitions[0].log_end_offset == 6
    data.close()


def test_state_survives_reopening_without_a_clean_close(tmp_path: Path) -> None:
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 2)
    assert data.append(topic, 0, batch(1, 0, txn=False)).base_offset == 0
    data.append(topic, 0, batch(3, 0))  # 2-3, aborted below
    data.append(topic, 1, batch(4, 0))  # open forever in partition 1
    trio.run(data.write_txn_markers, 0, 3, 0, False, [("t", 0)])  # marker at 4
    data.append(topic, 0, batch(3, 2))  # 5-6, open
    # No close: the files hold what the page cache holds after a SIGKILL.
    again = open_plane(tmp_path)
    t2 = again.topics.by_name("t")
    assert t2 is not None
    retry = again.append(t2, 0, batch(1, 0, txn=False))
    assert (retry.error, retry.base_offset) == (ErrorCode.none, 0)
    gap = again.append(t2, 0, batch(1, 5, txn=False))
    assert gap.error is ErrorCode.out_of_order_sequence_number
    assert again.append(t2, 0, batch(1, 2, txn=False)).base_offset == 7
    assert again.last_stable_offset(t2, 0) == 5
    assert again.last_stable_offset(t2, 1) == 0
    assert again.open_transactions(t2, 0) == {3: 5}
    assert again.read_committed(t2, 0, 0, 1 << 20)[1] == [AbortedTxn(3, 2, 4, 5)]
    fenced = trio.run(again.write_txn_markers, 0, 3, 1, True, [("t", 0)])
    assert fenced == {("t", 0): 0}  # a bumped epoch ends it and fences epoch 0
    assert again.append(t2, 0, batch(3, 4)).error is ErrorCode.invalid_producer_epoch
    assert again.last_stable_offset(t2, 0) == t2.partitions[0].log_end_offset
    data.close()
    again.close()


def test_produce_refusals(tmp_path: Path) -> None:
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 1)
    two = batch(1, 0) + batch(1, 2)
    assert data.append(topic, 0, two).error is ErrorCode.invalid_record
    raw = build_batch([(None, b"x")], attributes=TXN)  # transactional, no producer id
    assert data.append(topic, 0, split_batches(raw)).error is ErrorCode.invalid_record
    assert data.append(topic, 0, batch(1, 0)).error is ErrorCode.none
    assert data.append(topic, 0, batch(1, 2, txn=False)).error is ErrorCode.invalid_txn_state
    assert topic.partitions[0].log_end_offset == 2
    data.close()


def test_read_until_stops_before_the_given_offset(tmp_path: Path) -> None:
    data = DataPlane.open(tmp_path, segment_bytes=200)  # a few batches per segment
    topic = data.create_topic("t", 1)
    log = topic.partitions[0]
    for i in range(10):
        data.append(topic, 0, split_batches(build_batch([(None, b"%d" % i)] * 2)))
    assert len(list(log.directory.glob("*.log"))) > 2
    for start in range(20):
        for stop in range(start + start % 2, 21, 2):  # a batch's base offset, or the end
            blob, end = log.read_until(start, 1 << 20, stop)
            got = [r.offset for r in decode_batches(blob)]
            first = start - start % 2
            assert got == list(range(first, max(first, stop))), (start, stop)
            assert end == (got[-1] + 1 if got else start)
    blob, end = log.read_until(0, 1, 20)  # KIP-74: one whole batch
    assert [r.offset for r in decode_batches(blob)] == [0, 1] and end == 2
    data.close()


def state(plane: DataPlane, name: str = "t") -> object:
    topic = plane.topics.by_name(name)
    assert topic is not None
    producers = plane._producers_of((topic.topic_id, 0), topic.partitions[0])
    return producers.to_rows()


def fill(data: DataPlane) -> None:
    topic = data.topics.by_name("t") or data.create_topic("t", 1)
    data.append(topic, 0, batch(1, 0, txn=False))
    data.append(topic, 0, batch(2, 0))
    trio.run(data.write_txn_markers, 0, 2, 0, False, [("t", 0)])
    data.append(topic, 0, batch(3, 0))  # left open


def test_a_clean_shutdown_leaves_a_snapshot_the_next_start_replays_nothing_after(
    tmp_path: Path,
) -> None:
    data = open_plane(tmp_path)
    fill(data)
    live = state(data)
    data.close()
    snapshot = tmp_path / "topics" / "t" / "0" / SNAPSHOT_NAME
    assert snapshot.exists()
    log = PartitionLog.open(snapshot.parent)
    producers, covered = rebuild_producers(log)
    assert covered == log.log_end_offset == 7 and producers.to_rows() == live
    log.close()
    # After more appends and a SIGKILL: the snapshot, then the batches after it.
    again = open_plane(tmp_path)
    t2 = again.topics.by_name("t")
    assert t2 is not None
    again.append(t2, 0, batch(1, 2, txn=False))
    trio.run(again.write_txn_markers, 0, 3, 0, True, [("t", 0)])
    live = state(again)
    third = open_plane(tmp_path)  # `again` not closed
    assert state(third) == live and snapshot.exists()
    third.close()
    again.close()


def test_a_snapshot_that_does_not_match_the_log_is_dropped_for_a_full_replay(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = open_plane(tmp_path)
    fill(data)
    data.close()
    snapshot = tmp_path / "topics" / "t" / "0" / SNAPSHOT_NAME
    raw = bytearray(snapshot.read_bytes())
    raw[-1] ^= 1
    snapshot.write_bytes(bytes(raw))
    again = open_plane(tmp_path)
    assert "damaged (CRC)" in caplog.text and not snapshot.exists()
    live = state(again)
    again.close()  # writes a good one
    # The log cut below the snapshot (a torn tail after power loss): the snapshot describes
    # a batch the log no longer has.
    (segment,) = snapshot.parent.glob("*.log")
    os.truncate(segment, segment.stat().st_size - 10)
    third = open_plane(tmp_path)
    assert "no longer holds the batch ending at offset 7" in caplog.text
    assert not snapshot.exists()
    assert state(third) != live  # the open transaction's batch is gone with the tail
    t3 = third.topics.by_name("t")
    assert t3 is not None
    assert third.open_transactions(t3, 0) == {} and third.last_stable_offset(t3, 0) == 5
    third.close()


def test_expired_producers_are_forgotten_in_every_partition(tmp_path: Path) -> None:
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 2)
    old = split_batches(build_batch([(None, b"x")], producer_id=1, producer_epoch=0,
                                    base_sequence=0))  # fmt: skip
    assert data.append(topic, 0, old).base_offset == 0
    data.append(topic, 1, batch(2, 0))  # open transaction: never expires
    assert data.append(topic, 0, old).base_offset == 0  # a retry
    assert data.expire_producers(expiration_ms=86_400_000) == 1  # build_batch's 2023 stamps
    assert data.append(topic, 0, old).base_offset == 1  # unknown now: appended again
    assert data.open_transactions(topic, 1) == {2: 0}
    data.close()


def test_a_marker_the_disk_refuses_is_kafka_storage_error_and_ends_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 1)
    data.append(topic, 0, batch(1, 0))
    write = failing_write(under=str(tmp_path))
    monkeypatch.setattr(os, "write", write)
    codes = trio.run(data.write_txn_markers, 0, 1, 0, True, [("t", 0)])
    assert codes == {("t", 0): ErrorCode.kafka_storage_error.value}
    assert data.open_transactions(topic, 0) == {1: 0}  # still open: the coordinator retries
    write.fail = False  # type: ignore[attr-defined]
    data.close()


def test_the_lso_never_falls_below_the_log_start(tmp_path: Path) -> None:
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 1)
    data.append(topic, 0, batch(1, 0))  # 0-1, left open
    data.append(topic, 0, batch(2, 0, txn=False))  # 2-3
    assert data.last_stable_offset(topic, 0) == 0
    topic.partitions[0].advance_log_start(2)  # DeleteRecords past the open transaction
    assert data.last_stable_offset(topic, 0) == 2
    records, aborted, _ = data.read_committed(topic, 0, 2, 1 << 20)
    assert values(records) == [] and aborted == []  # the LSO is the log start: nothing yet
    data.close()


def test_a_marker_is_fsynced_before_it_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator records the transaction complete on NONE, so NONE means fsynced, not
    in the page cache; a failed fsync is KAFKA_STORAGE_ERROR, also on the retry."""
    data = open_plane(tmp_path)
    topic = data.create_topic("t", 2)
    data.append(topic, 0, batch(1, 0))
    data.append(topic, 1, batch(1, 0))
    synced: list[int] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr("rafka_actors.storage.data_plane.os.fsync", recording_fsync)
    codes = trio.run(data.write_txn_markers, 0, 1, 0, True, [("t", 0), ("t", 1)])
    assert codes == {("t", 0): 0, ("t", 1): 0}
    segments = {os.stat(p.directory / f"{0:020d}.log").st_ino for p in topic.partitions}
    assert set(synced) == segments

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    data.append(topic, 0, batch(2, 0))
    monkeypatch.setattr("rafka_actors.storage.data_plane.os.fsync", failing_fsync)
    refused = ErrorCode.kafka_storage_error
    assert trio.run(data.write_txn_markers, 0, 2, 0, True, [("t", 0)]) == {("t", 0): refused}
    monkeypatch.setattr("rafka_actors.storage.data_plane.os.fsync", real_fsync)
    # the marker is in the log, but not known durable: the retry is refused, never NONE
    assert trio.run(data.write_txn_markers, 0, 2, 0, True, [("t", 0)]) == {("t", 0): refused}
    # coordinator.log.fsync interval or never: Complete is not fsynced, nor are markers
    data.fsync_markers = False
    monkeypatch.setattr("rafka_actors.storage.data_plane.os.fsync", recording_fsync)
    synced.clear()
    data.append(topic, 1, batch(3, 0))
    assert trio.run(data.write_txn_markers, 0, 3, 0, False, [("t", 1)]) == {("t", 1): 0}
    assert synced == []
    data.close()


@pytest.mark.parametrize(("policy", "fsynced"), [("always", True), ("interval", False)])
def test_the_broker_fsyncs_markers_only_under_coordinator_log_fsync_always(
    tmp_path: Path, policy: str, fsynced: bool
) -> None:
    data = _open_data_plane(BrokerConfig(data_dir=tmp_path, coordinator_log_fsync=policy))
    assert data.fsync_markers is fsynced
    data.close()
