"""The coordinator log's segment files: framing, recovery, appends and crash-safe compaction.

Layout
------
``<data_dir>/coordinator/`` holds segment files named ``{first_sequence:020d}.log``, where an
entry's sequence number is its position in the log's history. Only the newest ("active") segment
is appended to; the others are sealed and never change, except by compaction replacing them
whole. Each entry is framed as ``u32 length | u32 CRC-32C of payload | payload`` (big-endian);
this module never looks inside a payload except through the ``decode`` / ``key_of`` functions it
is given.

Appends and durability
----------------------
`append` writes all the frames of a batch with one ``os.pwrite`` at the end of the written
frames (so a group commit costs one system call), leaving them in the page cache: they survive
the death of the process, not of the machine. `fsync` makes them durable. When a batch would push
the active segment past ``segment_bytes`` it is fsynced, sealed, and a new one started. A failed
write is cut back off the file so the next append starts on a frame boundary; a failed fsync
poisons the log (`CoordinatorLogFailed`): after one, the kernel may have dropped dirty pages, so
no later write can be acknowledged as durable.

Preallocation: the active segment's file is grown ahead of the writes, ``preallocate_bytes`` at
a time (``posix_fallocate``), so that most fsyncs find the file's size unchanged and flush only
data, not the inode through the journal. On ext4 (2-vCPU VM, session 15) a 120-byte write and
fsync took 142 us at the median when appending and 92 us inside preallocated space. A sealed or
closed segment is cut back to its frames first; a crash leaves the unused space as zeros after
the last frame, which recovery drops without a warning (it is not damage).

Recovery
--------
`open` replays every segment in order, handing each payload to ``decode`` then ``apply``. A frame
is damaged if its header is incomplete, its length is zero or runs past the end of the file, its
CRC does not match, or ``decode`` raises ValueError. What happens next depends on whether any
good frame (header and CRC check out) follows it: if none does and the segment is the last, the
damage is a torn tail, what a crash leaves, and the file is truncated there with a warning (or
quietly, if all of it is zeros: preallocated space never written). Any
other damage means acknowledged data was hurt, and `CorruptCoordinatorLog` names the file and
byte; with ``skip_corruption`` the damaged bytes are skipped instead (up to the next good frame),
with a warning naming what they held (the groups and offsets, as far as the damaged frames still
decode). Other exceptions from ``decode`` (a record from a newer broker) are fatal.
Leftover ``*.compacting`` files of an interrupted compaction are deleted. `open` only reads:
cutting the tail, deleting the leftovers, creating a first segment and opening the active one
for appends are handed to a `StartupWrites` (startup_writes.py), which the broker applies once
every log checked out; the log takes appends once they are made.

Replay in bulk: given a `Bulk` (a regular expression for payloads the caller can take in bulk,
and where to send runs of them), `open` splits each segment, a few MB at a time, with one
``re.split`` into recognised frames and the gaps between them, checks the lengths and CRCs of a
whole chunk's frames at once, walks each gap strictly (every frame in it must check out and
decode, ending exactly where the next recognised frame starts) and hands the runs over in log
order. A recognised "frame" is only trusted once everything before it is: so each one starts on
a true frame boundary, and a match inside some other frame's payload fails its gap's walk. At the
first thing that does not check out, the frames before it are applied and the ordinary walk
above takes over from there, so damage is handled exactly as without `Bulk`.

Limits: hunting for a good frame after damage is a byte-by-byte scan; and a power loss under a
policy that does not fsync every batch, on a filesystem that can persist a later page of a file
without an earlier one, can leave a hole followed by good frames: that is reported as corruption
(reopen with ``skip_corruption``), not silently truncated.

Compaction
----------
`compact_sealed` rewrites the sealed segments (all of them, never a subset, so no older copy of a
key can hide outside the rewrite) keeping an entry only if (1) no later sealed entry has the same
key, (2) no later tombstone has a key that is a proper prefix of its key (a group tombstone
deletes the group's offsets) and (3) it is not a tombstone older than the retention delay. A
sealed segment's mtime is the age of its tombstones (it was last written when sealed) and is
carried over to its rewritten file. Consecutive outputs are merged while they fit in
``segment_bytes`` (at most one segment with tombstones per file, so no tombstone's age is reset
by a merge); empty outputs delete their segment, and an unchanged one is left alone.

Each output is written to ``<first source>.log.compacting``, fsynced, renamed over its first
source, then the other sources are deleted; every directory change is fsynced before the next,
and the changes go oldest segment first. A crash at any point leaves a prefix of the segments
compacted and the rest original, which replays to the same state: every entry dropped from the
prefix is superseded by an entry that is still there (in the prefix, or in an original later
segment), and replaying an original segment again after the merged copy of it is idempotent.
Only sealed segments are read, so compaction runs beside the appends: `compact_sealed` in a
worker thread, where the list of segments is the only shared state and is changed under a
lock, or `compact_sealed_in_child` in a child process (storage/compaction_child.py), after
which this process takes the sealed segments the child reports. The broker uses the child:
a 64 MiB segment takes seconds to compact, and a thread would contend with the event loop
for the GIL all that time (with the mypyc build of the time, which held it throughout, a
client's committed() took up to 2.2 s during one; 9-17 ms with the child).
"""

