"""The record batch codecs Kafka uses, for the few places that look inside a batch.

A batch's attributes (bits 0-2) name how its records are compressed: 0 none, 1 gzip, 2 snappy,
3 lz4, 4 zstd. The broker stores batches as received, so it decompresses only to read records
(a compacted topic's keys, the log cleaner) and compresses only what the cleaner rewrites, in
the batch's own codec, in the framing Kafka's Java client writes:

- snappy: the xerial "snappy-java" stream (a magic header, then length-prefixed raw blocks),
  which Kafka's producer writes; librdkafka writes raw snappy, which Java reads too, and so
  do we;
- lz4: an LZ4 frame with independent blocks and no content size (Kafka's Lz4BlockInputStream
  refuses linked blocks);
- gzip and zstd: their standard formats.

cramjam (one native library for gzip, snappy and zstd) and lz4 (the frame options above,
which cramjam does not expose) do the work.
"""

from __future__ import annotations

import struct

import cramjam
import lz4.frame

__all__ = ["CODECS", "NONE", "UnknownCodec", "compress", "decompress"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODECS = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")


class UnknownCodec(ValueError):
    """Compression bits Kafka does not define (5-7): the batch is unusable."""


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """The records of a batch compressed with `codec` (ValueError if the data is damaged)."""
    if codec == NONE:
        return bytes(data)
    try:
        if codec == GZIP:
            return bytes(cramjam.gzip.decompress(bytes(data)))
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data))
        if codec == LZ4:
            return bytes(lz4.frame.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(bytes(data)))
    except (cramjam.DecompressionError, RuntimeError, struct.error) as exc:
        raise ValueError(f"{CODECS[codec]} data does not decompress: {exc}") from None
    raise UnknownCodec(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed with `codec`, framed as Kafka's Java producer frames it."""
    if codec == NONE:
        return data
    if codec == GZIP:
        return bytes(cramjam.gzip.compress(data))
    if codec == SNAPPY:
        blocks = [_XERIAL_HEADER]
        for start in range(0, len(data), _XERIAL_BLOCK):
            block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
            blocks += [_INT32.pack(len(block)), block]
        return b"".join(blocks)
    if codec == LZ4:
        return bytes(
            lz4.frame.compress(data, block_linked=False, content_checksum=False, store_size=False)
        )
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise UnknownCodec(f"unknown compression codec {codec}")


def _snappy_decompress(data: bytes) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return bytes(cramjam.snappy.decompress_raw(data))
    parts, pos = [], len(_XERIAL_HEADER)
    while pos < len(data):
        (size,) = _INT32.unpack_from(data, pos)
        pos += _INT32.size
        if size < 0 or pos + size > len(data):
            raise ValueError("truncated snappy-java block")
        parts.append(bytes(cramjam.snappy.decompress_raw(data[pos : pos + size])))
        pos += size
    return b"".join(parts)
