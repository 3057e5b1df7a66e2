"""StoreConfig: everything that decides how a store is opened and written, and the promise each
durability mode makes."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grm.errors import UserInputError
from grm.store.fs import FileSystem

DURABILITY_MODES = ("volatile", "async", "normal", "full", "strict")

# One line per mode: survives a process crash / a power loss, and what may be lost. The crash
# simulator (tests/sim) checks each promise on thousands of disk images.
DURABILITY_PROMISES = {
    "volatile": "process crash: survives; power loss: does not - anything the OS had not yet "
                "written back may be lost (never fsyncs; after a power cut the store may need "
                "fsck or refuse to open with a CorruptionError)",
    "async": "process crash: survives; power loss: survives except the acknowledged writes of "
             "the last async_flush_ms (at most async_max_pending commits), which a background "
             "flusher had not yet fsynced; the hot path never waits for an fsync",
    "normal": "process crash: survives; power loss: survives - nothing acknowledged is lost "
              "(payload file, its directory and the log are fsynced before a write returns); "
              "the derived catalog may be rebuilt on the next open",
    "full": "process crash: survives; power loss: survives - nothing acknowledged is lost, as "
            "normal, and the SQLite catalog is synced on every commit too (no rebuild after a "
            "power cut)",
    "strict": "process crash: survives; power loss: survives - nothing acknowledged is lost, as "
              "full, and every payload file and log append is read back and verified before a "
              "write returns (a disk that loses or garbles a write fails the write, not a read)",
}

# What each mode does at a commit (used by the store; one row per mode).
#   fsync_commit: the log is fsynced (and payloads before it) before the write returns
#   deferred:     payload and log fsyncs are done by the background flusher
#   catalog_full: SQLite synchronous=FULL
#   verify:       read back payload files and log appends after writing them
MODE_RULES = {
    "volatile": dict(fsync_commit=False, deferred=False, catalog_full=False, verify=False),
    "async": dict(fsync_commit=False, deferred=True, catalog_full=False, verify=False),
    "normal": dict(fsync_commit=True, deferred=False, catalog_full=False, verify=False),
    "full": dict(fsync_commit=True, deferred=False, catalog_full=True, verify=False),
    "strict": dict(fsync_commit=True, deferred=False, catalog_full=True, verify=True),
}


@dataclass(frozen=True)
class StoreConfig:
    """How to open a store. `durability` is one of DURABILITY_MODES, each promising:

    - volatile: crash yes, power loss no (never fsyncs).
    - async: crash yes, power loss yes except the last `async_flush_ms` / `async_max_pending`
      commits (background flusher).
    - normal: crash yes, power loss yes, nothing acknowledged lost (fsync before returning).
    - full: as normal, and the derived catalog is synced as well.
    - strict: as full, and payloads and log appends are read back and verified on write.

    The full wording is `DURABILITY_PROMISES[mode]`. A mode change (a different mode at open, or
    `Store.set_durability`) is written to the log as a record of its own.
    """

    root: Path  # the store's folder; created if missing; must be empty or already a GRM store
    durability: str = "normal"  # one of DURABILITY_MODES
    fs: FileSystem | None = None  # the file-system seam; None = LocalFS()
    checkpoint_every: int = 1000  # log frames between checkpoints (bounds recovery replay)
    lock_timeout: float = 0.0  # seconds to wait for another process's lock; 0 = fail at once
    # 32-byte master key: turns on AES-256-GCM encryption at rest (payloads and stored text) with
    # per-tenant keys derived by HKDF-SHA256. A store created with a key can only be opened with
    # it; see `grm.store.crypt.load_master_key` for reading one from a file or the environment.
    master_key: bytes | None = field(default=None, repr=False)
    compress: bool = False  # zstandard-compress payload files (before encryption when encrypted)
    async_flush_ms: int = 50  # async mode: the flusher fsyncs at least this often (ms) ...
    async_max_pending: int = 256  # ... and as soon as this many commits are unsynced
    # Open for reading only: no lock, no file created, changed or removed (works beside a live
    # writer, reading what it had committed at open time, and on read-only media). Writes raise
    # StoreError. The store must exist.
    read_only: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.root, Path):
            if not isinstance(self.root, str) or not self.root:
                raise UserInputError(f"store root must be a path, got {self.root!r}")
            object.__setattr__(self, "root", Path(self.root))
        if self.durability not in DURABILITY_MODES:
            raise UserInputError(
                f"bad durability {self.durability!r}: want one of {', '.join(DURABILITY_MODES)}")
        if not isinstance(self.checkpoint_every, int) or self.checkpoint_every < 1:
            raise UserInputError(f"checkpoint_every must be a positive integer, got {self.checkpoint_every!r}")
        if not isinstance(self.lock_timeout, (int, float)) or self.lock_timeout < 0:
            raise UserInputError(f"lock_timeout must be >= 0 seconds, got {self.lock_timeout!r}")
        if self.master_key is not None and (not isinstance(self.master_key, bytes) or len(self.master_key) != 32):
            raise UserInputError("master key must be exactly 32 bytes")
        if not isinstance(self.read_only, bool):
            raise UserInputError(f"read_only must be True or False, got {self.read_only!r}")
        if not isinstance(self.compress, bool):
            raise UserInputError(f"compress must be True or False, got {self.compress!r}")
        for name in ("async_flush_ms", "async_max_pending"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise UserInputError(f"{name} must be a positive integer, got {v!r}")

    @property
    def syncs(self) -> bool:
        """Whether the store's structure (marker, segments, checkpoints) is fsynced: every mode
        but volatile."""
        return self.durability != "volatile"