from __future__ import annotations

import json
import logging
import os
import re
import struct
import subprocess
import sys
import threading
from array import array
from collections.abc import Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from crc32c import crc32c

from .fsutil import fsync_dir
from .startup_writes import StartupWrites

__all__ = [
    "DEFAULT_PREALLOCATE_BYTES",
    "DEFAULT_SEGMENT_BYTES",
    "Bulk",
    "CompactionStats",
    "CoordinatorLogError",
    "CoordinatorLogFailed",
    "CoordinatorSegments",
    "CorruptCoordinatorLog",
]

log = logging.getLogger(__name__)

DEFAULT_SEGMENT_BYTES = 64 << 20
DEFAULT_PREALLOCATE_BYTES = 1 << 20
SUFFIX = ".log"
TEMP_SUFFIX = ".compacting"
_HEADER = struct.Struct(">II")
_HEADER_SIZE = _HEADER.size
_WRITE_FLAGS = os.O_WRONLY | os.O_CLOEXEC  # no O_APPEND: writes go to the end of the frames
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC

T = TypeVar("T")
KeyOf = Callable[[bytes], tuple[tuple[Hashable, ...], bool]]


class CoordinatorLogError(Exception):
    """An I/O failure or damage in the coordinator log."""


class CorruptCoordinatorLog(CoordinatorLogError):
    def __init__(self, path: Path, position: int, reason: str) -> None:
        super().__init__(f"{path}: damaged frame at byte {position}: {reason}")
        self.path = path
        self.position = position


class CoordinatorLogFailed(CoordinatorLogError):
    """An fsync failed: what was written may be lost, so nothing more is accepted."""


@dataclass(frozen=True, slots=True)
class CompactionStats:
    segments_before: int = 0
    segments_after: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    entries_before: int = 0
    entries_after: int = 0
    files_written: int = 0


@dataclass(slots=True, eq=False)  # identity: the sealed list is searched by object
class _Segment:
    first_sequence: int
    path: Path
    size: int
    mtime_ns: int = 0
    clean: bool = False  # the output of a compaction, not changed since
    tombstones: int = 0  # tombstones it holds (known for clean segments only)


def _segment_on_disk(first_sequence: int, path: Path) -> _Segment:
    """The segment as its file is now (not known to be clean: no compaction vouches for it)."""
    stat = path.stat()
    return _Segment(first_sequence, path, stat.st_size, stat.st_mtime_ns)


def _segment_name(first_sequence: int) -> str:
    return f"{first_sequence:020d}{SUFFIX}"


def _write_all(fd: int, data: bytes) -> None:
    view, written = memoryview(data), 0
    while written < len(view):  # a regular file only writes short on huge buffers
        written += os.write(fd, view[written:] if written else view)


def _pwrite_all(fd: int, data: bytes, offset: int) -> None:
    view, written = memoryview(data), 0
    while written < len(view):
        written += os.pwrite(fd, view[written:] if written else view, offset + written)


def _unwritten(data: bytes, pos: int) -> bool:
    """Whether everything from ``pos`` on is zeros: preallocated space a crash left unused."""
    return data.count(0, pos) == len(data) - pos


def _frames(payloads: Sequence[bytes]) -> bytes:
    parts: list[bytes] = []
    for payload in payloads:
        parts += (_HEADER.pack(len(payload), crc32c(payload)), payload)
    return b"".join(parts)


def _check_frame(data: bytes, pos: int) -> tuple[int, str | None]:
    """(end of the frame at ``pos``, None) if its header and CRC check out, else (pos, why)."""
    if pos + _HEADER_SIZE > len(data):
        return pos, "incomplete frame header"
    length, crc = _HEADER.unpack_from(data, pos)
    end = pos + _HEADER_SIZE + length
    if length == 0:
        return pos, "zero-length frame"
    if end > len(data):
        return pos, f"frame of {length} bytes runs past the end of the file"
    if crc32c(memoryview(data)[pos + _HEADER_SIZE : end]) != crc:
        return pos, "CRC mismatch"
    return end, None


def _next_good_frame(data: bytes, pos: int) -> int | None:
    """The first position after ``pos`` where a frame checks out, if any."""
    if pos + _HEADER_SIZE <= len(data):  # a bad payload with a sound length: try past it first
        declared = pos + _HEADER_SIZE + _HEADER.unpack_from(data, pos)[0]
        if declared < len(data) and _check_frame(data, declared)[1] is None:
            return declared
    unpack, limit = _HEADER.unpack_from, len(data) - _HEADER_SIZE
    for p in range(pos + 1, limit):
        length = unpack(data, p)[0]
        if 0 < length <= limit - p and _check_frame(data, p)[1] is None:
            return p
    return None


