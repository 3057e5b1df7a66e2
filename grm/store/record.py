"""Record: one catalog row as the store keeps it, and the checks every row passes.

A row is identified by (tenant, kind, key). The store never interprets kind, key, parent, meta
or text: it validates their shape, keeps them, indexes parent and text, and hands them back.
`meta` is kept as canonical JSON (sorted keys, no spaces, UTF-8, no NaN) so the log, the
checkpoint and the catalog all hold the same bytes for the same metadata.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from grm.errors import UserInputError

NAME_RE = re.compile(r"[A-Za-z0-9_.-]{1,64}\Z")
STATES = ("active", "superseded", "damaged")
MAX_KEY_CHARS = 1024


@dataclass(frozen=True)
class Record:
    tenant: str
    kind: str  # e.g. "block", "sinks", "document", "graft": the store does not interpret it
    key: str  # unique within (tenant, kind)
    parent: str | None  # indexed: children(tenant, kind, parent) finds rows by it
    meta: dict  # JSON metadata; a private copy: mutating it changes nothing in the store
    payload: str | None  # SHA-256 hex of the payload bytes, or None
    payload_size: int  # bytes; 0 when there is no payload
    text: str | None  # indexed by FTS5 for search_text
    state: str  # one of STATES
    lsn: int  # LSN of the log frame that last wrote this row

    @property
    def ident(self) -> str:
        """`tenant/kind/key`: how fsck reports name a row."""
        return f"{self.tenant}/{self.kind}/{self.key}"

    def to_list(self) -> list[Any]:
        """Positional form used by checkpoints (field order of the dataclass)."""
        return [self.tenant, self.kind, self.key, self.parent, self.meta, self.payload,
                self.payload_size, self.text, self.state, self.lsn]

    @classmethod
    def from_list(cls, v: list[Any]) -> Record:
        return cls(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9])


def _copy_json(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _copy_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_copy_json(x) for x in v]
    return v


def exported(rec: Record) -> Record:
    """What callers get: a Record whose meta they may mutate without touching the store."""
    return Record(rec.tenant, rec.kind, rec.key, rec.parent, _copy_json(rec.meta), rec.payload,
                  rec.payload_size, rec.text, rec.state, rec.lsn)


def canonical_json(obj: Any) -> str:
    """The one JSON spelling of `obj` (raises TypeError/ValueError if it is not JSON)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def check_name(what: str, value: object) -> str:
    """Tenant and kind names become catalog keys and (hashed) paths: keep them boring."""
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise UserInputError(f"bad {what} name {value!r}: use 1-64 characters of A-Z a-z 0-9 _ . -")
    return value


def check_key(what: str, value: object, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_CHARS:
        raise UserInputError(f"bad {what} {value!r}: want a non-empty string of at most {MAX_KEY_CHARS} characters")
    _check_utf8(what, value)
    return value


def check_state(value: object) -> str:
    if value not in STATES:
        raise UserInputError(f"bad record state {value!r}: want one of {', '.join(STATES)}")
    return value  # type: ignore[return-value]


def check_text(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise UserInputError(f"record text must be a string or None, got {type(value).__name__}")
    _check_utf8("text", value)
    return value


def normalize_meta(meta: object) -> dict:
    """A private copy of `meta` as it will read back from the log (round-tripped through JSON)."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise UserInputError(f"record meta must be a dict, got {type(meta).__name__}")
    try:
        text = canonical_json(meta)
        text.encode("utf-8")
    except (TypeError, ValueError) as e:
        raise UserInputError(f"record meta is not JSON-serializable: {e}") from None
    return json.loads(text)


def _check_utf8(what: str, value: str) -> None:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise UserInputError(f"{what} is not valid Unicode (lone surrogate?)") from None
