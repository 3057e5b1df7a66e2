"""Turning the paths given to `ingest` into documents: files and folders, UTF-8 text only.

What is skipped, with a warning naming the file (never an abort of the whole ingest): empty files,
binary files (NUL bytes), text that is not UTF-8, files larger than `max_bytes` (checked from
`stat` before reading, so a huge file costs no memory), anything that is not a regular file (a
FIFO, device or socket is never opened: opening a FIFO for reading would wait for a writer), and
files whose *name* is not valid UTF-8 (record meta is JSON text; the name is shown as bytes).
A path that does not exist is a user error.
"""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from grm.errors import UserInputError

log = logging.getLogger("grm.ingest")

# Default size limit of one file: 4 MiB (~1M tokens). Tokenizing is what costs memory: smollm2's
# tokenizer took 2.1 GB over its baseline for one 15 MiB line (3.1M tokens), so about 0.6 GB here.
MAX_FILE_BYTES = 4 << 20


@dataclass(frozen=True)
class Document:
    name: str  # the path as given (files inside folders: the path below it)
    text: str


def _shown(path: Path) -> str:
    """The path for a warning: as text, or its bytes' repr when the name is not UTF-8."""
    try:
        return str(path).encode("utf-8").decode("utf-8")
    except UnicodeEncodeError:
        return repr(os.fsencode(path))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "not a regular file"


def _read(path: Path, max_bytes: int) -> str | None:
    shown = _shown(path)
    if shown != str(path):
        log.warning("skipping %s: file name is not UTF-8", shown)
        return None
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            log.warning("skipping %s: %s", shown, _kind(st.st_mode))
            return None
        if st.st_size > max_bytes:
            log.warning("skipping %s: %d bytes is over the %d-byte limit (raise it with --max-file-size)",
                        shown, st.st_size, max_bytes)
            return None
        # O_NONBLOCK: if the path was swapped for a FIFO after the stat, open does not wait.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(min(st.st_size, max_bytes) + 1)  # read(n) allocates n bytes up front
    except OSError as exc:
        log.warning("skipping %s: %s", shown, exc.strerror or exc)
        return None
    if len(data) > max_bytes:  # it grew since the stat
        log.warning("skipping %s: over the %d-byte limit (raise it with --max-file-size)", shown, max_bytes)
        return None
    if not data.strip():
        log.warning("skipping %s: empty", shown)
        return None
    if b"\x00" in data:
        log.warning("skipping %s: binary (NUL bytes)", shown)
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("skipping %s: not UTF-8 text", shown)
        return None


def _files(path: Path) -> list[Path]:
    """The files under a folder (recursive, sorted), hidden files and folders left out; symlinked
    folders are not followed (no cycles). Special files are kept here and skipped by `_read`."""
    out = []
    for dirpath, dirnames, filenames in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        out += [Path(dirpath) / f for f in filenames if not f.startswith(".")]
    return sorted(out)


def collect(paths: list[str | Path | Document], max_bytes: int = MAX_FILE_BYTES) -> list[Document]:
    """Documents under `paths` (folders recursively, sorted; a Document is passed through). A
    missing path is a user error; what cannot be a document is skipped with a warning (above)."""
    if not paths:
        raise UserInputError("nothing to ingest: give one or more files or folders")
    if max_bytes < 1:
        raise UserInputError(f"file size limit must be >= 1 byte, got {max_bytes}")
    docs: list[Document] = []
    for raw in paths:
        if isinstance(raw, Document):
            docs.append(raw)
            continue
        path = Path(raw).expanduser()
        if not os.path.lexists(path):
            raise UserInputError(f"no such file or folder: {_shown(path)}")
        for file in _files(path) if path.is_dir() else [path]:
            text = _read(file, max_bytes)
            if text is not None:
                docs.append(Document(str(file), text))
    return docs
