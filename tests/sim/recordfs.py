"""RecordingFS: an in-memory file system with inodes that logs every mutating call, and the
disk images a crash after any prefix of that log could leave.

Operation log entries (tuples):
    ("mkdir", dir)                       directories are durable when made (ensure_dir syncs parents)
    ("create", dir, name, ino)           a new directory entry (durable after "dirsync" of dir)
    ("write", ino, offset, bytes)        file data (durable after "fsync" of ino)
    ("trunc", ino, size)                 size change (LocalFS.truncate fsyncs: logged with "fsync")
    ("fsync", ino)                       everything pending on ino becomes durable
    ("rename", dir, src, dst, ino)       atomic replace within one directory (durable after dirsync)
    ("unlink", dir, name)                entry removal (durable after dirsync)
    ("dirsync", dir)                     every pending entry change of dir becomes durable

Crash model (conservative, POSIX-like): after a crash the disk holds every durable change, plus
any subset of the pending ones (data and entry changes independently, each file's and each
folder's in order). `images(ops, p)` builds, for the prefix ops[:p]: "all" (a process crash:
the OS had everything), "none", seeded random subsets, the last pending write torn at several
offsets, the last pending write's extent filled with zeros (size persisted, data not), and
the last pending write with a hole of zeros in its middle (its pages landed out of order).
"""

from __future__ import annotations

import os
import random
import threading
from collections.abc import Iterator

Image = dict[str, bytes]


class _Handle:
    def __init__(self, fs: RecordingFS, ino: int) -> None:
        self._fs, self._ino, self._closed = fs, ino, False

    def write(self, data) -> None:
        if self._closed:
            raise ValueError("write to closed file")
        self._fs._write(self._ino, bytes(memoryview(data).cast("B")))

    def fsync(self) -> None:
        if self._closed:
            raise ValueError("fsync of closed file")
        self._fs._log(("fsync", self._ino))

    def close(self) -> None:
        self._closed = True


class _Lock:
    def release(self) -> None:
        pass


def _norm(path: str) -> str:
    return os.path.normpath("/" + os.fspath(path).lstrip("/"))


class RecordingFS:
    """A FileSystem (see grm.store.fs) whose every mutation lands in `self.ops`."""

    def __init__(self) -> None:
        self.ops: list[tuple] = []
        self._mutex = threading.RLock()
        self._data: dict[int, bytearray] = {}
        self._entries: dict[str, int] = {}
        self._dirs: set[str] = {"/"}
        self._next_ino = 1

    def _log(self, op: tuple) -> None:
        with self._mutex:
            self.ops.append(op)

    def _write(self, ino: int, data: bytes) -> None:
        with self._mutex:
            buf = self._data[ino]
            self.ops.append(("write", ino, len(buf), data))
            buf += data

    def _need_parent(self, p: str) -> None:
        if os.path.dirname(p) not in self._dirs:
            raise FileNotFoundError(f"no such directory: {os.path.dirname(p)}")

    def open_write(self, path: str, *, append: bool = False) -> _Handle:
        p = _norm(path)
        with self._mutex:
            self._need_parent(p)
            ino = self._entries.get(p)
            if ino is None:
                ino, self._next_ino = self._next_ino, self._next_ino + 1
                self._data[ino] = bytearray()
                self._entries[p] = ino
                self.ops.append(("create", os.path.dirname(p), os.path.basename(p), ino))
            elif not append:
                del self._data[ino][:]
                self.ops.append(("trunc", ino, 0))
            return _Handle(self, ino)

    def read_bytes(self, path: str) -> bytes:
        with self._mutex:
            ino = self._entries.get(_norm(path))
            if ino is None:
                raise FileNotFoundError(path)
            return bytes(self._data[ino])

    def read_range(self, path: str, offset: int, size: int) -> bytes:
        return self.read_bytes(path)[offset:offset + size]

    def rename(self, src: str, dst: str) -> None:
        s, d = _norm(src), _norm(dst)
        with self._mutex:
            if s not in self._entries:
                raise FileNotFoundError(s)
            assert os.path.dirname(s) == os.path.dirname(d), "the store renames within a folder"
            ino = self._entries.pop(s)
            self._entries[d] = ino
            self.ops.append(("rename", os.path.dirname(s), os.path.basename(s), os.path.basename(d), ino))

    def fsync_dir(self, path: str) -> None:
        p = _norm(path)
        if p not in self._dirs:
            raise FileNotFoundError(p)
        self._log(("dirsync", p))

    def listdir(self, path: str) -> list[str]:
        p = _norm(path)
        with self._mutex:
            if p not in self._dirs:
                raise FileNotFoundError(p)
            names = {os.path.basename(f) for f in self._entries if os.path.dirname(f) == p}
            names |= {os.path.basename(d) for d in self._dirs if d != p and os.path.dirname(d) == p}
            return sorted(names)

    def is_dir(self, path: str) -> bool:
        return _norm(path) in self._dirs

    def exists(self, path: str) -> bool:
        p = _norm(path)
        return p in self._entries or p in self._dirs

    def makedirs(self, path: str) -> None:
        p = _norm(path)
        with self._mutex:
            made = []
            while p not in self._dirs:
                self._dirs.add(p)
                made.append(p)
                p = os.path.dirname(p)
            for d in reversed(made):
                self.ops.append(("mkdir", d))

    def remove(self, path: str) -> None:
        p = _norm(path)
        with self._mutex:
            if p not in self._entries:
                raise FileNotFoundError(p)
            del self._entries[p]
            self.ops.append(("unlink", os.path.dirname(p), os.path.basename(p)))

    def truncate(self, path: str, size: int) -> None:
        p = _norm(path)
        with self._mutex:
            ino = self._entries.get(p)
            if ino is None:
                raise FileNotFoundError(p)
            buf = self._data[ino]
            del buf[size:]
            buf.extend(bytes(size - len(buf)))
            self.ops.append(("trunc", ino, size))
            self.ops.append(("fsync", ino))

    def size(self, path: str) -> int:
        return len(self.read_bytes(path))

    def try_lock(self, path: str) -> _Lock:
        return _Lock()


