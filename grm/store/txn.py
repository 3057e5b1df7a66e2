"""Txn: the mutations of one transaction, collected until `Store.transaction()` exits.

Each `put` / `delete` / `set_state` validates its arguments, writes the payload file (durably,
before any log frame can name it), encodes its log frame body and records its effect in an
overlay that later calls in the same transaction see. Nothing reaches the log, the host state
or the catalog until the `with` block exits without an exception; then all frames and one commit
frame are appended in one write. The store's lock is held throughout, so the LSN each mutation
will get is known when it is added and returned in its Record.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from grm.errors import StoreError, UserInputError
from grm.store.fs import Bytes
from grm.store.log import MAX_BODY, encode_body
from grm.store.record import (
    Record,
    check_key,
    check_name,
    check_state,
    check_text,
    exported,
    normalize_meta,
)

if TYPE_CHECKING:
    from grm.store.store import Store

_Id = tuple[str, str, str]  # (tenant, kind, key)


class Txn:
    def __init__(self, store: Store, first_lsn: int) -> None:
        self._store = store
        self.first_lsn = first_lsn  # also the transaction id in every frame
        self._next_lsn = first_lsn
        self.bodies: list[bytes] = []
        self.overlay: dict[_Id, Record | None] = {}  # final effect per row; None = deleted
        self.mode: str | None = None  # set by log_mode
        self.finished = False

    def _check(self) -> None:
        if self.finished:
            raise StoreError("transaction already finished")
        self._store._check_writable()

    def _current(self, ident: _Id) -> Record | None:
        if ident in self.overlay:
            return self.overlay[ident]
        return self._store._state.get(*ident)

    def _add(self, mutation: dict, ident: _Id | None, rec: Record | None) -> None:
        codec = self._store._codec
        if codec.encrypted and ident is not None:  # key, parent, meta, text never in clear
            mutation = codec.seal_mutation(mutation, self._next_lsn)
        body = encode_body({**mutation, "txn": self.first_lsn, "dur": self._store.durable_lsn})
        if len(body) > MAX_BODY:
            raise UserInputError(f"record {ident} is too large for one log frame ({len(body)} bytes)")
        self.bodies.append(body)
        if ident is not None:
            self.overlay[ident] = rec
        self._next_lsn += 1

    def commit_body(self) -> bytes:
        return encode_body({"op": "commit", "txn": self.first_lsn, "count": len(self.bodies),
                            "dur": self._store.durable_lsn})

    def log_mode(self, mode: str) -> None:
        """A record that the durability mode is now `mode` (the store calls this)."""
        self._check()
        self.mode = mode
        self._add({"op": "mode", "mode": mode}, None, None)

    def put(self, tenant: str, kind: str, key: str, *, meta: dict | None = None,
            payload: Bytes | None = None, parent: str | None = None, text: str | None = None,
            state: str = "active") -> Record:
        """Write (replace) the row (tenant, kind, key). Returns it as it will be committed."""
        self._check()
        ident = (check_name("tenant", tenant), check_name("kind", kind), check_key("key", key))
        parent = check_key("parent", parent, optional=True)
        text = check_text(text)
        state = check_state(state)
        meta = normalize_meta(meta)
        if payload is not None and not isinstance(payload, (bytes, bytearray, memoryview)):
            raise UserInputError(f"payload must be bytes, got {type(payload).__name__}")
        digest, size = None, 0
        if payload is not None:
            digest, size = self._store._write_payload(tenant, kind, key, payload)
        rec = Record(tenant, kind, key, parent, meta, digest, size, text, state, self._next_lsn)
        body = {"op": "put", "tenant": tenant, "kind": kind, "key": key, "parent": parent,
                "meta": meta, "payload": digest, "size": size, "text": text, "state": state}
        self._add(body, ident, rec)
        return exported(rec)

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        """Remove the row; False (and nothing logged) if it does not exist. The payload file
        stays until fsck finds no row naming it."""
        self._check()
        ident = (check_name("tenant", tenant), check_name("kind", kind), check_key("key", key))
        if self._current(ident) is None:
            return False
        self._add({"op": "del", "tenant": tenant, "kind": kind, "key": key}, ident, None)
        return True

    def set_state(self, tenant: str, kind: str, key: str, state: str) -> None:
        self._check()
        ident = (check_name("tenant", tenant), check_name("kind", kind), check_key("key", key))
        state = check_state(state)
        cur = self._current(ident)
        if cur is None:
            raise StoreError(f"no record {tenant}/{kind}/{key} to set to {state!r}")
        rec = Record(cur.tenant, cur.kind, cur.key, cur.parent, cur.meta, cur.payload,
                     cur.payload_size, cur.text, state, self._next_lsn)
        self._add({"op": "state", "tenant": tenant, "kind": kind, "key": key, "state": state}, ident, rec)
