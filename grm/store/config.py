"""StoreConfig: everything that decides how a store is opened and written."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from grm.errors import UserInputError
from grm.store.fs import FileSystem

# volatile: no fsync at all. The others fsync payloads and the log on every commit; their
# differences (async group commit, full/strict directory and checkpoint policy) are a later
# issue's, and until then they behave like "normal".
DURABILITY_MODES = ("volatile", "async", "normal", "full", "strict")


@dataclass(frozen=True)
class StoreConfig:
    root: Path  # the store's folder; created if missing; must be empty or already a GRM store
    durability: str = "normal"  # one of DURABILITY_MODES
    fs: FileSystem | None = None  # the file-system seam; None = LocalFS()
    checkpoint_every: int = 1000  # log frames between checkpoints (bounds recovery replay)
    lock_timeout: float = 0.0  # seconds to wait for another process's lock; 0 = fail at once

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

    @property
    def syncs(self) -> bool:
        """Whether writes are fsynced (every mode but volatile)."""
        return self.durability != "volatile"
