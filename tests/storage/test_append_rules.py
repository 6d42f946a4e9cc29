"""append_rules.prepare: what a topic's configs do to a batch on append (Kafka's LogValidator).
The header fields expected are those Kafka 4.3.1 stored for the same batches."""

from __future__ import annotations

import struct

from kio.schema.errors import ErrorCode

from rafka_actors.storage.append_rules import AppendRules, prepare
from rafka_actors.storage.batch_records import recompressed, record_stamps
from rafka_actors.storage.control_batches import marker_batch
from rafka_actors.storage.record_batch import check_batch, parse_header
from rafka_actors.storage.topic_configs import KAFKA_DEFAULTS
from tests.batch_builder import build_batch, fix_crc

NOW = 1_800_000_000_000
T = NOW - 60_000
BATCH = build_batch([(b"k", b"a"), (b"k", b"b"), (b"k", b"c")], base_timestamp=T,
                    timestamps=[T, T + 5, T + 10])  # fmt: skip


def rules(**configs: str) -> AppendRules:
    return AppendRules.of({k.replace("_", "."): v for k, v in configs.items()}, KAFKA_DEFAULTS)


def one(batch: bytes, applied: AppendRules) -> bytes:
    prepared = prepare([memoryview(batch)], applied, NOW)
    assert prepared.error is ErrorCode.none, prepared
    (out,) = prepared.batches
    check_batch(out, 0, len(out))  # whole, CRC right
    return bytes(out)


def test_the_defaults_keep_the_batch_itself() -> None:
    view = memoryview(BATCH)
    prepared = prepare([view], rules(), NOW)
    assert prepared.batches[0] is view and prepared.log_append_time == -1


def test_log_append_time_sets_the_bit_and_the_max_timestamp_only() -> None:
    prepared = prepare([memoryview(BATCH)], rules(message_timestamp_type="LogAppendTime"), NOW)
    assert prepared.log_append_time == NOW
    header = parse_header(prepared.batches[0])
    assert (header.attributes, header.base_timestamp, header.max_timestamp) == (0x08, T, NOW)
    assert bytes(prepared.batches[0])[61:] == BATCH[61:]


def test_a_producer_claiming_log_append_time() -> None:
    claimed = bytearray(BATCH)
    struct.pack_into(">h", claimed, 21, 0x08)
    claimed_batch = fix_crc(bytes(claimed))
    refused = prepare(
        [memoryview(claimed_batch)], rules(message_timestamp_type="LogAppendTime"), NOW
    )
    assert refused.error is ErrorCode.invalid_timestamp
    assert [i for i, _why in refused.record_errors] == [0, 1, 2]
    cleared = parse_header(one(claimed_batch, rules()))  # CreateTime: the claim is dropped
    assert (cleared.attributes, cleared.max_timestamp) == (0, T + 10)


def test_timestamps_out_of_bounds_fail_the_batch_with_per_record_errors() -> None:
    future = build_batch([(b"k", b"a"), (b"k", b"b")], base_timestamp=T,
                         timestamps=[T, NOW + 3_600_001])  # fmt: skip
    refused = prepare([memoryview(future)], rules(), NOW)
    assert refused.error is ErrorCode.invalid_timestamp
    (error,) = refused.record_errors
    assert error[0] == 1 and "out of range" in error[1]
    assert (
        prepare([memoryview(future)], rules(message_timestamp_after_max_ms="3600001"), NOW).error
        is ErrorCode.none
    )
    old = prepare([memoryview(BATCH)], rules(message_timestamp_before_max_ms="1000"), NOW)
    assert [i for i, _why in old.record_errors] == [0, 1, 2]
    assert (
        prepare([memoryview(future)], rules(message_timestamp_type="LogAppendTime"), NOW).error
        is ErrorCode.none
    )


def test_a_batch_is_recompressed_only_when_its_codec_differs() -> None:
    lz4 = recompressed(BATCH, 3, None)
    assert one(lz4, rules(compression_type="lz4")) == lz4
    for codec, name in ((0, "uncompressed"), (1, "gzip"), (2, "snappy"), (4, "zstd")):
        out = one(lz4, rules(compression_type=name))
        assert parse_header(out).attributes & 0x07 == codec
        assert list(record_stamps(out)) == list(record_stamps(BATCH))
    assert one(lz4, rules(compression_type="producer")) == lz4


def test_recompression_and_log_append_time_together() -> None:
    out = one(BATCH, rules(compression_type="gzip", message_timestamp_type="LogAppendTime"))
    header = parse_header(out)
    assert (header.attributes, header.base_timestamp, header.max_timestamp) == (0x09, T, NOW)


def test_an_uncompressed_control_batch_is_not_compressed() -> None:
    marker = marker_batch(7, 0, True, 0, NOW)
    assert one(marker, rules(compression_type="gzip")) == marker


def test_a_batch_grown_past_max_message_bytes_is_too_large() -> None:
    big = recompressed(build_batch([(b"k", b"x" * 5000)]), 1, None)
    applied = rules(compression_type="uncompressed", max_message_bytes=str(len(big) + 100))
    assert prepare([memoryview(big)], applied, NOW).error is ErrorCode.message_too_large


def test_values_stored_before_configs_were_checked_count_as_unset() -> None:
    legacy = rules(compression_type="GZIP", compression_gzip_level="max", max_message_bytes="x")
    assert (legacy.codec, legacy.level, legacy.max_message_bytes) == (None, None, 1048588)
