"""Payload files: content-addressed within a tenant, optionally compressed and encrypted.

    payloads/<sha256(tenant)[:16]>/<name[:2]>/<name>

`name` is the record's `payload` field: the SHA-256 hex of the bytes, or (encrypted stores) a
keyed HMAC of it; the file content is the bytes themselves, or an envelope (format, names and
associated data in `grm.store.envelope`). Two tenants storing the same bytes get two files
(tenants never meet, and encryption keys per tenant). Within a tenant the same name is written
once; an existing file is re-verified before it is trusted, and rewritten if it is damaged, so
re-putting a payload after a miss repairs it.

Writes are temp -> write -> (fsync) -> rename -> (fsync dir), before the log record naming the
file is appended (invariant 5): a crash leaves at worst an orphan file, which fsck collects.
The `sync` argument of `write` says when the fsyncs happen: "now" (normal, full, strict),
"defer" (async: the file handle is kept open and `take_pending` hands it to the flusher, which
fsyncs it and its folder before it fsyncs the log), or "none" (volatile).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import struct
import threading
from collections.abc import Callable, Iterator

from grm.store.envelope import Codec
from grm.store.fs import (Bytes, FileSystem, ScatterReader, WritableFile, atomic_write, ensure_dir, made_dirs,
                          read_range)
from grm.store.layout import DIGEST_RE, Layout, is_tmp, tmp_name

MISSING = "missing"
CORRUPT = "corrupt"


def digest_of(data: Bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class PayloadFiles:
    def __init__(self, fs: FileSystem, layout: Layout, codec: Codec) -> None:
        self.fs = fs
        self.layout = layout
        self.codec = codec
        # (tenant, name) written or verified by this process; trusted by `write` without a
        # re-read. `read` fails closed regardless and calls `forget` when a file turns out bad.
        self._good: set[tuple[str, str]] = set()
        self._dirs: set[str] = set()
        self._pending: list[WritableFile] = []  # open handles of files not yet fsynced
        self._pending_dirs: list[str] = []  # folders whose entries are not yet fsynced
        self._pending_lock = threading.Lock()
        # Written without any fsync (volatile): a later write of the same name under a syncing
        # mode must write and fsync it again, not trust the page cache.
        self._unsynced: set[tuple[str, str]] = set()

    def write(self, tenant: str, kind: str, key: str, data: Bytes, *, sync: str = "now",
              verify: bool = False) -> tuple[str, int]:
        """Store `data` for the record; returns (name, size). OSError means nothing is known
        about the file (the caller poisons the store)."""
        size = memoryview(data).nbytes
        name = self.codec.name(tenant, kind, key, digest_of(data))
        ident = (tenant, name)
        if sync != "none" and ident in self._unsynced:
            self._good.discard(ident)
            self._unsynced.discard(ident)
            fresh = True
        else:
            fresh = False
        if ident in self._good:
            return name, size
        path = self.layout.payload(tenant, name)
        if not fresh and self.fs.exists(path) and self.check(tenant, kind, key, name, size) is None:
            self._good.add((tenant, name))
            return name, size
        folder = os.path.dirname(path)
        if folder not in self._dirs:
            if sync == "defer":  # the new folders' parents are fsynced by the flusher
                with self._pending_lock:
                    self._pending_dirs += made_dirs(self.fs, folder)
            else:
                ensure_dir(self.fs, folder, sync=sync != "none")
            self._dirs.add(folder)
        blob = self.codec.encode_payload(tenant, kind, key, name, bytes(data))
        if sync == "defer":
            self._write_deferred(path, blob)
        else:
            atomic_write(self.fs, path, blob, sync=sync == "now")
        if verify and self.fs.read_bytes(path) != blob:
            raise OSError(errno.EIO, f"read-back of {path} differs from what was written")
        if sync == "none":
            self._unsynced.add(ident)
        self._good.add(ident)
        return name, size

    def _write_deferred(self, path: str, blob: bytes) -> None:
        tmp = tmp_name(path)
        handle = self.fs.open_write(tmp)
        try:
            handle.write(blob)
            self.fs.rename(tmp, path)
        except BaseException:
            handle.close()
            with contextlib.suppress(OSError):
                if self.fs.exists(tmp):
                    self.fs.remove(tmp)
            raise
        with self._pending_lock:
            self._pending.append(handle)
            self._pending_dirs.append(os.path.dirname(path))

    def take_pending(self) -> tuple[list[WritableFile], list[str]]:
        """(files, folders) written in defer mode so far: the caller fsyncs and closes each
        file, then fsyncs each folder, before it fsyncs the log that names them."""
        with self._pending_lock:
            out = (self._pending, list(dict.fromkeys(self._pending_dirs)))
            self._pending, self._pending_dirs = [], []
        return out

    def read(self, tenant: str, kind: str, key: str, name: str, size: int) -> tuple[bytes | None, str | None]:
        """(bytes, None) when the file decodes to the record's bytes, else (None, MISSING |
        CORRUPT). Never returns other bytes than the ones named."""
        if not DIGEST_RE.match(name):
            return None, CORRUPT
        try:
            blob = self.fs.read_bytes(self.layout.payload(tenant, name))
        except FileNotFoundError:
            self.forget(tenant, name)
            return None, MISSING
        data = self.codec.decode_payload(tenant, kind, key, name, size, blob)
        if data is None:
            self.forget(tenant, name)
            return None, CORRUPT
        return data, None

    def read_into(self, tenant: str, name: str, size: int,
                  plan: "Callable[[bytes], list[memoryview] | None]") -> bool:
        """The fast path for a plain (not compressed, not encrypted) safetensors payload: read its
        header, let `plan(header JSON bytes)` say where the tensor bytes go (buffers covering them
        in file order), read them straight there (one scatter read) and check the size and the
        SHA-256 of all the bytes, header included, against `name`, as `read` does. False: not
        served this way (an envelope, an unexpected layout, damage): the caller uses `read`, which
        decides and counts. Buffers may hold partial data after False."""
        if self.codec.encrypted or not DIGEST_RE.match(name) or not isinstance(self.fs, ScatterReader):
            return False
        path = self.layout.payload(tenant, name)
        try:
            head = read_range(self.fs, path, 0, 8)
            if len(head) < 8:
                return False
            (header_len,) = struct.unpack("<Q", head)
            if 8 + header_len > size:
                return False
            header = read_range(self.fs, path, 8, header_len)
            buffers = plan(header) if len(header) == header_len else None
            if buffers is None or 8 + header_len + sum(b.nbytes for b in buffers) != size:
                return False
            if self.fs.read_into(path, 8 + header_len, buffers) != size - 8 - header_len:
                return False
            if self.fs.size(path) != size:
                return False  # more bytes than the record says: not the file named
        except (OSError, ValueError):
            return False
        h = hashlib.sha256(head)
        h.update(header)
        for b in buffers:
            h.update(b)
        return h.hexdigest() == name  # not encrypted: the name is the SHA-256 of the bytes

    def check(self, tenant: str, kind: str, key: str, name: str, size: int) -> str | None:
        """None if the file is whole, else MISSING or CORRUPT (reads and verifies it)."""
        return self.read(tenant, kind, key, name, size)[1]

    def forget(self, tenant: str, name: str) -> None:
        self._good.discard((tenant, name))

    def forget_all(self) -> None:
        """After files were removed (fsck --repair, gc): nothing is trusted by name until it is
        written or verified again."""
        self._good.clear()

    def files(self) -> Iterator[tuple[str, str, str | None]]:
        """(path, tenant folder name, name or None) of every file under payloads/; the name is
        None for entries that are not a digest in its right folder (temporaries, strays)."""
        fs, root = self.fs, self.layout.payload_dir
        if not fs.exists(root):
            return
        for th in sorted(fs.listdir(root)):
            tdir = os.path.join(root, th)
            if not fs.is_dir(tdir):
                yield tdir, th, None
                continue
            for dd in sorted(fs.listdir(tdir)):
                ddir = os.path.join(tdir, dd)
                if not fs.is_dir(ddir):
                    yield ddir, th, None
                    continue
                for name in sorted(fs.listdir(ddir)):
                    path = os.path.join(ddir, name)
                    ok = DIGEST_RE.match(name) and name[:2] == dd and not is_tmp(name) and not fs.is_dir(path)
                    yield path, th, (name if ok else None)
