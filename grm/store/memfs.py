"""MemoryFS: the in-memory twin of `LocalFS` for tests (a dict of path -> bytearray).

It keeps the same contracts as the OS file system where the store relies on them (a file's
parent directory must exist, `rename` replaces atomically, `listdir` of a missing folder raises)
so a store bug that would fail on disk fails here too. It models no power loss: everything
written is immediately "durable"; crash tests wrap it and record the calls.
"""

from __future__ import annotations

import os
import threading

from grm.store.fs import Bytes


def _norm(path: str) -> str:
    return os.path.normpath("/" + os.fspath(path).lstrip("/"))


class _MemFile:
    def __init__(self, fs: MemoryFS, path: str) -> None:
        self._fs = fs
        self._path = path
        self._closed = False

    def write(self, data: Bytes) -> None:
        if self._closed:
            raise ValueError("write to closed file")
        with self._fs._mutex:
            buf = self._fs._files.get(self._path)
            if buf is None:  # removed or renamed away while open: the data goes nowhere
                return
            buf += memoryview(data).cast("B")

    def fsync(self) -> None:
        if self._closed:
            raise ValueError("fsync of closed file")

    def close(self) -> None:
        self._closed = True


class _MemLock:
    def __init__(self, fs: MemoryFS, path: str) -> None:
        self._fs = fs
        self._path = path

    def held(self) -> bool:
        with self._fs._mutex:
            return self._path in self._fs._locks and self._path in self._fs._dirs

    def release(self) -> None:
        with self._fs._mutex:
            self._fs._locks.discard(self._path)


class MemoryFS:
    """A whole file system in a dict. Thread-safe; not shared between processes."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._files: dict[str, bytearray] = {}
        self._dirs: set[str] = {"/"}
        self._locks: set[str] = set()

    def _need_parent(self, path: str) -> None:
        if os.path.dirname(path) not in self._dirs:
            raise FileNotFoundError(f"no such directory: {os.path.dirname(path)}")

    def open_write(self, path: str, *, append: bool = False) -> _MemFile:
        p = _norm(path)
        with self._mutex:
            self._need_parent(p)
            if p in self._dirs:
                raise IsADirectoryError(p)
            if not append or p not in self._files:
                self._files[p] = bytearray()
        return _MemFile(self, p)

    def read_bytes(self, path: str) -> bytes:
        p = _norm(path)
        with self._mutex:
            if p not in self._files:
                raise FileNotFoundError(p)
            return bytes(self._files[p])

    def rename(self, src: str, dst: str) -> None:
        s, d = _norm(src), _norm(dst)
        with self._mutex:
            if s not in self._files:
                raise FileNotFoundError(s)
            self._need_parent(d)
            self._files[d] = self._files.pop(s)

    def fsync_dir(self, path: str) -> None:
        if _norm(path) not in self._dirs:
            raise FileNotFoundError(path)

    def listdir(self, path: str) -> list[str]:
        p = _norm(path)
        with self._mutex:
            if p not in self._dirs:
                raise FileNotFoundError(p)
            names = {os.path.basename(f) for f in self._files if os.path.dirname(f) == p}
            names |= {os.path.basename(d) for d in self._dirs if d != p and os.path.dirname(d) == p}
            return sorted(names)

    def is_dir(self, path: str) -> bool:
        return _norm(path) in self._dirs

    def exists(self, path: str) -> bool:
        p = _norm(path)
        return p in self._files or p in self._dirs

    def makedirs(self, path: str) -> None:
        p = _norm(path)
        with self._mutex:
            while p not in self._dirs:
                if p in self._files:
                    raise FileExistsError(p)
                self._dirs.add(p)
                p = os.path.dirname(p)

    def remove(self, path: str) -> None:
        p = _norm(path)
        with self._mutex:
            if p not in self._files:
                raise FileNotFoundError(p)
            del self._files[p]

    def truncate(self, path: str, size: int) -> None:
        p = _norm(path)
        with self._mutex:
            if p not in self._files:
                raise FileNotFoundError(p)
            buf = self._files[p]
            if size < len(buf):
                del buf[size:]
            else:
                buf.extend(bytes(size - len(buf)))

    def size(self, path: str) -> int:
        p = _norm(path)
        with self._mutex:
            if p not in self._files:
                raise FileNotFoundError(p)
            return len(self._files[p])

    def try_lock(self, path: str) -> _MemLock | None:
        p = _norm(path)
        with self._mutex:
            if p not in self._dirs:
                raise FileNotFoundError(f"no such directory: {p}")
            if p in self._locks:
                return None
            self._locks.add(p)
        return _MemLock(self, p)

    # Test helpers: reach into the bytes the way a bit flip or a torn write would.
    def raw(self, path: str) -> bytearray:
        """The live buffer of a file (mutating it simulates on-disk damage)."""
        return self._files[_norm(path)]
