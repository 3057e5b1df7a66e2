"""A tenant's documents: what each ingested document stored, and deleting one.

What one document stored (`Documents.records_of`):
  document  its row: the exact bytes (the payload), name, layout, and the keys of its chain blocks
            (`blocks`) and sections (`sections`) as the last ingest of it wrote them
  block     those chain blocks and sections; rows another model wrote for the same text under
            the same name (when no other document has that name); and, given `match` (a runtime's
            `ExactMemory.match`), the stored chain its text reads as
  graft     the document grafts of those blocks (they share the block's payload file)
  archive   archive-tier copies of those blocks and grafts (keyed by the source's key)

`delete` removes the document row and, in one transaction, those of its blocks no other document
of the tenant uses, their grafts and their archive copies; facts, chat turns and other documents do
not change. Deleted rows leave their payload files behind until `grm gc` (the store's delete rule).
One copy of this logic serves `grm documents` (store only, no model) and the server's
`/v1/documents` (with the runtime's `match`). Model-free: no torch here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from grm.errors import UserInputError
from grm.store import Record
from grm.store.backend import StoreBackend
from grm.store.kinds import ARCHIVE, BLOCK, DOCUMENT, GRAFT

KINDS = (DOCUMENT, BLOCK, GRAFT, ARCHIVE)  # what a document's records are, in the order shown
MIN_ID_PREFIX = 4  # shortest document id prefix `find` accepts


@dataclass(frozen=True)
class Deleted:
    """What `Documents.delete` removed."""

    id: str
    name: str | None
    blocks: int  # block rows removed
    grafts: int  # graft rows removed (document grafts of those blocks)
    archived: int  # archive-tier rows removed
    kept_shared_blocks: int  # blocks another document of the tenant uses, kept
    freed_bytes: int  # payload bytes of the removed rows (files `grm gc` then removes)

    def to_json(self) -> dict:
        return {"id": self.id, "name": self.name, "deleted": True, "blocks": self.blocks, "grafts": self.grafts,
                "archived": self.archived, "kept_shared_blocks": self.kept_shared_blocks,
                "freed_bytes": self.freed_bytes}


class Documents:
    """The documents of one tenant in one store. `match(text) -> (blocks, keys, bytes)`: the stored
    chain a text reads as (a runtime's `ExactMemory.match`), or None without a model.
    `on_removed(keys)`: told the graft keys a delete removed (a runtime drops them from residency)."""

    def __init__(self, store: StoreBackend, tenant: str,
                 match: Callable[[str], tuple[list, list[str], int]] | None = None,
                 on_removed: Callable[[list[str]], None] | None = None) -> None:
        self.store, self.tenant, self.match, self.on_removed = store, tenant, match, on_removed

    # ----- finding -----------------------------------------------------------------------------
    def list(self) -> list[Record]:
        """Every document row of the tenant, oldest ingest first."""
        return sorted(self.store.records(self.tenant, DOCUMENT), key=lambda r: r.lsn)

    def get(self, doc_id: str) -> Record | None:
        return self.store.get(self.tenant, DOCUMENT, doc_id)

    def find(self, name: str) -> Record:
        """The document named `name` (as ingested), else the one whose id starts with `name`, else
        the one whose name ends with `/name` (`a.txt` for `notes/a.txt`); UserInputError if none
        or several."""
        docs = self.list()
        found = [d for d in docs if d.meta.get("name") == name]
        if not found and len(name) >= MIN_ID_PREFIX:
            found = [d for d in docs if d.key.startswith(name)]
        if not found and name:
            found = [d for d in docs if str(d.meta.get("name", "")).endswith("/" + name.lstrip("/"))]
        if len(found) == 1:
            return found[0]
        if not found:
            raise UserInputError(f"no document {name!r} for tenant {self.tenant!r} (see `grm documents list`)")
        ids = ", ".join(d.key[:12] for d in found)
        raise UserInputError(f"{len(found)} documents match {name!r} for tenant {self.tenant!r}: give an id ({ids})")

    # ----- what a document stored --------------------------------------------------------------
    def _by_name(self) -> dict[str, set[str]]:
        """Block keys per `doc` name their rows were written under (chain and sections layouts)."""
        out: dict[str, set[str]] = {}
        for rec in self.store.records(self.tenant, BLOCK):
            if rec.meta.get("layout") in ("chain", "sections") and isinstance(rec.meta.get("doc"), str):
                out.setdefault(rec.meta["doc"], set()).add(rec.key)
        return out

    def blocks_of(self, doc: Record, by_name: dict[str, set[str]] | None = None,
                  names: dict[str, int] | None = None) -> set[str]:
        """Keys of the blocks `doc` is made of (module docstring); blocks shared with other
        documents included: the caller keeps those."""
        owned = set(doc.meta.get("blocks", ())) | set(doc.meta.get("sections", ()))
        name = doc.meta.get("name")
        names = names if names is not None else self._names()
        if isinstance(name, str) and names.get(name, 0) == 1:
            owned |= (by_name if by_name is not None else self._by_name()).get(name, set())
        if self.match is not None:
            data = self.store.read_payload(doc)
            if data is not None:
                owned.update(self.match(data.decode("utf-8"))[1])
        return owned

    def _names(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for d in self.store.records(self.tenant, DOCUMENT):
            if isinstance(d.meta.get("name"), str):
                counts[d.meta["name"]] = counts.get(d.meta["name"], 0) + 1
        return counts

    def grafts_of(self, blocks: Iterable[str]) -> list[Record]:
        """Graft rows made of these blocks (a document graft names its block in `meta.block`)."""
        keys = set(blocks)
        return [r for r in self.store.records(self.tenant, GRAFT) if r.meta.get("block") in keys]

    def records_of(self, doc: Record) -> dict[str, list[Record]]:
        """Every row `doc` stored, by kind (KINDS), each list in key order."""
        blocks = self.blocks_of(doc)
        grafts = self.grafts_of(blocks)
        rows = [self.store.get(self.tenant, BLOCK, k) for k in sorted(blocks)]
        archived = [self.store.get(self.tenant, ARCHIVE, k) for k in sorted(blocks | {g.key for g in grafts})]
        return {DOCUMENT: [doc], BLOCK: [r for r in rows if r is not None], GRAFT: sorted(grafts, key=lambda r: r.key),
                ARCHIVE: [r for r in archived if r is not None]}

    def summary(self, doc: Record, records: dict[str, list[Record]] | None = None) -> dict:
        """One document as `grm documents list` shows it: id, name, layout, text bytes, tokens (of
        its sections, else of its chain blocks, as the last ingest listed them), rows per kind, and the payload bytes they
        name (a payload file counted once; a block shared with another document counted in each)."""
        records = records if records is not None else self.records_of(doc)
        rows = {b.key: b for b in records[BLOCK]}
        listed = doc.meta.get("sections") or doc.meta.get("blocks") or ()
        tokens = sum(_tokens(rows[k]) for k in listed if k in rows)
        files = {(r.kind, r.payload): r.payload_size for rows in records.values() for r in rows if r.payload}
        return {"id": doc.key, "name": doc.meta.get("name"), "layout": doc.meta.get("layout"),
                "bytes": doc.meta.get("bytes", doc.payload_size), "tokens": tokens,
                "records": {kind: len(rows) for kind, rows in records.items()},
                "stored_bytes": sum(files.values())}

    # ----- deleting ----------------------------------------------------------------------------
    def delete(self, doc_id: str) -> Deleted | None:
        """Remove document `doc_id` and what only it uses (module docstring); None if the tenant
        has no such document."""
        doc = self.get(doc_id)
        if doc is None:
            return None
        removed = self.remove_blocks(self.blocks_of(doc), doc)
        return Deleted(doc_id, doc.meta.get("name"), *removed)

    def remove_blocks(self, owned: set[str], doc: Record | None = None) -> tuple[int, int, int, int, int]:
        """Delete the blocks of `owned` that no other document uses, their grafts and archive
        copies, and the document row `doc` (if any), in one transaction: (blocks, grafts, archive
        rows removed, blocks kept shared, payload bytes of the removed rows)."""
        by_name, names = self._by_name(), self._names()
        shared: set[str] = set()
        for d in self.store.records(self.tenant, DOCUMENT):
            if doc is None or d.key != doc.key:
                shared |= self.blocks_of(d, by_name, names)
        blocks = owned - shared
        grafts = self.grafts_of(blocks)
        archived = [r for k in sorted(blocks | {g.key for g in grafts})
                    if (r := self.store.get(self.tenant, ARCHIVE, k)) is not None]
        rows = [r for k in sorted(blocks) if (r := self.store.get(self.tenant, BLOCK, k)) is not None]
        freed = sum(r.payload_size for r in [*rows, *grafts, *archived, *([doc] if doc else [])])
        with self.store.transaction() as txn:
            for rec in [*grafts, *archived, *rows]:
                txn.delete(self.tenant, rec.kind, rec.key)
            if doc is not None:
                txn.delete(self.tenant, DOCUMENT, doc.key)
        if self.on_removed is not None:
            self.on_removed([g.key for g in grafts])
        # kept: stored blocks only (a `seen` document names chain blocks no prompt has stored yet)
        kept = sum(self.store.get(self.tenant, BLOCK, k) is not None for k in owned & shared)
        return len(rows), len(grafts), len(archived), kept, freed


def _tokens(block: Record) -> int:
    return int(block.meta.get("tokens", len(block.meta.get("ids") or ())))
