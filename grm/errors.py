"""GRM's error hierarchy.

Who catches what:
- `UserInputError`, `ModelError`, `DialectError`, `StoreError` (and subclasses) that reach the
  CLI are printed as one line on stderr with exit status 2; API callers get them as typed
  exceptions.
- `CorruptionError` is raised only where damage cannot be treated as a miss (a log whose middle
  is damaged): a damaged *payload* is never an error, it is a miss and is recomputed.
- `StorePoisoned` is raised by every write after an fsync (or other durability) failure, until
  the store is reopened (PostgreSQL's lesson: after a failed fsync the page cache can lie).
- `StoreLocked` (a StoreError) says another process holds a local store's writer lock.
- `StoreBusy` (a StoreError) says another process holds what a write needs, and for how long.
What any of them says may reach a log or a terminal: `redact` masks URL passwords, and
`redact_logs` puts that on the log handlers of a long-lived face (the CLI, the server).
"""

from __future__ import annotations

import logging
import re


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


class StoreLocked(StoreError):
    """Another process holds the store's one-writer lock; `pid` names it ("unknown" when its LOCK
    hint is unreadable). The CLI names a `grm serve` holding it (grm/cli/remote.py)."""

    def __init__(self, message: str, root: str, pid: str) -> None:
        super().__init__(message)
        self.root, self.pid = root, pid


class StorePoisoned(StoreError):
    """A durability failure happened earlier; writes are refused until the store is reopened."""


class StoreBusy(StoreError):
    """Another process holds what this write needs (a Redis tenant's write lease): try again
    after `retry_after_s` seconds. The server answers it 503 with Retry-After, not 500."""

    def __init__(self, message: str, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


# scheme://user:password@host: the password part of a URL's credentials
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-zA-Z][a-zA-Z0-9+.-]*://[^/@\s:'\"]*:)(?P<pw>[^\s/'\"]+)@")


def redact(text: str) -> str:
    """`text` with every password in a URL masked: redis://:pw@host -> redis://:***@host."""
    return _URL_PASSWORD.sub(lambda m: f"{m.group('head')}***@", text)


class RedactingFilter(logging.Filter):
    """A handler filter that masks URL passwords in every record it passes, traceback included."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        record.msg, record.args = redact(message), None
        if record.exc_info and not record.exc_text:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


def redact_logs(*loggers: str) -> None:
    """Put a RedactingFilter on every handler of the root logger and of `loggers` (once each)."""
    for name in ("", *loggers):
        for handler in logging.getLogger(name or None).handlers:
            if not any(isinstance(f, RedactingFilter) for f in handler.filters):
                handler.addFilter(RedactingFilter())
