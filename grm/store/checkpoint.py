"""Checkpoints: the whole host state at one LSN, so recovery replays only the log after it.

On-disk layout of `checkpoints/<lsn:016x>.ckpt` (integers little-endian):

      0   8  magic b"GRMCKPT\\0"
      8   4  u32 format version (1)
     12   4  u32 flags (0)
     16   8  u64 LSN: the last log LSN whose effect the checkpoint holds (always a commit frame)
     24   8  u64 body length N
     32   4  u32 CRC32C over bytes 0..32 and the body
     36   4  u32 zero
     40   N  body: canonical JSON {"lsn": LSN, "mode": last logged durability mode or null,
             "rows": [[tenant, kind, key, parent, meta, payload, payload_size, text, state,
             lsn], ...]}; in an encrypted store `text` is {"e": sealed text} (grm.store.envelope)

A checkpoint is written with `atomic_write` (temp, fsync, rename, fsync dir), so it is either
absent or whole; the CRC catches later damage, and a damaged one is skipped for an older one.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterable
from typing import Any

import crc32c

from grm.store.fs import FileSystem, atomic_write
from grm.store.record import Record, canonical_json

MAGIC = b"GRMCKPT\0"
VERSION = 1
HEADER = struct.Struct("<8sIIQQ")
HEADER_SIZE = 40


class CheckpointInvalid(Exception):
    """Raised by `read_checkpoint` with the reason; recovery skips to an older checkpoint."""


def write_checkpoint(fs: FileSystem, path: str, lsn: int, rows: Iterable[Record], *, sync: bool,
                     mode: str | None = None,
                     encode_row: Callable[[Record], list[Any]] = Record.to_list) -> int:
    """Write atomically; returns the file size in bytes."""
    doc = {"lsn": lsn, "mode": mode, "rows": [encode_row(r) for r in rows]}
    body = canonical_json(doc).encode("utf-8")
    head = HEADER.pack(MAGIC, VERSION, 0, lsn, len(body))
    crc = crc32c.crc32c(body, value=crc32c.crc32c(head))
    data = head + struct.pack("<II", crc, 0) + body
    atomic_write(fs, path, data, sync=sync)
    return len(data)


def read_checkpoint(fs: FileSystem, path: str,
                    decode_row: Callable[[list[Any]], Record] = Record.from_list
                    ) -> tuple[int, list[Record], str | None]:
    """(lsn, rows, mode) or CheckpointInvalid."""
    data = fs.read_bytes(path)
    if len(data) < HEADER_SIZE:
        raise CheckpointInvalid(f"{len(data)} bytes, shorter than the header")
    magic, version, _flags, lsn, length = HEADER.unpack_from(data, 0)
    if magic != MAGIC:
        raise CheckpointInvalid(f"bad magic {magic!r}")
    if version != VERSION:
        raise CheckpointInvalid(f"format version {version}, want {VERSION}")
    if HEADER_SIZE + length != len(data):
        raise CheckpointInvalid(f"body length {length} but file has {len(data) - HEADER_SIZE}")
    (crc,) = struct.unpack_from("<I", data, 32)
    body = memoryview(data)[HEADER_SIZE:]
    got = crc32c.crc32c(body, value=crc32c.crc32c(data[:32]))
    if got != crc:
        raise CheckpointInvalid(f"crc {crc:08x}, computed {got:08x}")
    doc = json.loads(body.tobytes())
    if doc.get("lsn") != lsn:
        raise CheckpointInvalid(f"body lsn {doc.get('lsn')} != header lsn {lsn}")
    return lsn, [decode_row(v) for v in doc["rows"]], doc.get("mode")