def _apply_data(buf: bytearray, op: tuple, cut: int | None = None, zeros: bool = False,
                hole: bool = False) -> None:
    if op[0] == "trunc":
        size = op[2]
        del buf[size:]
        buf.extend(bytes(size - len(buf)))
        return
    _, _, off, data = op
    if zeros:
        data = bytes(len(data))
    if cut is not None:
        data = data[:cut]
    if hole:  # the middle of one write never landed (its pages were written out of order)
        n = len(data)
        data = data[:n // 4] + bytes(n // 2 - n // 4) + data[n // 2:]
    if off > len(buf):
        buf.extend(bytes(off - len(buf)))
    buf[off:off + len(data)] = data


def _apply_entry(entries: dict[str, int], op: tuple) -> None:
    if op[0] == "create":
        entries[op[2]] = op[3]
    elif op[0] == "rename":
        if entries.get(op[2]) == op[4]:
            del entries[op[2]]
        entries[op[3]] = op[4]
    elif op[0] == "unlink":
        entries.pop(op[2], None)


class _Replay:
    """Durable and pending state after a prefix of the log."""

    def __init__(self, ops: list[tuple]) -> None:
        self.dirs: set[str] = {"/"}
        self.data: dict[int, bytearray] = {}
        self.entries: dict[str, dict[str, int]] = {"/": {}}
        self.pend_data: dict[int, list[tuple]] = {}
        self.pend_dirs: dict[str, list[tuple]] = {}
        self.last_write: tuple | None = None  # (ino, index in pend_data[ino]) of the newest pending write
        for op in ops:
            kind = op[0]
            if kind == "mkdir":
                self.dirs.add(op[1])
                self.entries.setdefault(op[1], {})
            elif kind in ("create", "rename", "unlink"):
                self.pend_dirs.setdefault(op[1], []).append(op)
            elif kind in ("write", "trunc"):
                lst = self.pend_data.setdefault(op[1], [])
                lst.append(op)
                if kind == "write":
                    self.last_write = (op[1], len(lst) - 1)
            elif kind == "fsync":
                buf = self.data.setdefault(op[1], bytearray())
                for d in self.pend_data.pop(op[1], []):
                    _apply_data(buf, d)
                if self.last_write and self.last_write[0] == op[1]:
                    self.last_write = None
            elif kind == "dirsync":
                for e in self.pend_dirs.pop(op[1], []):
                    _apply_entry(self.entries[op[1]], e)

    @property
    def pending(self) -> int:
        return sum(map(len, self.pend_data.values())) + sum(map(len, self.pend_dirs.values()))

    def build(self, keep, last: str | None = None, cut: int = 0) -> Image:
        """An image: `keep(op)` says whether a pending op persisted; `last` = "torn" | "zeros" |
        "hole" overrides the newest pending write (cut short, all zeros, or zeros in its middle)."""
        data = {ino: bytearray(b) for ino, b in self.data.items()}
        for ino, lst in self.pend_data.items():
            buf = data.setdefault(ino, bytearray())
            for i, op in enumerate(lst):
                if last and self.last_write == (ino, i):
                    _apply_data(buf, op, cut=cut if last == "torn" else None, zeros=last == "zeros",
                                hole=last == "hole")
                elif keep(op):
                    _apply_data(buf, op)
        image: Image = {}
        for d, ents in self.entries.items():
            ents = dict(ents)
            for op in self.pend_dirs.get(d, []):
                if keep(op):
                    _apply_entry(ents, op)
            for name, ino in ents.items():
                image[os.path.join(d, name)] = bytes(data.get(ino, b""))
        return image


def images(ops: list[tuple], p: int, seed: int, subsets: int = 3) -> Iterator[tuple[str, Image, set[str]]]:
    """(variant, image, folders) for a crash after ops[:p]; "all" is the process-crash image."""
    r = _Replay(ops[:p])
    yield "all", r.build(lambda op: True), r.dirs
    if not r.pending:
        return
    yield "none", r.build(lambda op: False), r.dirs
    rng = random.Random(seed * 1_000_003 + p)
    for _ in range(subsets):
        yield "subset", r.build(lambda op: rng.random() < 0.5), r.dirs
    if r.last_write is not None:
        ino, i = r.last_write
        n = len(r.pend_data[ino][i][3])
        for cut in sorted({1, n // 4, n // 2, 3 * n // 4, n - 1} - {0, n}):
            yield "torn", r.build(lambda op: True, last="torn", cut=cut), r.dirs
        yield "zeros", r.build(lambda op: True, last="zeros"), r.dirs
        if n >= 8:
            yield "hole", r.build(lambda op: True, last="hole"), r.dirs
