"""Where each file of a store lives under its root.

    <root>/GRM-STORE                      marker: canonical JSON {"format": "grm-store", "version": 1}
                                          (version 2 + "encryption" for encrypted stores: grm.store.root)
    <root>/LOCK                           the pid of the writer holding the lock (a hint; the lock
                                          itself is flock on the root folder: grm.store.root)
    <root>/SERVE.json                     kept by a `grm serve` holding the store (grm/serve/endpoint.py);
                                          the store never reads it
    <root>/log/<generation:016x>.seg      event-log segments (format in `grm.store.log`)
    <root>/checkpoints/<lsn:016x>.ckpt    checkpoints (format in `grm.store.checkpoint`)
    <root>/payloads/<th>/<dd>/<digest>    payload files: th = sha256(tenant)[:16], dd = digest[:2]
    <root>/catalog.sqlite (+ -wal, -shm)  derived SQLite catalog (schema in `grm.store.catalog`);
                                          never on disk for an encrypted store (it would hold text)

Temporary files are the final name plus `.tmp.<pid>.<random>`; they never count as data.
Paths are plain `str` because the file system object (`grm.store.fs`) may not be the OS one.
"""

from __future__ import annotations

import hashlib
import os
import re

MARKER_NAME = "GRM-STORE"
LOCK_NAME = "LOCK"
TMP_INFIX = ".tmp."
FORMAT_NAME = "grm-store"
FORMAT_VERSION = 2  # the newest marker version this code reads
PLAIN_FORMAT_VERSION = 1  # written for unencrypted stores (older GRMs can still open them)
ENCRYPTED_FORMAT_VERSION = 2  # written for encrypted stores (older GRMs refuse them)

_SEGMENT_RE = re.compile(r"([0-9a-f]{16})\.seg\Z")
_CHECKPOINT_RE = re.compile(r"([0-9a-f]{16})\.ckpt\Z")
DIGEST_RE = re.compile(r"[0-9a-f]{64}\Z")


def tenant_dir_name(tenant: str) -> str:
    """First 16 hex of SHA-256(tenant): the tenant's payload folder (no raw names in paths)."""
    return hashlib.sha256(tenant.encode("utf-8")).hexdigest()[:16]


def tmp_name(path: str) -> str:
    """A fresh temporary sibling of `path` (same directory, so the rename is atomic)."""
    return f"{path}{TMP_INFIX}{os.getpid()}.{os.urandom(4).hex()}"


def is_tmp(name: str) -> bool:
    return TMP_INFIX in name


class Layout:
    """Path arithmetic for one store root; does no I/O."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.marker = os.path.join(root, MARKER_NAME)
        self.lock = os.path.join(root, LOCK_NAME)
        self.log_dir = os.path.join(root, "log")
        self.checkpoint_dir = os.path.join(root, "checkpoints")
        self.payload_dir = os.path.join(root, "payloads")
        self.catalog = os.path.join(root, "catalog.sqlite")

    def segment(self, generation: int) -> str:
        return os.path.join(self.log_dir, f"{generation:016x}.seg")

    def checkpoint(self, lsn: int) -> str:
        return os.path.join(self.checkpoint_dir, f"{lsn:016x}.ckpt")

    def tenant_payloads(self, tenant: str) -> str:
        return os.path.join(self.payload_dir, tenant_dir_name(tenant))

    def payload(self, tenant: str, digest: str) -> str:
        return os.path.join(self.tenant_payloads(tenant), digest[:2], digest)

    def relative(self, path: str) -> str:
        return os.path.relpath(path, self.root)


def parse_segment_name(name: str) -> int | None:
    """Generation number of a segment file name, or None if the name is not a segment."""
    m = _SEGMENT_RE.match(name)
    return int(m.group(1), 16) if m else None


def parse_checkpoint_name(name: str) -> int | None:
    """LSN of a checkpoint file name, or None if the name is not a checkpoint."""
    m = _CHECKPOINT_RE.match(name)
    return int(m.group(1), 16) if m else None