class _Walk(Generic[T]):
    """The good frames of one segment as (start, end, decoded), under the damage policy."""

    def __init__(
        self,
        path: Path,
        data: bytes,
        decode: Callable[[bytes], T],
        *,
        last: bool,
        skip: bool,
        start: int = 0,  # a frame boundary
        describe: Callable[[T], str] | None = None,
    ) -> None:
        self.path, self.data, self.decode = path, data, decode
        self.last, self.skip, self.start = last, skip, start
        self.describe = describe  # names what a skipped entry held, for the warning
        self.torn_at: int | None = None  # where a torn tail starts (last segment only)
        self.reason = ""
        self.unwritten = False  # the tail is preallocated space, not a torn frame

    def __iter__(self) -> Iterator[tuple[int, int, T]]:
        pos, data = self.start, self.data
        while pos < len(data):
            end, why = _check_frame(data, pos)
            if why is None:
                try:
                    value = self.decode(data[pos + _HEADER_SIZE : end])
                except ValueError as exc:
                    why = f"undecodable payload: {exc}"
                except Exception as exc:
                    exc.add_note(f"in {self.path} at byte {pos}")
                    raise
                else:
                    yield pos, end, value
                    pos = end
                    continue
            if self.last and _unwritten(data, pos):  # no frame can follow: spare the scan
                self.torn_at, self.reason, self.unwritten = pos, "unwritten", True
                return
            resume = _next_good_frame(data, pos)
            if resume is None and self.last:
                self.torn_at, self.reason = pos, why
                return
            if not self.skip:
                raise CorruptCoordinatorLog(self.path, pos, why)
            stop = len(data) if resume is None else resume
            log.warning(
                "%s: skipping damaged bytes %d..%d: %s; lost: %s",
                self.path,
                pos,
                stop,
                why,
                self._lost(pos, stop),
            )
            pos = stop

    def _lost(self, pos: int, stop: int) -> str:
        """What the skipped bytes held, as far as their frames still decode (a flipped byte
        fails the CRC, but the payload may well still say whose records they were)."""
        names: list[str] = []
        unknown = 0
        data = self.data
        while pos + _HEADER_SIZE <= stop:
            length = _HEADER.unpack_from(data, pos)[0]
            end = pos + _HEADER_SIZE + length
            if length == 0 or end > stop:
                break
            try:
                value = self.decode(data[pos + _HEADER_SIZE : end])
            except Exception:
                unknown += 1
            else:
                names.append(self.describe(value) if self.describe else "an entry")
            pos = end
        if pos < stop:
            unknown += 1
        if unknown:
            names.append(f"{unknown} entr{'y' if unknown == 1 else 'ies'} whose groups are unknown")
        return "; ".join(names)


def _list_segments(directory: Path) -> tuple[list[tuple[int, Path]], list[Path]]:
    """The segments, in order, and the outputs of an interrupted compaction."""
    found, leftovers = [], []
    for path in directory.iterdir():
        stem = path.name.removesuffix(SUFFIX)
        if path.name.endswith(SUFFIX) and len(stem) == 20 and stem.isdigit():
            found.append((int(stem), path))
        elif path.name.endswith(TEMP_SUFFIX):
            leftovers.append(path)
    return sorted(found), leftovers


@dataclass(frozen=True, slots=True)
class _Recovery:
    """What `open` found to write before the log takes appends."""

    leftovers: list[Path]  # outputs of an interrupted compaction, to delete
    create: bool  # no segment yet: create the first
    torn_at: int | None  # where to cut the active segment
    torn_reason: str  # "unwritten": only preallocated zeros are cut


def _recover(recovery: _Recovery, directory: Path, active: Path) -> None:
    for path in recovery.leftovers:
        log.info("%s: removing the output of an interrupted compaction", path)
        path.unlink(missing_ok=True)
    if recovery.create:
        created = not directory.is_dir()
        directory.mkdir(parents=True, exist_ok=True)
        os.close(os.open(active, _CREATE_FLAGS, 0o644))
        fsync_dir(directory)
        if created:
            fsync_dir(directory.parent)
    if recovery.torn_at is not None:
        dropped = active.stat().st_size - recovery.torn_at
        if recovery.torn_reason == "unwritten":
            log.debug("%s: dropping %d bytes of unused preallocated space", active, dropped)
        else:
            log.warning(
                "%s: torn or corrupt tail at byte %d, truncating (%d bytes dropped): %s",
                active,
                recovery.torn_at,
                dropped,
                recovery.torn_reason,
            )
        os.truncate(active, recovery.torn_at)


@dataclass(frozen=True, slots=True)
class Bulk:
    """Payloads that replay can hand over in runs rather than one by one (module docstring).

    ``pattern`` matches one such payload exactly when ``decode`` would accept it, and names a
    group ``key``; ``apply_run(keys, payloads)`` takes a run of them, in log order, in place of
    ``apply(decode(payload))`` for each.
    """

    pattern: bytes
    apply_run: Callable[[list[bytes], list[bytes]], None]


