"""HostState: the rows in RAM, authoritative while the store is open.

Both recovery (replaying log frames) and the live store (after a commit is durable) change it
only through `apply`, so the state after a restart is the state before it by construction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from typing import TypeVar

from grm.store.envelope import Unauthenticated
from grm.store.record import Record

# (tenant, kind, key, sealed text) -> text; raises Unauthenticated (encrypted stores only)
TextOpener = Callable[[str, str, str, str], str]
# (sealed frame body, lsn) -> plain body; (sealed checkpoint row) -> plain row; Unauthenticated
BodyOpener = Callable[[dict, int], dict]
RowOpener = Callable[[list], list]
T = TypeVar("T")
SEALED_KEY = "sealed:"  # key prefix of a row whose sealed fields failed authentication (+ kid)

_RowKey = tuple[str, str]  # (tenant, kind)


class HostState:
    # Whether the rows it returns are the ones it holds (the store then hands callers copies, so
    # a caller mutating a row's meta changes nothing here); a catalog-backed state builds each
    # row it returns afresh from SQLite, and nobody else holds it.
    holds_rows = True

    def __init__(self, open_text: TextOpener | None = None, open_body: BodyOpener | None = None,
                 open_row: RowOpener | None = None) -> None:
        self.mode: str | None = None  # durability mode of the last "mode" record (None: never logged)
        self.unauthenticated = 0  # rows whose sealed text failed authentication (kept as damaged)
        self._open_text = open_text
        self._open_body = open_body
        self._open_row = open_row
        self._rows: dict[_RowKey, dict[str, Record]] = {}
        # (tenant, kind, parent) -> keys: children() is on the chain-lookup path, keep it O(1).
        self._children: dict[tuple[str, str, str], dict[str, None]] = {}

    def fresh(self) -> HostState:
        """An empty state that opens sealed rows the same way (a retried recovery)."""
        return HostState(self._open_text, self._open_body, self._open_row)

    def __len__(self) -> int:
        return sum(len(d) for d in self._rows.values())

    def get(self, tenant: str, kind: str, key: str) -> Record | None:
        d = self._rows.get((tenant, kind))
        return d.get(key) if d is not None else None

    def current(self, rec: Record) -> Record | None:
        """This state's row for a row the catalog returned (the catalog is derived from it)."""
        return self.get(rec.tenant, rec.kind, rec.key)

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        keys = self._children.get((tenant, kind, parent), ())
        rows = self._rows.get((tenant, kind), {})
        return [rows[k] for k in list(keys) if k in rows]

    def records(self, tenant: str | None = None, kind: str | None = None) -> list[Record]:
        """A snapshot list (writers may change the dicts while the caller iterates)."""
        out: list[Record] = []
        for (t, k), d in list(self._rows.items()):
            if (tenant is None or t == tenant) and (kind is None or k == kind):
                out.extend(list(d.values()))
        return out

    def since(self, tenant: str, kind: str, lsn: int) -> tuple[list[Record], int]:
        """(rows of (tenant, kind) written after `lsn`, oldest first; how many rows it holds)."""
        d = dict(self._rows.get((tenant, kind), {}))
        return sorted((r for r in d.values() if r.lsn > lsn), key=lambda r: r.lsn), len(d)

    def keys(self, tenant: str, kind: str) -> set[str]:
        return set(self._rows.get((tenant, kind), {}))

    def put(self, rec: Record) -> None:
        d = self._rows.setdefault((rec.tenant, rec.kind), {})
        old = d.get(rec.key)
        if old is not None and old.parent is not None and old.parent != rec.parent:
            self._unlink(old)
        d[rec.key] = rec
        if rec.parent is not None:
            self._children.setdefault((rec.tenant, rec.kind, rec.parent), {})[rec.key] = None

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        d = self._rows.get((tenant, kind))
        if d is None or key not in d:
            return False
        old = d.pop(key)
        if not d:
            del self._rows[(tenant, kind)]
        if old.parent is not None:
            self._unlink(old)
        return True

    def _unlink(self, rec: Record) -> None:
        ck = (rec.tenant, rec.kind, rec.parent)
        keys = self._children.get(ck)  # type: ignore[arg-type]
        if keys is not None:
            keys.pop(rec.key, None)
            if not keys:
                del self._children[ck]  # type: ignore[arg-type]

    def apply(self, body: dict, lsn: int) -> Record | None:
        """Apply one mutation frame body written at `lsn`; returns the row it leaves (None for
        a delete). Unknown rows in `state` ops are ignored: the writer checked they existed."""
        op = body["op"]
        if "sealed" in body:
            body = self._unseal_body(body, lsn)
        if op == "put":
            text, state = self.unseal(body["tenant"], body["kind"], body["key"], body.get("text"),
                                      body.get("etext"), body["state"])
            rec = Record(body["tenant"], body["kind"], body["key"], body["parent"], body["meta"],
                         body["payload"], body["size"], text, state, lsn)
            self.put(rec)
            return rec
        if op == "mode":
            self.mode = body["mode"]
            return None
        if op == "del":
            self.delete(body["tenant"], body["kind"], body["key"])
            return None
        if op == "state":
            old = self.get(body["tenant"], body["kind"], body["key"])
            if old is None:
                return None
            rec = Record(old.tenant, old.kind, old.key, old.parent, old.meta, old.payload,
                         old.payload_size, old.text, body["state"], lsn)
            self.put(rec)
            return rec
        raise ValueError(f"unknown mutation op {op!r}")

    def _unseal_body(self, body: dict, lsn: int) -> dict:
        """The plain body of a sealed frame. One that fails authentication is never served: a
        put leaves a row under SEALED_KEY + kid with no text or meta, state "damaged"."""
        try:
            if self._open_body is None:
                raise Unauthenticated("store has no key")
            return self._open_body(body, lsn)
        except Unauthenticated:
            self.unauthenticated += 1
            out = {k: v for k, v in body.items() if k not in ("sealed", "kid")}
            out.update(key=SEALED_KEY + str(body.get("kid")), parent=None, meta={}, text=None)
            if body["op"] == "put":
                out["state"] = "damaged"
            return out

    def unseal(self, tenant: str, kind: str, key: str, text: str | None, sealed: str | None,
               state: str) -> tuple[str | None, str]:
        """(text, state) of a row whose text may be sealed: a text that fails authentication is
        never served; the row comes back with no text and state "damaged"."""
        if sealed is None:
            return text, state
        try:
            if self._open_text is None:
                raise Unauthenticated("store has no key")
            return self._open_text(tenant, kind, key, sealed), state
        except Unauthenticated:
            self.unauthenticated += 1
            return None, "damaged"

    def decode_row(self, v: list) -> Record:
        """A checkpoint row (`Record.to_list` form; an encrypted store's row is sealed whole,
        {"r": sealed} in the text column, or, in stores written before that, its text {"e": sealed})."""
        if isinstance(v[7], dict) and "r" in v[7]:
            try:
                if self._open_row is None:
                    raise Unauthenticated("store has no key")
                return Record.from_list(self._open_row(v))
            except Unauthenticated:
                self.unauthenticated += 1
                return Record(v[0], v[1], SEALED_KEY + str(v[2]), None, {}, v[5], v[6], None, "damaged", v[9])
        if isinstance(v[7], dict):
            text, state = self.unseal(v[0], v[1], v[2], None, v[7].get("e"), v[8])
            v = [*v[:7], text, state, v[9]]
        return Record.from_list(v)

    def iter_all(self) -> Iterator[Record]:
        for d in list(self._rows.values()):
            yield from list(d.values())

    def tally(self) -> dict[str, dict[str, dict[str, int]]]:
        """tenant -> kind -> rows, rows per state, and payload bytes (each payload once)."""
        tenants: dict[str, dict[str, dict[str, int]]] = {}
        seen: set[tuple[str, str, str]] = set()
        for r in self.iter_all():
            s = _tally_entry(tenants, r.tenant, r.kind)
            s["records"] += 1
            s[r.state] += 1
            if r.payload is not None and (r.tenant, r.kind, r.payload) not in seen:
                seen.add((r.tenant, r.kind, r.payload))
                s["payload_bytes"] += r.payload_size
        return tenants


