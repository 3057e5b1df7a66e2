"""Turning the paths given to `ingest` into documents: files and folders, UTF-8 text only."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from grm.errors import UserInputError

log = logging.getLogger("grm.ingest")


@dataclass(frozen=True)
class Document:
    name: str  # the path as given (files inside folders: the path below it)
    text: str


def _read(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        log.warning("skipping %s: %s", path, exc.strerror or exc)
        return None
    if not data.strip():
        log.warning("skipping %s: empty", path)
        return None
    if b"\x00" in data:
        log.warning("skipping %s: binary (NUL bytes)", path)
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        log.warning("skipping %s: not UTF-8 text", path)
        return None


def collect(paths: list[str | Path]) -> list[Document]:
    """Documents under `paths` (folders recursively, sorted). A missing path is a user error;
    an empty, binary or unreadable file is skipped with a warning."""
    if not paths:
        raise UserInputError("nothing to ingest: give one or more files or folders")
    docs: list[Document] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if not path.exists():
            raise UserInputError(f"no such file or folder: {raw}")
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        for file in files:
            if any(part.startswith(".") for part in file.relative_to(path).parts) and path.is_dir():
                continue  # hidden files and folders (.git, ...) are not documents
            text = _read(file)
            if text is not None:
                docs.append(Document(str(file), text))
    return docs
