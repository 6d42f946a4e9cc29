"""The record codecs of Kafka's batches (attributes bits 0-2), as Kafka's own writes them.

The broker opens a batch's records only to recompress them for a topic's `compression.type`,
and to read record timestamps for ListOffsets. Each codec is the format Kafka's Java broker
reads and writes, so every client reads what we write:

- gzip: a gzip stream (the standard library's zlib);
- snappy: read raw or in the xerial framing Java's producer writes; written xerial-framed, as
  Kafka's broker writes it (cramjam's raw snappy blocks);
- lz4: an LZ4 frame with independent 64 KiB blocks: Java's reader decompresses every block
  alone, so linked blocks (many libraries' default) would not be read (python-lz4, whose frame
  options say so; cramjam's frames link blocks);
- zstd: a zstd frame (cramjam).

Levels are Kafka's (compression.gzip.level, .lz4.level, .zstd.level). A codec number Kafka does
not have, or damaged data, raises `CodecError`.
"""

from __future__ import annotations

import struct
import zlib

import cramjam
import lz4.frame

__all__ = ["CODECS", "CodecError", "compress", "decompress"]

NONE, GZIP, SNAPPY, LZ4, ZSTD = range(5)
CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)  # version 1, compatible with 1
_XERIAL_BLOCK = 32 * 1024  # Java's SnappyOutputStream default
_INT32 = struct.Struct(">i")
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class CodecError(ValueError):
    """Records that cannot be decompressed (or a codec that does not exist)."""


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return zlib.decompress(data, _GZIP_WBITS)
        if codec == SNAPPY:
            return _snappy_decode(memoryview(data))
        if codec == LZ4:
            return bytes(lz4.frame.decompress(bytes(data)))
        if codec == ZSTD:
            return bytes(cramjam.zstd.decompress(data))
    except (zlib.error, RuntimeError, cramjam.DecompressionError, struct.error) as exc:
        raise CodecError(f"records do not decompress with codec {codec}: {exc}") from None
    raise CodecError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes | memoryview, level: int | None = None) -> bytes:
    """`data` compressed with `codec` at Kafka's `level` (None: Kafka's default)."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        deflate = zlib.compressobj(-1 if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        return deflate.compress(data) + deflate.flush()
    if codec == SNAPPY:
        return _snappy_encode(memoryview(data))
    if codec == LZ4:
        return bytes(
            lz4.frame.compress(
                bytes(data),
                compression_level=_lz4_level(9 if level is None else level),
                block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                block_linked=False,
                store_size=False,
            )
        )
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=3 if level is None else level))
    raise CodecError(f"unknown compression codec {codec}")


def _lz4_level(kafka_level: int) -> int:
    """Kafka's lz4 levels run 1 (fast) to 17 (high compression); python-lz4's 0-2 are fast."""
    return 0 if kafka_level <= 1 else min(kafka_level, 16)


def _snappy_decode(data: memoryview) -> bytes:
    if data[: len(_XERIAL_MAGIC)] != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(data))
    out = bytearray()
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        (size,) = _INT32.unpack_from(data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CodecError("truncated xerial snappy block")
        out += cramjam.snappy.decompress_raw(data[pos : pos + size])
        pos += size
    return bytes(out)


def _snappy_encode(data: memoryview) -> bytes:
    out = bytearray(_XERIAL_HEADER)
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += _INT32.pack(len(block)) + block
    return bytes(out)
