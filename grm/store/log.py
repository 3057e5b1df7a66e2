"""The event log: the store's authority. Segment files of checksummed, LSN-numbered frames.

On-disk layout (all integers little-endian). A segment `log/<generation:016x>.seg` is:

    segment header, 48 bytes
      0   8  magic  b"GRMLOG\\0\\0"
      8   4  u32 format version (1)
     12   4  u32 flags (0)
     16   8  u64 generation: one per segment; a new one after every checkpoint
     24   8  salt: 8 random bytes chosen when the generation starts
     32   8  u64 first LSN: the LSN the first frame of this segment carries
     40   4  u32 CRC32C of header bytes 0..40
     44   4  u32 zero

    then frames, back to back, each:
      0   4  u32 body length N (1 .. MAX_BODY)
      4   4  u32 CRC32C over salt || bytes 0..4 || bytes 8..16 || body
      8   8  u64 LSN: first LSN of the segment, then +1 per frame, across segments too
     16   N  body: canonical JSON (UTF-8) of one mutation

The salt is in every frame's checksum, so a frame left over from an older generation (a reused
file, a stale block) never validates in a newer one; it is SQLite's wal.c salt idea.

Mutation bodies (`op`, and `txn`: the LSN of the transaction's first frame):
    {"op": "put",    "txn": T, "tenant", "kind", "key", "parent", "meta", "payload", "size",
                     "text", "state"}
    {"op": "del",    "txn": T, "tenant", "kind", "key"}
    {"op": "state",  "txn": T, "tenant", "kind", "key", "state"}
    {"op": "mode",   "txn": T, "mode": durability mode now in force}
    {"op": "commit", "txn": T, "count": number of mutation frames}
(every body also has "dur", below. Encrypted stores seal "key", "parent", "meta" and "text" into
one "sealed" field and add "kid", the keyed record id - see `grm.store.envelope`; stores written
before that kept only the text sealed, as "etext", which recovery still reads)
A transaction is its mutation frames followed by its commit frame, written with one write and,
in durability normal/full/strict, one fsync (async: the background flusher's fsync covers many
transactions; volatile: none). Recovery applies only committed transactions.

Every frame body also carries `"dur": D`, the highest LSN the writer knew to be fsynced when it
encoded the frame (the commit-durability rule: a write is acknowledged under a power-loss
promise only once its commit frame is at or below a fsync'd point).

Reading a segment (`read_segment`): frames are read while they are valid. At the first invalid
one (short header, impossible length, CRC mismatch), expected to carry LSN e, the rest of the
file is searched for frames that validate with this salt and carry an LSN >= e:
- if one of them has D >= e (or has no `dur`, as frames of older stores), its writer knew LSN e
  was durable: the log is damaged in the middle and `CorruptionError(path, offset, expected,
  got)` is raised (never a guess that drops acknowledged data);
- otherwise every later frame was written after an unsynced gap: a power loss persisted a later
  write but not an earlier one (or tore, zero-filled or garbled the tail). Nothing from e on was
  acknowledged as durable, so the rest is a torn tail that recovery drops.
A frame that validates but carries the wrong LSN is always a `CorruptionError`.
"""

from __future__ import annotations

import errno
import json
import struct
from dataclasses import dataclass, field

import crc32c

from grm.errors import CorruptionError
from grm.store.fs import FileSystem, WritableFile, atomic_write, read_range

MAGIC = b"GRMLOG\0\0"
VERSION = 1
HEADER = struct.Struct("<8sIIQ8sQ")  # magic, version, flags, generation, salt, first_lsn
HEADER_SIZE = 48
FRAME = struct.Struct("<IIQ")  # length, crc, lsn
FRAME_SIZE = FRAME.size  # 16
MAX_BODY = 1 << 30  # 1 GiB: a body is metadata and text, never payload bytes


@dataclass(frozen=True)
class SegmentHeader:
    generation: int
    salt: bytes
    first_lsn: int

    def encode(self) -> bytes:
        head = HEADER.pack(MAGIC, VERSION, 0, self.generation, self.salt, self.first_lsn)
        return head + struct.pack("<II", crc32c.crc32c(head), 0)