def _tally_entry(tenants: dict, tenant: str, kind: str) -> dict[str, int]:
    return tenants.setdefault(tenant, {}).setdefault(
        kind, {"records": 0, "active": 0, "superseded": 0, "damaged": 0, "payload_bytes": 0})


class CatalogState(HostState):
    """The host state of a plain local store: the rows live in the SQLite catalog (grm.store.
    catalog) and are read on demand, so opening a store of a million rows reads no row and its
    memory does not grow with them. Reads check each row's CRC (`RowDamaged`, a sqlite3
    DatabaseError the store answers with a rebuild from checkpoint + log). Recovery's replay
    writes through `put` / `delete` inside one catalog transaction, committed by `finish`;
    live commits go through `Catalog.apply` (the store calls `committed`)."""

    holds_rows = False

    def __init__(self, catalog, heal: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.catalog = catalog
        self.heal = heal  # rebuilds the catalog from checkpoint + log (the store sets it)
        self.mode = catalog.mode() if catalog.usable_lsn() is not None else None
        self._count: int | None = None

    def _read(self, fn: Callable[[], T]) -> T:
        """A read; a damaged catalog (SQLite error, a row failing its CRC) is rebuilt, once."""
        try:
            return fn()
        except sqlite3.DatabaseError:
            if self.heal is None:
                raise
            self.heal()
            return fn()

    def fresh(self) -> HostState:
        raise TypeError("a catalog-backed state is rebuilt, not retried")

    def __len__(self) -> int:
        if self._count is None:
            self._count = self._read(self.catalog.count)
        return self._count

    def get(self, tenant: str, kind: str, key: str) -> Record | None:
        return self._read(lambda: self.catalog.get(tenant, kind, key))

    def current(self, rec: Record) -> Record | None:
        return rec  # read from this very catalog, its CRC checked

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        return self._read(lambda: self.catalog.children(tenant, kind, parent))

    def records(self, tenant: str | None = None, kind: str | None = None) -> list[Record]:
        return self._read(lambda: list(self.catalog.select(tenant, kind)))

    def since(self, tenant: str, kind: str, lsn: int) -> tuple[list[Record], int]:
        return self._read(lambda: self.catalog.since(tenant, kind, lsn))

    def keys(self, tenant: str, kind: str) -> set[str]:
        return self._read(lambda: self.catalog.keys(tenant, kind))

    def iter_all(self) -> Iterator[Record]:
        return self.catalog.select()

    def tally(self) -> dict[str, dict[str, dict[str, int]]]:
        """As HostState.tally, counted by SQLite (no row read into Python)."""
        tenants: dict[str, dict[str, dict[str, int]]] = {}
        counts, sizes = self._read(self.catalog.tally)
        for tenant, kind, state, n in counts:
            s = _tally_entry(tenants, tenant, kind)
            s["records"] += n
            s[state] = s.get(state, 0) + n
        for tenant, kind, size in sizes:
            _tally_entry(tenants, tenant, kind)["payload_bytes"] += size
        return tenants

    def put(self, rec: Record) -> None:
        self.catalog.begin()
        self._moved(self.catalog.upsert(rec))

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        self.catalog.begin()
        gone = self.catalog.remove(tenant, kind, key)
        self._moved(gone)
        return gone != 0

    def finish(self, lsn: int) -> None:
        """Commit the replay (and any checkpoint rows loaded) at `lsn`."""
        self.catalog.finish(lsn, self.mode)

    def committed(self, delta: int, mode: str | None) -> None:
        """A live commit reached the catalog (`Catalog.apply` returned `delta`)."""
        self._moved(delta)
        if mode is not None:
            self.mode = mode

    def forget_count(self) -> None:
        self._count = None

    def _moved(self, delta: int) -> None:
        if self._count is not None:
            self._count += delta


class OverlayState(HostState):
    """What the log after a checkpoint does to the checkpoint's rows, without those rows: puts
    and deletes as they are, a state change of a row the log never wrote kept as a pending
    (state, lsn) for that row. `merge` streams the checkpoint's rows through it (fsck's and the
    catalog rebuild's view of the log's truth, in memory bounded by the log, not the rows)."""

    def __init__(self) -> None:
        super().__init__()
        self.deleted: set[tuple[str, str, str]] = set()
        self.pending: dict[tuple[str, str, str], tuple[str, int]] = {}

    def put(self, rec: Record) -> None:
        ident = (rec.tenant, rec.kind, rec.key)
        self.deleted.discard(ident)
        self.pending.pop(ident, None)
        super().put(rec)

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        self.deleted.add((tenant, kind, key))
        self.pending.pop((tenant, kind, key), None)
        return super().delete(tenant, kind, key)

    def apply(self, body: dict, lsn: int) -> Record | None:
        if body["op"] == "state" and "sealed" not in body:
            ident = (body["tenant"], body["kind"], body["key"])
            if self.get(*ident) is None and ident not in self.deleted:
                self.pending[ident] = (body["state"], lsn)
                return None
        return super().apply(body, lsn)

    def merge(self, base: Iterator[Record]) -> Iterator[Record]:
        """The checkpoint's rows `base` with this log's effect: the true row set."""
        for rec in base:
            ident = (rec.tenant, rec.kind, rec.key)
            if ident in self.deleted or self.get(*ident) is not None:
                continue
            change = self.pending.get(ident)
            if change is not None:
                rec = Record(rec.tenant, rec.kind, rec.key, rec.parent, rec.meta, rec.payload,
                             rec.payload_size, rec.text, change[0], change[1])
            yield rec
        yield from self.iter_all()
