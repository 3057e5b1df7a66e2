"""The one file-system seam of the store.

Every byte the store writes to the log, checkpoints, payload files and its marker goes through a
`FileSystem` object injected in `StoreConfig.fs` (the SQLite catalog does its own I/O, but is
deleted and recreated through it). Crash tests replace it with one that records each
write / fsync / rename / fsync_dir / truncate / remove and replays every prefix.

Lifecycle, as the store uses it:
1. `Store.open` calls `makedirs`, `listdir`, `read_bytes`, `try_lock` on the root.
2. Recovery reads segments and checkpoints with `read_bytes`, cuts a torn log tail with
   `truncate`, and removes stale temporaries and covered segments with `remove`.
3. Writes are `open_write` -> `write` -> `fsync` -> `close`, then `rename` over the final name and
   `fsync_dir` on its directory (`atomic_write`), or appends to the open log segment handle.
4. Reads of payloads are one `read_bytes` each (the hot path).

Semantics every implementation keeps: `rename` atomically replaces the target; a written file is
durable only after `fsync` and its directory entry only after `fsync_dir`; `truncate` is durable
when it returns; `try_lock` returns None, never blocks, when another holder has the lock.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from grm.store.layout import tmp_name

Bytes = bytes | bytearray | memoryview


class WritableFile(Protocol):
    """An open file being written: appended to, or freshly created."""

    def write(self, data: Bytes) -> None:
        """Write all of `data` at the end of the file (short writes are retried inside)."""

    def fsync(self) -> None: ...

    def close(self) -> None: ...


class LockHandle(Protocol):
    def release(self) -> None: ...


@runtime_checkable
class CheckedLock(Protocol):
    """Optional ability of a lock handle: say whether the lock still guards the path it was
    taken on (False when that path was removed or replaced by another inode after locking)."""

    def held(self) -> bool: ...


class FileSystem(Protocol):
    """What the store needs from a file system. Paths are `str`; errors are `OSError`s."""

    def open_write(self, path: str, *, append: bool = False) -> WritableFile:
        """Create `path` (truncating it) or, with append=True, open it for appending."""

    def read_bytes(self, path: str) -> bytes:
        """The whole file in one buffer (FileNotFoundError if missing)."""

    def rename(self, src: str, dst: str) -> None: ...

    def fsync_dir(self, path: str) -> None: ...

    def listdir(self, path: str) -> list[str]: ...

    def is_dir(self, path: str) -> bool: ...

    def exists(self, path: str) -> bool: ...

    def makedirs(self, path: str) -> None:
        """Create `path` and its parents; no error if it exists."""

    def remove(self, path: str) -> None: ...

    def truncate(self, path: str, size: int) -> None: ...

    def size(self, path: str) -> int: ...

    def try_lock(self, path: str) -> LockHandle | None:
        """Take the exclusive lock on the directory `path` (the store root: an inode the store
        never removes, so deleting a file in it cannot let a second writer in)."""


@runtime_checkable
class OsPaths(Protocol):
    """Optional ability: the file system's paths are real OS paths (SQLite can use them)."""

    def os_path(self, path: str) -> str: ...


@runtime_checkable
class RangeReader(Protocol):
    """Optional ability: read part of a file (strict mode's read-back of a log append)."""

    def read_range(self, path: str, offset: int, size: int) -> bytes: ...


@runtime_checkable
class ScatterReader(Protocol):
    """Optional ability: read a file's bytes from `offset` straight into caller buffers, in order
    (one scatter read; no intermediate bytes object). Returns how many bytes were read."""

    def read_into(self, path: str, offset: int, buffers: list[memoryview]) -> int: ...


def read_range(fs: FileSystem, path: str, offset: int, size: int) -> bytes:
    if isinstance(fs, RangeReader):
        return fs.read_range(path, offset, size)
    return fs.read_bytes(path)[offset:offset + size]


