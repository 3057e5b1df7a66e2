"""Payload files: opaque bytes, content-addressed within a tenant.

    payloads/<sha256(tenant)[:16]>/<digest[:2]>/<digest>     digest = SHA-256 hex of the bytes

The file is exactly the payload bytes (no header): its name is its checksum. Two tenants storing
the same bytes get two files (tenants never meet, and a later encryption layer keys per tenant).
Within a tenant the same bytes are written once; an existing file is re-verified before it is
trusted, and rewritten if it is damaged, so re-putting a payload after a miss repairs it.

Writes are temp -> fsync -> rename -> fsync dir, and happen before the log record naming the
file is appended (invariant 5): a crash leaves at worst an orphan file, which fsck collects.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator

from grm.store.fs import Bytes, FileSystem, atomic_write, ensure_dir
from grm.store.layout import DIGEST_RE, Layout, is_tmp

MISSING = "missing"
CORRUPT = "corrupt"


def digest_of(data: Bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class PayloadFiles:
    def __init__(self, fs: FileSystem, layout: Layout, *, sync: bool) -> None:
        self.fs = fs
        self.layout = layout
        self.sync = sync
        # (tenant, digest) written or verified by this process; trusted by `write` without a
        # re-read. `read` fails closed regardless and calls `forget` when a file turns out bad.
        self._good: set[tuple[str, str]] = set()
        self._dirs: set[str] = set()

    def write(self, tenant: str, data: Bytes) -> tuple[str, int]:
        """Store `data` for `tenant`; returns (digest, size). OSError means nothing is known
        about the file (the caller poisons the store)."""
        digest = digest_of(data)
        size = memoryview(data).nbytes
        if (tenant, digest) in self._good:
            return digest, size
        path = self.layout.payload(tenant, digest)
        if self.fs.exists(path) and self.check(tenant, digest, size) is None:
            self._good.add((tenant, digest))
            return digest, size
        folder = os.path.dirname(path)
        if folder not in self._dirs:
            ensure_dir(self.fs, folder, sync=self.sync)
            self._dirs.add(folder)
        atomic_write(self.fs, path, data, sync=self.sync)
        self._good.add((tenant, digest))
        return digest, size

    def read(self, tenant: str, digest: str, size: int) -> tuple[bytes | None, str | None]:
        """(bytes, None) when the file re-hashes to `digest` and has `size` bytes, else
        (None, MISSING | CORRUPT). Never returns other bytes than the ones named."""
        if not DIGEST_RE.match(digest):
            return None, CORRUPT
        try:
            data = self.fs.read_bytes(self.layout.payload(tenant, digest))
        except FileNotFoundError:
            self.forget(tenant, digest)
            return None, MISSING
        if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
            self.forget(tenant, digest)
            return None, CORRUPT
        return data, None

    def check(self, tenant: str, digest: str, size: int) -> str | None:
        """None if the file is whole, else MISSING or CORRUPT (reads and hashes it)."""
        data, problem = self.read(tenant, digest, size)
        del data
        return problem

    def forget(self, tenant: str, digest: str) -> None:
        self._good.discard((tenant, digest))

    def files(self) -> Iterator[tuple[str, str, str | None]]:
        """(path, tenant folder name, digest or None) of every file under payloads/; digest is
        None for names that are not a digest in its right folder (temporaries, strays)."""
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
