"""HostState: the rows in RAM, authoritative while the store is open.

Both recovery (replaying log frames) and the live store (after a commit is durable) change it
only through `apply`, so the state after a restart is the state before it by construction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from grm.store.envelope import Unauthenticated
from grm.store.record import Record

# (tenant, kind, key, sealed text) -> text; raises Unauthenticated (encrypted stores only)
TextOpener = Callable[[str, str, str, str], str]
# (sealed frame body, lsn) -> plain body; (sealed checkpoint row) -> plain row; Unauthenticated
BodyOpener = Callable[[dict, int], dict]
RowOpener = Callable[[list], list]
SEALED_KEY = "sealed:"  # key prefix of a row whose sealed fields failed authentication (+ kid)

_RowKey = tuple[str, str]  # (tenant, kind)


class HostState:
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