def atomic_write(fs: FileSystem, path: str, data: Bytes | Callable[[Any], None], *, sync: bool) -> None:
    """temp -> write -> fsync -> rename -> fsync dir: after it returns (sync=True) `path` holds
    exactly `data` across a power loss, and before the rename it holds its old content. `data`
    may be a function that writes the content to the handle it is given (a streamed file)."""
    tmp = tmp_name(path)
    try:
        handle = fs.open_write(tmp)
        try:
            if callable(data):
                data(handle)
            else:
                handle.write(data)
            if sync:
                handle.fsync()
        finally:
            handle.close()
        fs.rename(tmp, path)
    except BaseException:
        # Best effort only: the store is poisoned anyway, and fsck collects what is left.
        with contextlib.suppress(OSError):
            if fs.exists(tmp):
                fs.remove(tmp)
        raise
    if sync:
        fs.fsync_dir(os.path.dirname(path))


def made_dirs(fs: FileSystem, path: str) -> list[str]:
    """makedirs without syncing; returns the folders whose entries must be fsynced to make the
    new ones durable (the parent of each folder created)."""
    missing = []
    p = path
    while p and not fs.exists(p):
        missing.append(p)
        parent = os.path.dirname(p)
        if parent == p:
            break
        p = parent
    if missing:
        fs.makedirs(path)
    return [os.path.dirname(d) for d in reversed(missing)]


def ensure_dir(fs: FileSystem, path: str, *, sync: bool) -> None:
    """makedirs, then fsync the parent of every directory created (a new directory entry is
    not durable until its parent directory is synced)."""
    for parent in made_dirs(fs, path):
        if sync:
            fs.fsync_dir(parent)


IOV_MAX = 1024  # buffers per preadv call (the POSIX minimum of IOV_MAX is 16; Linux allows 1024)


class _LocalFile:
    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, data: Bytes) -> None:
        view = memoryview(data).cast("B")
        while view:
            n = os.write(self._fd, view)
            view = view[n:]

    def fsync(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)


class _LocalLock:
    def __init__(self, fd: int, path: str) -> None:
        self._fd = fd
        self._path = path

    def held(self) -> bool:
        if self._fd < 0:
            return False
        try:
            now, mine = os.stat(self._path), os.fstat(self._fd)
        except OSError:
            return False
        return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)

    def release(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


class LocalFS:
    """The OS file system through `os.*` calls."""

    def open_write(self, path: str, *, append: bool = False) -> _LocalFile:
        flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC)
        return _LocalFile(os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o644))

    def read_bytes(self, path: str) -> bytes:
        # Unbuffered readall sizes one buffer from fstat and reads into it: one allocation and
        # no extra copy, which matters for payloads of hundreds of MB (a readinto into a
        # bytearray would need a second copy to become `bytes`).
        with open(path, "rb", buffering=0) as f:
            return f.readall()

    def rename(self, src: str, dst: str) -> None:
        os.replace(src, dst)

    def fsync_dir(self, path: str) -> None:
        fd = os.open(path or ".", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def listdir(self, path: str) -> list[str]:
        return os.listdir(path)

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def makedirs(self, path: str) -> None:
        os.makedirs(path, exist_ok=True)

    def remove(self, path: str) -> None:
        os.remove(path)

    def truncate(self, path: str, size: int) -> None:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.ftruncate(fd, size)
            os.fsync(fd)
        finally:
            os.close(fd)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def try_lock(self, path: str) -> _LocalLock | None:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return None
            raise
        return _LocalLock(fd, path)

    def os_path(self, path: str) -> str:
        return path

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        with open(path, "rb", buffering=0) as f:
            f.seek(offset)
            return f.read(size)

    def read_into(self, path: str, offset: int, buffers: list[memoryview]) -> int:
        fd = os.open(path, os.O_RDONLY)
        try:
            total = 0
            pending = [b for b in buffers if b.nbytes]
            while pending:
                n = os.preadv(fd, pending[:IOV_MAX], offset + total)
                if n == 0:
                    return total  # end of file: fewer bytes than asked
                total += n
                while pending and n >= pending[0].nbytes:  # drop the buffers filled, keep the rest
                    n -= pending[0].nbytes
                    pending.pop(0)
                if n:
                    pending[0] = pending[0][n:]
            return total
        finally:
            os.close(fd)
