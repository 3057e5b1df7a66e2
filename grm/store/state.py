"""HostState: the rows in RAM, authoritative while the store is open.

Both recovery (replaying log frames) and the live store (after a commit is durable) change it
only through `apply`, so the state after a restart is the state before it by construction.
"""

from __future__ import annotations

from collections.abc import Iterator

from grm.store.record import Record

_RowKey = tuple[str, str]  # (tenant, kind)


class HostState:
    def __init__(self) -> None:
        self._rows: dict[_RowKey, dict[str, Record]] = {}
        # (tenant, kind, parent) -> keys: children() is on the chain-lookup path, keep it O(1).
        self._children: dict[tuple[str, str, str], dict[str, None]] = {}

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
        if op == "put":
            rec = Record(body["tenant"], body["kind"], body["key"], body["parent"], body["meta"],
                         body["payload"], body["size"], body["text"], body["state"], lsn)
            self.put(rec)
            return rec
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

    def iter_all(self) -> Iterator[Record]:
        for d in list(self._rows.values()):
            yield from list(d.values())