@dataclass
class Frame:
    lsn: int
    offset: int  # of the frame header in its segment
    end: int  # offset just past the body
    body: dict


@dataclass
class Segment:
    path: str
    header: SegmentHeader
    size: int  # file size as read
    frames: list[Frame] = field(default_factory=list)
    valid_end: int = HEADER_SIZE  # offset just past the last valid frame

    @property
    def next_lsn(self) -> int:
        return self.header.first_lsn + len(self.frames)

    @property
    def torn(self) -> bool:
        return self.valid_end < self.size


def frame_crc(salt: bytes, length: int, lsn: int, body: bytes | memoryview) -> int:
    return crc32c.crc32c(body, value=crc32c.crc32c(salt + struct.pack("<IQ", length, lsn)))


def encode_frame(salt: bytes, lsn: int, body: bytes) -> bytes:
    if not 0 < len(body) <= MAX_BODY:
        raise ValueError(f"log frame body of {len(body)} bytes")
    return FRAME.pack(len(body), frame_crc(salt, len(body), lsn, body), lsn) + body


def encode_body(mutation: dict) -> bytes:
    return json.dumps(mutation, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def read_header(path: str, data: bytes) -> SegmentHeader:
    if len(data) < HEADER_SIZE:
        raise CorruptionError(path, 0, f"{HEADER_SIZE}-byte segment header", f"{len(data)} bytes")
    magic, version, _flags, generation, salt, first_lsn = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise CorruptionError(path, 0, MAGIC, magic, "not a GRM log segment")
    (crc,) = struct.unpack_from("<I", data, 40)
    got = crc32c.crc32c(data[:40])
    if crc != got:
        raise CorruptionError(path, 40, f"header crc {crc:08x}", f"{got:08x}")
    if version != VERSION:
        raise CorruptionError(path, 8, f"log format version {VERSION}", version)
    return SegmentHeader(generation, salt, first_lsn)


class BadFrame(Exception):
    """A frame that fails its checks (what `check_frame` expected and what it found); the
    reader and the salvager (grm/store/salvage.py) both read frames with it."""

    def __init__(self, expected: object, got: object) -> None:
        self.expected, self.got = expected, got


def check_frame(view: memoryview, off: int, salt: bytes) -> tuple[int, int]:
    """(lsn, end) of the frame at `off`, or BadFrame."""
    n = len(view)
    if off + FRAME_SIZE > n:
        raise BadFrame(f"{FRAME_SIZE}-byte frame header", f"{n - off} bytes")
    length, crc, lsn = FRAME.unpack_from(view, off)
    end = off + FRAME_SIZE + length
    if length == 0 or length > MAX_BODY or end > n:
        raise BadFrame(f"frame length 1..{min(MAX_BODY, n - off - FRAME_SIZE)}", length)
    got = frame_crc(salt, length, lsn, view[off + FRAME_SIZE:end])
    if got != crc:
        raise BadFrame(f"crc {crc:08x}", f"{got:08x}")
    return lsn, end


def valid_frames_after(data: bytes, start: int, salt: bytes, min_lsn: int):
    """(offset, lsn, end) of every valid frame starting after `start` with lsn >= min_lsn.

    Every body is a JSON object with at least one key, so it starts with `{"`: only offsets 16
    bytes before such a pair are tried, which keeps the search a C-speed `find` over the tail.
    """
    view = memoryview(data)
    pos = start + 1 + FRAME_SIZE
    while True:
        i = data.find(b'{"', pos)
        if i < 0:
            return
        off, pos = i - FRAME_SIZE, i + 1
        try:
            lsn, end = check_frame(view, off, salt)
        except BadFrame:
            continue
        if lsn >= min_lsn:
            yield off, lsn, end


def _durability_proof(data: bytes, start: int, salt: bytes, lsn: int) -> tuple[int, int, object] | None:
    """(offset, lsn, dur) of a valid frame after `start` whose writer knew `lsn` was durable,
    or None if every later valid frame was written past an unsynced point before `lsn`."""
    for off, later, end in valid_frames_after(data, start, salt, lsn):
        try:
            dur = json.loads(data[off + FRAME_SIZE:end]).get("dur")
        except (ValueError, AttributeError):
            dur = None
        if not isinstance(dur, int) or dur >= lsn:
            return off, later, dur
    return None


def read_segment(fs: FileSystem, path: str) -> Segment:
    """Parse one segment (see the module docstring for what is torn and what is corrupt)."""
    data = fs.read_bytes(path)
    header = read_header(path, data)
    seg = Segment(path, header, len(data))
    view = memoryview(data)
    off, expected = HEADER_SIZE, header.first_lsn
    while off < len(data):
        try:
            lsn, end = check_frame(view, off, header.salt)
        except BadFrame as bad:
            proof = _durability_proof(data, off, header.salt, expected)
            if proof is not None:
                detail = (f"invalid frame followed by a valid frame (lsn {proof[1]}) at offset {proof[0]} "
                          f"written when lsn {proof[2] if proof[2] is not None else '?'} was durable")
                raise CorruptionError(path, off, bad.expected, bad.got, detail) from None
            break
        if lsn != expected:
            raise CorruptionError(path, off, f"lsn {expected}", lsn, "frame out of sequence")
        try:
            body = json.loads(view[off + FRAME_SIZE:end].tobytes())
            if not isinstance(body, dict) or "op" not in body:
                raise ValueError("not a mutation")
        except ValueError as e:
            raise CorruptionError(path, off, "JSON mutation body", str(e)) from None
        seg.frames.append(Frame(lsn, off, end, body))
        off, expected = end, expected + 1
    seg.valid_end = seg.frames[-1].end if seg.frames else HEADER_SIZE
    return seg


class LogWriter:
    """Appends transactions to the current segment. Not thread-safe for appends (the store
    serializes them); `fsync` may run on the async flusher thread beside an append."""

    def __init__(self, fs: FileSystem, path: str, header: SegmentHeader, next_lsn: int, size: int) -> None:
        self.fs = fs
        self.path = path
        self.header = header
        self.next_lsn = next_lsn
        self.size = size
        self.closed = False
        self._handle: WritableFile | None = fs.open_write(path, append=True)

    @classmethod
    def create(cls, fs: FileSystem, path: str, generation: int, first_lsn: int, salt: bytes,
               sync: bool) -> LogWriter:
        """A new segment holding only its header, made durable atomically, then opened."""
        header = SegmentHeader(generation, salt, first_lsn)
        atomic_write(fs, path, header.encode(), sync=sync)
        return cls(fs, path, header, first_lsn, HEADER_SIZE)

    def append(self, bodies: list[bytes], *, fsync: bool, verify: bool = False) -> int:
        """Write frames for `bodies` with LSNs next_lsn, next_lsn+1, ... in one write, fsync if
        asked, read them back if `verify`, and return the last LSN. An OSError leaves the file
        with a partial tail that recovery drops; the caller must poison itself."""
        assert self._handle is not None, "log writer is closed"
        salt, lsn = self.header.salt, self.next_lsn
        buf = bytearray()
        for body in bodies:
            buf += encode_frame(salt, lsn, body)
            lsn += 1
        self._handle.write(buf)
        if fsync:
            self._handle.fsync()
        if verify:
            back = read_range(self.fs, self.path, self.size, len(buf))
            if back != buf:
                raise OSError(errno.EIO, f"read-back of {self.path} at {self.size} differs from what was written")
        self.size += len(buf)
        self.next_lsn = lsn
        return lsn - 1

    def fsync(self) -> None:
        if self._handle is not None:
            self._handle.fsync()

    def close(self) -> None:
        self.closed = True
        if self._handle is not None:
            handle, self._handle = self._handle, None
            handle.close()
