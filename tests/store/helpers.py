"""Helpers for the store tests: store factories, a fault-injecting file system, file finders."""

from __future__ import annotations

import errno
from pathlib import Path

from grm.store import FileSystem, MemoryFS, Store, StoreConfig


class FaultyFS:
    """Delegates to another FileSystem; raises EIO on fsync / fsync_dir while `fail_fsync` is
    set, and counts fsyncs (to check volatile mode makes none)."""

    def __init__(self, inner: FileSystem) -> None:
        self.inner = inner
        self.fail_fsync = False
        self.fail_only: str | None = None  # if set, only fsyncs of paths containing it fail
        self.fsyncs = 0

    def _fsync(self, path: str) -> None:
        self.fsyncs += 1
        if self.fail_fsync and (self.fail_only is None or self.fail_only in path):
            raise OSError(errno.EIO, "injected fsync failure")

    def open_write(self, path: str, *, append: bool = False):
        handle = self.inner.open_write(path, append=append)
        outer = self

        class Handle:
            def write(self, data):
                handle.write(data)

            def fsync(self):
                outer._fsync(path)
                handle.fsync()

            def close(self):
                handle.close()

        return Handle()

    def fsync_dir(self, path: str) -> None:
        self._fsync(path)
        self.inner.fsync_dir(path)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def open_store(root: Path | str, **kw) -> Store:
    return Store.open(StoreConfig(root=Path(root), **kw))


def segments(root: Path) -> list[Path]:
    return sorted((Path(root) / "log").glob("*.seg"))


def payload_files(root: Path) -> list[Path]:
    return sorted(p for p in (Path(root) / "payloads").rglob("*") if p.is_file())


def memory_store(fs: MemoryFS | None = None, **kw) -> tuple[Store, MemoryFS]:
    fs = fs or MemoryFS()
    return Store.open(StoreConfig(root=Path("/mem/store"), fs=fs, **kw)), fs



def rewrite_log(fs: FileSystem, root: str, change) -> None:
    """An attacker with disk access: rewrite every log frame body through `change(body) -> body`
    and recompute the checksums (the salt is in the segment header)."""
    import os

    from grm.store.log import encode_body, encode_frame, read_segment

    log_dir = os.path.join(root, "log")
    for name in fs.listdir(log_dir):
        path = os.path.join(log_dir, name)
        seg = read_segment(fs, path)
        data = seg.header.encode() + b"".join(
            encode_frame(seg.header.salt, f.lsn, encode_body(change(dict(f.body)))) for f in seg.frames)
        h = fs.open_write(path)
        h.write(data)
        h.close()
