"""API keys -> tenants. Keys are kept hashed at rest.

Keys file format (UTF-8 text, one key a line; `#` starts a comment; blank lines ignored):

    TENANT sha256:HEX64

HEX64 is the SHA-256 of the key's UTF-8 bytes; the key itself is never stored. `grm serve
--add-key TENANT --keys FILE` makes a random key (`grm-` + 43 URL-safe characters), appends its
line (file mode 0600, written to a temp file, fsynced, then renamed) and prints the key once.
A request carries the key as `Authorization: Bearer KEY` (what the openai client sends), or, for
the web inspector, in the `grm_key` cookie set by its login form.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from pathlib import Path

from grm.errors import UserInputError

_LINE = re.compile(r"([A-Za-z0-9][A-Za-z0-9_.-]{0,63})\s+sha256:([0-9a-f]{64})")


def key_digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class KeyRing:
    """digest -> tenant, loaded once from a keys file."""

    def __init__(self, tenants_by_digest: dict[str, str]) -> None:
        self._by_digest = dict(tenants_by_digest)

    @classmethod
    def load(cls, path: Path) -> "KeyRing":
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as e:
            raise UserInputError(f"cannot read keys file {path}: {e.strerror or e}") from e
        out: dict[str, str] = {}
        for n, raw in enumerate(text.splitlines(), 1):
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            m = _LINE.fullmatch(line)
            if m is None:
                raise UserInputError(f"{path}:{n}: want 'TENANT sha256:HEX64', got {line[:40]!r}")
            out[m.group(2)] = m.group(1)
        if not out:
            raise UserInputError(f"keys file {path} holds no key; add one with `grm serve --add-key TENANT --keys {path}`")
        return cls(out)

    @property
    def tenants(self) -> list[str]:
        return sorted(set(self._by_digest.values()))

    def tenant_for(self, key: str | None) -> str | None:
        """The tenant of `key`, or None (compared in constant time)."""
        if not key:
            return None
        digest = key_digest(key)
        for known, tenant in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return tenant
        return None


def add_key(path: Path, tenant: str) -> str:
    """Make a new key for `tenant`, append its hash to `path` (created 0600); return the key."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", tenant):
        raise UserInputError(f"bad tenant name {tenant!r}: 1-64 of letters, digits, '_', '.', '-'")
    path = Path(path).expanduser()
    key = "grm-" + secrets.token_urlsafe(32)
    old = path.read_text(encoding="utf-8") if path.exists() else "# grm serve API keys: TENANT sha256:HEX64\n"
    if old and not old.endswith("\n"):
        old += "\n"
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(old + f"{tenant} sha256:{key_digest(key)}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return key
