"""Checkpoints: the whole row set at one LSN, so recovery replays only the log after it, and the
authority a damaged catalog is rebuilt from. Written and read as a stream (a million rows never
sit in memory at once).

On-disk layout of `checkpoints/<lsn:016x>.ckpt`, format 2 (integers little-endian):

      0   8  magic b"GRMCKPT\\0"
      8   4  u32 format version (2)
     12   4  u32 flags (0)
     16   8  u64 LSN: the last log LSN whose effect the checkpoint holds (always a commit frame)
     24   8  u64 zero (format 1 put the body length here)
     32   4  u32 CRC32C over bytes 0..32
     36   4  u32 zero
     40   N  body: UTF-8 lines. The first is canonical JSON {"lsn": LSN, "mode": last logged
             durability mode or null, "rows": count}; then one line per row, canonical JSON
             [tenant, kind, key, parent, meta, payload, payload_size, text, state, lsn]; in an
             encrypted store a row is sealed whole ({"r": sealed} in the text column,
             grm.store.envelope)
    40+N 24  trailer: u64 N, u32 CRC32C over bytes 0..32 and the body, u32 zero, b"GRMCKEND"

Format 1 (read only): the body length and the CRC in the header, the body one JSON document
{"lsn", "mode", "rows": [row, ...]}, no trailer.

A checkpoint is written to a temporary file, fsynced and renamed (then its folder fsynced), so
it is either absent or whole; the CRC catches later damage, and a damaged one is skipped for an
older one. Readers check the CRC over the whole file before yielding any row.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import crc32c

from grm.store.fs import FileSystem, RangeReader, atomic_write
from grm.store.record import Record, canonical_json

MAGIC = b"GRMCKPT\0"
END = b"GRMCKEND"
VERSION = 2
HEADER = struct.Struct("<8sIIQQ")
HEADER_SIZE = 40
TRAILER = struct.Struct("<QII8s")
TRAILER_SIZE = 24
_CHUNK = 4 << 20


class CheckpointInvalid(Exception):
    """Raised by the readers with the reason; recovery skips to an older checkpoint."""


@dataclass(frozen=True)
class Checkpoint:
    path: str
    lsn: int
    mode: str | None
    rows: int
    version: int


def write_checkpoint(fs: FileSystem, path: str, lsn: int, rows: Iterable[Record], *, sync: bool,
                     mode: str | None = None,
                     encode_row: Callable[[Record], list[Any]] = Record.to_list) -> int:
    """Write atomically (temp, fsync, rename, fsync dir); returns the file size in bytes."""
    head = HEADER.pack(MAGIC, VERSION, 0, lsn, 0)
    head += struct.pack("<II", crc32c.crc32c(head), 0)
    size = 0

    def write(handle) -> None:
        nonlocal size
        handle.write(head)
        crc, count = crc32c.crc32c(head[:32]), 0
        buf = [canonical_json({"lsn": lsn, "mode": mode}).encode("utf-8") + b"\n"]
        pending = len(buf[0])
        for r in rows:
            line = canonical_json(encode_row(r)).encode("utf-8") + b"\n"
            buf.append(line)
            pending += len(line)
            count += 1
            if pending >= _CHUNK:
                data = b"".join(buf)
                crc, size, buf, pending = crc32c.crc32c(data, value=crc), size + len(data), [], 0
                handle.write(data)
        data = b"".join(buf)
        crc, size = crc32c.crc32c(data, value=crc), size + len(data)
        handle.write(data)
        handle.write(TRAILER.pack(size, crc, count, END))

    atomic_write(fs, path, write, sync=sync)
    return HEADER_SIZE + size + TRAILER_SIZE


class _Reader:
    """Ranges of one file: read from disk as asked (local), or from one copy (MemoryFS)."""

    def __init__(self, fs: FileSystem, path: str) -> None:
        self.fs, self.path = fs, path
        self.data = None if isinstance(fs, RangeReader) else fs.read_bytes(path)
        self.size = fs.size(path) if self.data is None else len(self.data)

    def read(self, offset: int, size: int) -> bytes:
        if self.data is not None:
            return bytes(self.data[offset:offset + size])
        got = self.fs.read_range(self.path, offset, size)  # type: ignore[attr-defined]
        if len(got) != size:
            raise CheckpointInvalid(f"short read at {offset}: {len(got)} of {size} bytes")
        return got


def open_checkpoint(fs: FileSystem, path: str) -> Checkpoint:
    """Validate the whole file (header, trailer, CRC over every byte) and return what it holds,
    without decoding a row; CheckpointInvalid says why not."""
    r = _Reader(fs, path)
    if r.size < HEADER_SIZE:
        raise CheckpointInvalid(f"{r.size} bytes, shorter than the header")
    head = r.read(0, HEADER_SIZE)
    magic, version, _flags, lsn, length = HEADER.unpack_from(head, 0)
    if magic != MAGIC:
        raise CheckpointInvalid(f"bad magic {magic!r}")
    if version == 1:
        doc = _read_v1(r, head, lsn, length)
        return Checkpoint(path, lsn, doc.get("mode"), len(doc["rows"]), 1)
    if version != VERSION:
        raise CheckpointInvalid(f"format version {version}, want {VERSION}")
    (hcrc,) = struct.unpack_from("<I", head, 32)
    if crc32c.crc32c(head[:32]) != hcrc:
        raise CheckpointInvalid("header crc mismatch")
    if r.size < HEADER_SIZE + TRAILER_SIZE:
        raise CheckpointInvalid(f"{r.size} bytes, no room for the trailer")
    body_len, crc, count, end = TRAILER.unpack(r.read(r.size - TRAILER_SIZE, TRAILER_SIZE))
    if end != END or body_len != r.size - HEADER_SIZE - TRAILER_SIZE:
        raise CheckpointInvalid(f"trailer names a {body_len}-byte body in a {r.size}-byte file")
    got = crc32c.crc32c(head[:32])
    for off in range(HEADER_SIZE, HEADER_SIZE + body_len, _CHUNK):
        got = crc32c.crc32c(r.read(off, min(_CHUNK, HEADER_SIZE + body_len - off)), value=got)
    if got != crc:
        raise CheckpointInvalid(f"crc {crc:08x}, computed {got:08x}")
    first = _lines(r, body_len)
    try:
        meta = json.loads(next(first))
    except StopIteration:
        raise CheckpointInvalid("empty body") from None
    if meta.get("lsn") != lsn:
        raise CheckpointInvalid(f"body lsn {meta.get('lsn')} != header lsn {lsn}")
    return Checkpoint(path, lsn, meta.get("mode"), count, 2)


def checkpoint_rows(fs: FileSystem, ckpt: Checkpoint) -> Iterator[list[Any]]:
    """The rows of a checkpoint `open_checkpoint` validated, undecoded, in file order."""
    r = _Reader(fs, ckpt.path)
    if ckpt.version == 1:
        head = r.read(0, HEADER_SIZE)
        yield from _read_v1(r, head, ckpt.lsn, HEADER.unpack_from(head, 0)[4])["rows"]
        return
    lines = _lines(r, r.size - HEADER_SIZE - TRAILER_SIZE)
    next(lines)
    n = 0
    for line in lines:
        n += 1
        yield json.loads(line)
    if n != ckpt.rows:
        raise CheckpointInvalid(f"{n} rows, the trailer says {ckpt.rows}")


def _lines(r: _Reader, body_len: int) -> Iterator[bytes]:
    rest = b""
    for off in range(HEADER_SIZE, HEADER_SIZE + body_len, _CHUNK):
        chunk = rest + r.read(off, min(_CHUNK, HEADER_SIZE + body_len - off))
        parts = chunk.split(b"\n")
        rest = parts.pop()
        yield from parts
    if rest:
        raise CheckpointInvalid("body does not end with a newline")


def _read_v1(r: _Reader, head: bytes, lsn: int, length: int) -> dict:
    if HEADER_SIZE + length != r.size:
        raise CheckpointInvalid(f"body length {length} but file has {r.size - HEADER_SIZE}")
    (crc,) = struct.unpack_from("<I", head, 32)
    body = r.read(HEADER_SIZE, length)
    got = crc32c.crc32c(body, value=crc32c.crc32c(head[:32]))
    if got != crc:
        raise CheckpointInvalid(f"crc {crc:08x}, computed {got:08x}")
    doc = json.loads(body)
    if doc.get("lsn") != lsn:
        raise CheckpointInvalid(f"body lsn {doc.get('lsn')} != header lsn {lsn}")
    return doc


def read_checkpoint(fs: FileSystem, path: str,
                    decode_row: Callable[[list[Any]], Record] = Record.from_list
                    ) -> tuple[int, list[Record], str | None]:
    """(lsn, rows, mode) or CheckpointInvalid: every row in memory (salvage, tests)."""
    ckpt = open_checkpoint(fs, path)
    return ckpt.lsn, [decode_row(v) for v in checkpoint_rows(fs, ckpt)], ckpt.mode