_CHUNK = 4 << 20


class _BulkWalk(Generic[T]):
    """The prefix of a segment that checks out in bulk, applied; see the module docstring."""

    def __init__(self, bulk: Bulk, decode: Callable[[bytes], T], apply: Callable[[T], None]):
        self.regex = re.compile(b"(?s)(.{%d})(" % _HEADER_SIZE + bulk.pattern + b")")
        self.stride = self.regex.groups + 1  # re.split gives a gap, then the groups, per match
        self.key = self.regex.groupindex["key"]
        self.apply_run, self.decode, self.apply = bulk.apply_run, decode, apply
        self.count = 0

    def replay(self, data: bytes) -> int:
        """Apply frames from the start while they check out; returns where that stopped."""
        pos = 0
        while pos < len(data):
            last = pos + _CHUNK >= len(data)
            done = self._chunk(data[pos : pos + _CHUNK], last)
            if done == 0:  # the next frames are not for bulk (or one is too big for a chunk)
                done = self._gap(data[pos : self._other_frames_end(data, pos)])
                if done == 0:
                    break
            pos += done
        return pos

    def _other_frames_end(self, data: bytes, pos: int) -> int:
        """Where the run of sound frames from ``pos`` (at least that one) ends: at the next
        bulk frame, a frame that does not check out, or a chunk's length on. The run is then
        applied as one gap, so a long stretch of other records (a KIP-848 group's, a share
        group's) costs one pass, not a chunk-wide split per frame. A 4.3 MB segment of 107 000
        KIP-848 member records, side by side in one run: 402 s to open before, 1.8 s after
        (1.2 s entry by entry)."""
        end, limit = pos, pos + _CHUNK
        while end < len(data):
            after, why = _check_frame(data, end)
            if why is not None or (end > pos and (after > limit or self.regex.match(data, end))):
                break
            end = after
        return end

    def _chunk(self, chunk: bytes, last: bool) -> int:
        """Apply the frames of ``chunk`` that check out; returns the bytes they take. The bytes
        after its last recognised frame count only in the ``last`` chunk (else they may be a
        frame the chunk cuts, which the next chunk starts with)."""
        parts: list[Any] = self.regex.split(chunk)
        stride = self.stride
        matches = len(parts) // stride
        heads, payloads = parts[1::stride], parts[2::stride]
        declared = struct.unpack(f">{2 * matches}I", b"".join(heads))
        if not (
            not any(parts[0 : matches * stride : stride])
            and declared[0::2] == tuple(map(len, payloads))
            and declared[1::2] == tuple(map(crc32c, payloads))
        ):
            return self._one_by_one(parts, declared, last)
        # The common case: nothing but recognised frames, all of them sound.
        self._run(parts[self.key :: stride], payloads)
        done = sum(declared[0::2]) + _HEADER_SIZE * matches
        return done + (self._gap(parts[-1]) if last else 0)

    def _one_by_one(self, parts: list[Any], declared: tuple[int, ...], last: bool) -> int:
        """`_chunk` when there are gaps or a frame does not check out: in order, up to that."""
        done, stride = 0, self.stride
        keys: list[bytes] = []
        payloads: list[bytes] = []
        for n, i in enumerate(range(0, len(parts) - 1, stride)):
            gap, payload = parts[i], parts[i + 2]
            if gap:
                self._run(keys, payloads)
                keys, payloads = [], []
                if self._gap(gap) != len(gap):
                    return done
                done += len(gap)
            length, crc = declared[2 * n], declared[2 * n + 1]
            if length != len(payload) or crc32c(payload) != crc:
                self._run(keys, payloads)
                return done
            keys.append(parts[i + self.key])
            payloads.append(payload)
            done += _HEADER_SIZE + length
        self._run(keys, payloads)
        return done + (self._gap(parts[-1]) if last else 0)

    def _run(self, keys: list[bytes], payloads: list[bytes]) -> None:
        if keys:
            self.apply_run(keys, payloads)
            self.count += len(keys)

    def _gap(self, gap: bytes) -> int:
        """Apply ``gap`` if it is whole frames that check out and decode; returns 0 if not."""
        values, pos = [], 0
        while pos < len(gap):
            end, why = _check_frame(gap, pos)
            if why is not None:
                return 0
            try:
                values.append(self.decode(gap[pos + _HEADER_SIZE : end]))
            except Exception:  # the ordinary walk decodes it again, and judges
                return 0
            pos = end
        for value in values:
            self.apply(value)
        self.count += len(values)
        return pos


def _replay_segment(
    path: Path,
    decode: Callable[[bytes], T],
    apply: Callable[[T], None],
    *,
    last: bool,
    skip: bool,
    bulk: Bulk | None = None,
    describe: Callable[[T], str] | None = None,
) -> tuple[int, int | None, str]:
    """Apply a segment's entries (reading only). Returns the entry count and, for the last
    segment, where its torn tail starts (None: none) and why ("unwritten": zeros only)."""
    data, start, count = path.read_bytes(), 0, 0
    if bulk is not None:
        fast = _BulkWalk(bulk, decode, apply)
        start, count = fast.replay(data), fast.count
    walk = _Walk(path, data, decode, last=last, skip=skip, start=start, describe=describe)
    for _, _, value in walk:
        apply(value)
        count += 1
    return count, walk.torn_at, "unwritten" if walk.unwritten else walk.reason


