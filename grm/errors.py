"""GRM's error hierarchy.

Who catches what:
- `UserInputError`, `ModelError`, `DialectError`, `StoreError` (and subclasses) that reach the
  CLI are printed as one line on stderr with exit status 2; API callers get them as typed
  exceptions.
- `CorruptionError` is raised only where damage cannot be treated as a miss (a log whose middle
  is damaged): a damaged *payload* is never an error, it is a miss and is recomputed.
- `StorePoisoned` is raised by every write after an fsync (or other durability) failure, until
  the store is reopened (PostgreSQL's lesson: after a failed fsync the page cache can lie).
"""

from __future__ import annotations


class GrmError(Exception):
    """Base of every error GRM raises on purpose."""


class UserInputError(GrmError):
    """Something the user gave us is wrong: a path, a flag, a question, a command."""


class ModelError(GrmError):
    """A model cannot be found, installed, materialized or loaded."""


class DialectError(GrmError):
    """A model family is unsupported, or an operation its position law forbids was asked for."""


class StoreError(GrmError):
    """The store cannot be opened or written (not a GRM store, locked, bad key, I/O failure)."""


class CorruptionError(StoreError):
    """Bytes on disk are not what was written: names the file, offset and what was expected."""

    def __init__(self, path: str, offset: int, expected: object, got: object, detail: str = "") -> None:
        self.path = path
        self.offset = offset
        self.expected = expected
        self.got = got
        self.detail = detail
        msg = f"corruption in {path} at offset {offset}: expected {expected!r}, got {got!r}"
        super().__init__(msg + (f" ({detail})" if detail else ""))


class StorePoisoned(StoreError):
    """A durability failure happened earlier; writes are refused until the store is reopened."""