class CoordinatorSegments:
    """The segment files of one coordinator log. Appends from one thread at a time."""

    def __init__(
        self,
        directory: Path,
        segments: list[_Segment],
        active_entries: int,
        *,
        segment_bytes: int,
        skip_corruption: bool,
        preallocate_bytes: int = DEFAULT_PREALLOCATE_BYTES,
    ) -> None:
        *sealed, active = segments
        self._dir = directory
        self._segment_bytes = segment_bytes
        self._preallocate_bytes = preallocate_bytes
        self._skip = skip_corruption
        self._lock = threading.Lock()  # guards _sealed (compact_sealed may run in another thread)
        self._compacting = threading.Lock()
        self._sealed = sealed
        self._active = active
        self._fd = -1  # opened by `_start_writing`, once recovery's writes are made
        self._file_size = active.size  # beyond the frames: preallocated, unwritten space
        self._next_sequence = active.first_sequence + active_entries
        self._failed: BaseException | None = None
        self._closed = False
        self.fsyncs = 0
        self.rolls = 0  # segments sealed by appends: only a roll adds dirty bytes

    @classmethod
    def open(
        cls,
        directory: Path,
        decode: Callable[[bytes], T],
        apply: Callable[[T], None],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        skip_corruption: bool = False,
        bulk: Bulk | None = None,
        preallocate_bytes: int = DEFAULT_PREALLOCATE_BYTES,
        describe: Callable[[T], str] | None = None,
        writes: StartupWrites | None = None,
    ) -> CoordinatorSegments:
        """Open (creating if needed) the log in ``directory``, replaying it into ``apply``
        (and ``bulk.apply_run``, for the payloads it recognises). ``describe`` names what a
        decoded entry holds, for the warning about damaged bytes skipped. Reads only: the
        writes recovery needs, and opening the log for appends, go to ``writes`` (made at
        once if None)."""
        files, leftovers = _list_segments(directory) if directory.is_dir() else ([], [])
        segments: list[_Segment] = []
        count, torn_at, why = 0, None, ""
        for i, (first, path) in enumerate(files):
            last = i == len(files) - 1
            count, torn_at, why = _replay_segment(
                path, decode, apply, last=last, skip=skip_corruption, bulk=bulk, describe=describe
            )
            segments.append(_segment_on_disk(first, path))
        if torn_at is not None:
            segments[-1].size = torn_at  # as it will be once cut
        if not segments:
            segments.append(_Segment(0, directory / _segment_name(0), 0))
        opened = cls(
            directory,
            segments,
            count,
            segment_bytes=segment_bytes,
            skip_corruption=skip_corruption,
            preallocate_bytes=preallocate_bytes,
        )
        recovery = _Recovery(leftovers, not files, torn_at, why)
        (writes or StartupWrites.now()).add(lambda: opened._start_writing(recovery))
        return opened

    def _start_writing(self, recovery: _Recovery) -> None:
        """Make recovery's writes and open the active segment for appends."""
        if self._closed:
            return
        _recover(recovery, self._dir, self._active.path)
        self._fd = os.open(self._active.path, _WRITE_FLAGS)

    # -- state ----------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._dir

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return self._active.size + sum(s.size for s in self._sealed)

    @property
    def dirty_bytes(self) -> int:
        """Bytes of sealed segments that no compaction has seen yet."""
        with self._lock:
            return sum(s.size for s in self._sealed if not s.clean)

    @property
    def segment_count(self) -> int:
        with self._lock:
            return len(self._sealed) + 1

    def needs_compaction(self, now_ms: int, tombstone_retention_ms: int) -> bool:
        """Dirty sealed segments, or clean ones holding tombstones now past retention."""
        with self._lock:
            return any(
                not s.clean
                or (s.tombstones and now_ms - s.mtime_ns // 1_000_000 >= tombstone_retention_ms)
                for s in self._sealed
            )

    # -- appending ------------------------------------------------------------------------

    def append(self, payloads: Sequence[bytes]) -> None:
        """Frame and write a batch of payloads with one write (page cache, not yet durable)."""
        self._check_usable()
        if not payloads:
            return
        data = _frames(payloads)
        if self._active.size and self._active.size + len(data) > self._segment_bytes:
            self._roll()
        end = self._active.size + len(data)
        if end > self._file_size:
            self._preallocate(end)
        try:
            _pwrite_all(self._fd, data, self._active.size)
        except BaseException as exc:
            self._cut_back()
            if isinstance(exc, OSError):
                raise CoordinatorLogError(f"{self._active.path}: write failed: {exc}") from exc
            raise
        self._active.size += len(data)
        self._next_sequence += len(payloads)

    def _cut_back(self) -> None:
        """Drop a partial write (and the space after it) so that nothing but frames and zeros
        can follow the last frame."""
        try:
            os.ftruncate(self._fd, self._active.size)
        except OSError as exc:
            self._failed = exc
        else:
            self._file_size = self._active.size

    def _preallocate(self, end: int) -> None:
        """Grow the file to hold ``end`` bytes and up to ``preallocate_bytes`` more, within the
        segment size. If the file system cannot, the write extends the file itself."""
        target = max(end, min(end + self._preallocate_bytes, self._segment_bytes))
        if target > end:
            try:
                os.posix_fallocate(self._fd, self._file_size, target - self._file_size)
            except OSError as exc:
                log.debug("%s: cannot preallocate: %s", self._active.path, exc)
                return
            self._file_size = target

    def _trim(self) -> None:
        """Cut the unused preallocated space off the active segment (before sealing it)."""
        if self._file_size > self._active.size:
            os.ftruncate(self._fd, self._active.size)
            self._file_size = self._active.size

    def fsync(self) -> None:
        """Make everything appended so far durable. If it fails, raise, and refuse every
        later append: after a failed fsync the kernel may have dropped the dirty pages."""
        self._check_usable()
        try:
            os.fsync(self._fd)
        except OSError as exc:
            self._failed = exc
            raise CoordinatorLogFailed(f"{self._active.path}: fsync failed: {exc}") from exc
        self.fsyncs += 1

    def _roll(self) -> None:
        try:
            self._trim()  # made durable by the fsync, before the next segment exists
        except OSError as exc:
            raise CoordinatorLogError(f"{self._active.path}: cannot seal: {exc}") from exc
        self.fsync()
        first = max(self._next_sequence, self._active.first_sequence + 1)
        path = self._dir / _segment_name(first)
        try:
            fd = os.open(path, _WRITE_FLAGS | os.O_CREAT | os.O_EXCL, 0o644)
        except OSError as exc:
            raise CoordinatorLogError(f"{path}: cannot start a segment: {exc}") from exc
        try:
            fsync_dir(self._dir)
        except OSError as exc:
            os.close(fd)
            path.unlink(missing_ok=True)  # so that the next roll can try again
            raise CoordinatorLogError(f"{path}: cannot start a segment: {exc}") from exc
        old, old_fd = self._active, self._fd
        old.mtime_ns = os.fstat(old_fd).st_mtime_ns
        os.close(old_fd)
        with self._lock:
            self._sealed.append(old)
            self._active, self._fd, self._file_size = _Segment(first, path, 0), fd, 0
        self._next_sequence = first
        self.rolls += 1

    def _check_usable(self) -> None:
        if self._closed:
            raise CoordinatorLogError(f"coordinator log {self._dir} is closed")
        if self._fd < 0:
            raise CoordinatorLogError(f"coordinator log {self._dir} is not open for appends yet")
        if self._failed is not None:
            raise CoordinatorLogFailed(f"coordinator log {self._dir} failed") from self._failed

    def close(self) -> None:
        """fsync (unless failed) and release the active segment. Idempotent."""
        if self._closed:
            return
        if self._fd < 0:  # never opened for appends: nothing was written
            self._closed = True
            return
        try:
            if self._failed is None:
                try:
                    self._trim()
                except OSError as exc:  # recovery drops the zeros instead
                    log.warning("%s: cannot trim preallocated space: %s", self._active.path, exc)
                self.fsync()
        finally:
            self._closed = True
            os.close(self._fd)

    # -- compaction -----------------------------------------------------------------------

    def compact_sealed(
        self, key_of: KeyOf, *, now_ms: int, tombstone_retention_ms: int
    ) -> CompactionStats:
        """Rewrite the sealed segments down to their live entries (see the module docstring).

        ``key_of`` gives a payload's (hierarchical key, is a tombstone). Safe to run in a worker
        thread while another thread appends; one compaction runs at a time. Its CPU is this
        process's: `compact_sealed_in_child` keeps it off the event loop.
        """
        with self._compacting:
            compaction = Compaction(
                self._dir, self._sealed, self._lock, self._segment_bytes, self._skip
            )
            return compaction.run(
                key_of, now_ms=now_ms, tombstone_retention_ms=tombstone_retention_ms
            )

    def compact_sealed_in_child(
        self,
        key_of: KeyOf,
        *,
        now_ms: int,
        tombstone_retention_ms: int,
        command: Sequence[str] | None = None,
    ) -> CompactionStats:
        """`compact_sealed` done by a child process (storage/compaction_child.py), which
        rewrites the files exactly as `compact_sealed` would; this process then takes the
        sealed segments it reports. Blocks until the child is done: call it from a worker
        thread. ``key_of`` must be importable by its module and name; ``command`` replaces
        the child's program, for tests. If the child fails, the sealed segments are read
        again from the directory (it may have compacted some of them) and
        CoordinatorLogError is raised.
        """
        name = f"{key_of.__module__}:{key_of.__qualname__}"
        if "<" in name:
            raise ValueError(f"key_of {name} cannot be imported by a child process")
        with self._compacting:
            with self._lock:
                sealed = list(self._sealed)
            if not sealed:
                return CompactionStats()
            request = {
                "parent": os.getpid(),
                "directory": str(self._dir),
                "segment_bytes": self._segment_bytes,
                "skip_corruption": self._skip,
                "key_of": name,
                "now_ms": now_ms,
                "tombstone_retention_ms": tombstone_retention_ms,
                "sealed": [segment_row(segment) for segment in sealed],
            }
            try:
                done = subprocess.run(
                    list(command or _CHILD),
                    input=json.dumps(request).encode(),
                    capture_output=True,
                    env=_child_environment(),
                    check=False,
                )
            except OSError as exc:
                raise CoordinatorLogError(f"cannot start a compaction process: {exc}") from exc
            for line in done.stderr.decode(errors="replace").splitlines():
                log.warning("compaction process: %s", line)
            try:
                if done.returncode != 0:
                    raise ValueError(f"it exited with {done.returncode}")
                answer = json.loads(done.stdout)
                compacted = [segment_from_row(self._dir, row) for row in answer["sealed"]]
                stats = CompactionStats(**answer["stats"])
            except (ValueError, KeyError, TypeError) as exc:
                self._reread_sealed(len(sealed))
                raise CoordinatorLogError(f"compaction process failed: {exc}") from exc
            with self._lock:  # segments sealed meanwhile sort after the ones it compacted
                self._sealed[: len(sealed)] = compacted
            return stats

    def _reread_sealed(self, count: int) -> None:
        """The first `count` sealed segments as the directory has them now."""
        with self._lock:
            again = []
            for segment in self._sealed[:count]:
                try:
                    again.append(_segment_on_disk(segment.first_sequence, segment.path))
                except FileNotFoundError:
                    continue  # deleted by the compaction
            self._sealed[:count] = again


_CHILD = (sys.executable, "-m", "rafka_actors.storage.compaction_child")


def _child_environment() -> dict[str, str]:
    """This process's environment, with this package first on the child's import path."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root if not path else root + os.pathsep + path}


def segment_row(segment: _Segment) -> list[int | bool]:
    return [
        segment.first_sequence,
        segment.size,
        segment.mtime_ns,
        segment.clean,
        segment.tombstones,
    ]


def segment_from_row(directory: Path, row: list[Any]) -> _Segment:
    first, size, mtime_ns, clean, tombstones = row
    return _Segment(first, directory / _segment_name(first), size, mtime_ns, clean, tombstones)


class Compaction:
    """One compaction of a list of sealed segments, changed in place under `lock` (the
    module docstring says how): the broker's own list in a worker thread, or a copy of it in
    a child process (compaction_child.py)."""

    def __init__(
        self,
        directory: Path,
        sealed: list[_Segment],
        lock: threading.Lock,
        segment_bytes: int,
        skip: bool,
    ) -> None:
        self._dir = directory
        self._sealed = sealed
        self._lock = lock
        self._segment_bytes = segment_bytes
        self._skip = skip

    def run(self, key_of: KeyOf, *, now_ms: int, tombstone_retention_ms: int) -> CompactionStats:
        with self._lock:
            sealed = list(self._sealed)
        if not sealed:
            return CompactionStats()
        index = _Index()
        scans = [_Scan(seg, index, key_of, self._skip) for seg in sealed]
        horizon_ns = (now_ms - tombstone_retention_ms) * 1_000_000
        kept = [scan.kept(index, scan.segment.mtime_ns <= horizon_ns) for scan in scans]
        written = sum(self._commit(group) for group in _merge_groups(kept, self._segment_bytes))
        with self._lock:  # segments sealed meanwhile sort after the ones we compacted
            after = [s for s in self._sealed if s.first_sequence <= sealed[-1].first_sequence]
        return CompactionStats(
            segments_before=len(sealed),
            segments_after=len(after),
            bytes_before=sum(scan.size for scan in scans),
            bytes_after=sum(s.size for s in after),
            entries_before=sum(len(scan.kids) for scan in scans),
            entries_after=sum(k.entries for k in kept),
            files_written=written,
        )

    def _commit(self, group: list[_Kept]) -> int:
        """Replace a run of sealed segments by their merged output; returns files written."""
        head, rest = group[0], group[1:]
        size = sum(k.size for k in group)
        written = 0
        if size == 0:
            rest = group  # nothing survives: delete them all, oldest first
        elif head.unchanged and not any(k.size for k in rest):
            with self._lock:
                head.segment.clean, head.segment.tombstones = True, head.tombstones
        else:
            self._rewrite(group, size)
            written = 1
        for k in rest:
            os.unlink(k.segment.path)
            with self._lock:
                self._sealed.remove(k.segment)
            fsync_dir(self._dir)
        return written

    def _rewrite(self, group: list[_Kept], size: int) -> None:
        head = group[0].segment
        tmp = head.path.with_name(head.path.name + TEMP_SUFFIX)
        # The age of the (at most one) source with tombstones is the age of the output's.
        mtime = max((k.segment.mtime_ns for k in group if k.tombstones), default=head.mtime_ns)
        try:
            fd = os.open(tmp, _CREATE_FLAGS, 0o644)
            try:
                for k in group:
                    if k.spans:
                        data = k.segment.path.read_bytes()
                        _write_all(fd, b"".join(data[a:b] for a, b in k.spans))
                os.utime(fd, ns=(mtime, mtime))
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, head.path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        with self._lock:
            head.size, head.mtime_ns, head.clean = size, mtime, True
            head.tombstones = sum(k.tombstones for k in group)
        fsync_dir(self._dir)


class _Index:
    """Pass one over all sealed entries: the last position of each key and of each tombstone."""

    def __init__(self) -> None:
        self.ids: dict[tuple[Hashable, ...], int] = {}
        self.keys: list[tuple[Hashable, ...]] = []
        self.last = array("q")  # by key id
        self.tombstoned: dict[tuple[Hashable, ...], int] = {}
        self.tomb_lengths: set[int] = set()
        self.position = 0

    def add(self, key: tuple[Hashable, ...], tombstone: bool) -> int:
        kid = self.ids.get(key)
        if kid is None:
            kid = self.ids[key] = len(self.keys)
            self.keys.append(key)
            self.last.append(0)
        self.last[kid] = self.position
        if tombstone:
            self.tombstoned[key] = self.position
            self.tomb_lengths.add(len(key))
        self.position += 1
        return kid

    def survives(self, kid: int, position: int) -> bool:
        """Neither rewritten later nor under a later tombstone of a prefix of its key."""
        if self.last[kid] != position:
            return False
        key = self.keys[kid]
        return all(
            self.tombstoned.get(key[:n], -1) < position for n in self.tomb_lengths if n < len(key)
        )


@dataclass(slots=True)
class _Kept:
    """What of one sealed segment survives: byte spans of its kept frames."""

    segment: _Segment
    spans: list[tuple[int, int]]
    size: int = 0
    entries: int = 0
    tombstones: int = 0
    unchanged: bool = False


class _Scan:
    """One sealed segment's entries as parallel arrays (key ids keep memory per entry small)."""

    def __init__(self, segment: _Segment, index: _Index, key_of: KeyOf, skip: bool) -> None:
        self.segment = segment
        self.first = index.position
        self.starts, self.ends, self.kids = array("q"), array("q"), array("q")
        self.tombs = bytearray()
        data = segment.path.read_bytes()
        self.size = len(data)
        for start, end, (key, tomb) in _Walk(segment.path, data, key_of, last=False, skip=skip):
            self.starts.append(start)
            self.ends.append(end)
            self.kids.append(index.add(key, tomb))
            self.tombs.append(tomb)

    def kept(self, index: _Index, tombstones_expired: bool) -> _Kept:
        kept = _Kept(self.segment, [])
        spans = kept.spans
        for i, kid in enumerate(self.kids):
            tomb = self.tombs[i]
            if not index.survives(kid, self.first + i) or (tomb and tombstones_expired):
                continue
            start, end = self.starts[i], self.ends[i]
            if spans and spans[-1][1] == start:
                spans[-1] = (spans[-1][0], end)
            else:
                spans.append((start, end))
            kept.size += end - start
            kept.entries += 1
            kept.tombstones += tomb
        kept.unchanged = kept.entries == len(self.kids) and kept.size == self.size
        return kept


def _merge_groups(kept: list[_Kept], limit: int) -> Iterator[list[_Kept]]:
    """Runs of consecutive outputs that fit one segment, with at most one holding tombstones.

    A run of empty outputs stays a run of its own (it is deleted, never rewritten).
    """
    group: list[_Kept] = []
    size = tombstones = 0
    for k in kept:
        fits = size + k.size <= limit and not (tombstones and k.tombstones)
        if group and fits and (size > 0 or k.size == 0):
            group.append(k)
            size, tombstones = size + k.size, tombstones + k.tombstones
        else:
            if group:
                yield group
            group, size, tombstones = [k], k.size, k.tombstones
    if group:
        yield group


def read_segment(
    path: Path, decode: Callable[[bytes], T], *, skip_corruption: bool = False
) -> Iterator[tuple[int, T]]:
    """(byte position, decoded entry) of each frame of ONE segment file, read-only.

    For readers outside the broker (the analytics pipeline), which may look at any segment,
    the active one included, while the broker appends to it. A damaged frame that no good frame
    follows is a torn tail (or a frame still being written): iteration stops there and nothing is
    truncated. Damage followed by good frames raises `CorruptCoordinatorLog`, or is skipped with
    a warning under ``skip_corruption``, as in the broker's recovery.
    """
    walk = _Walk(path, path.read_bytes(), decode, last=True, skip=skip_corruption)
    for start, _, value in walk:
        yield start, value
