"""fsck: verify every payload against its digest, find orphan payload files, compare the catalog
with the log-derived host state. Finding is here; repairing goes through the store's logged
writes (`Store.fsck(repair=True)`), so a repair is itself durable and replayable.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from grm.store.catalog import Catalog
from grm.store.layout import Layout, tenant_dir_name
from grm.store.payloads import PayloadFiles
from grm.store.record import Record, canonical_json
from grm.store.state import HostState


@dataclass(frozen=True)
class FsckReport:
    """What fsck found. Damage (exit 1 from `grm fsck`) is any of: `damaged`, `already_damaged`,
    `lost` non-empty, or `catalog_ok` false. A row marked damaged stays in `already_damaged`
    (every run, repair or not) until a write replaces it (`Store.is_damaged` tells re-ingest to)."""

    records: int  # rows in the store
    damaged: list[str]  # `tenant/kind/key` of rows whose payload is missing or corrupt, not yet marked damaged
    orphans: list[str]  # payload files (relative to the root) that no row names
    repaired: list[str]  # what repair did, one line each
    already_damaged: list[str] = field(default_factory=list)  # rows in state "damaged" (marked earlier)
    catalog_ok: bool = True  # the catalog held exactly the host state at the log's LSN
    lost: list[str] = field(default_factory=list)  # records known lost (grm.store.evidence), unacknowledged
    catalog_checked: bool = True  # False: a read-only fsck beside a live writer leaves its catalog alone

    def to_json(self) -> dict:
        return {"records": self.records, "damaged": self.damaged, "orphans": self.orphans,
                "repaired": self.repaired, "already_damaged": self.already_damaged,
                "catalog_ok": self.catalog_ok, "lost": self.lost, "catalog_checked": self.catalog_checked}


@dataclass
class Findings:
    damaged: list[Record]
    already_damaged: list[Record]
    orphans: list[str]  # absolute paths
    catalog_ok: bool


def _key(r: Record) -> tuple:
    return (r.tenant, r.kind, r.key, r.parent, canonical_json(r.meta), r.payload, r.payload_size,
            r.text, r.state, r.lsn)


def row_digest(rows: Iterable[Record]) -> tuple[int, int]:
    """(count, sum of each row's 128-bit hash mod 2^128): equal for equal row sets whatever
    their order, so two streams of a million rows are compared in constant memory."""
    n, total = 0, 0
    for r in rows:
        n += 1
        total += int.from_bytes(hashlib.sha256(canonical_json(list(_key(r))).encode("utf-8")).digest()[:16], "little")
    return n, total % (1 << 128)


def find(state: HostState, payloads: PayloadFiles, layout: Layout, catalog: Catalog | None,
         lsn: int, truth: Callable[[], Iterable[Record]] | None = None) -> Findings:
    """`truth()` streams the rows as the log says (default: the resident state's); payloads
    are checked against them and the catalog compared with them."""
    truth = truth or state.iter_all
    verdict: dict[tuple[str, str], str | None] = {}  # each (tenant, digest) hashed once
    damaged, already = [], []
    referenced: set[tuple[str, str]] = set()
    for r in truth():
        if r.state == "damaged":  # marked: reported every run until a write replaces the row
            already.append(r)
        if r.payload is None:
            continue
        referenced.add((tenant_dir_name(r.tenant), r.payload))
        vk = (r.tenant, r.payload)
        if vk not in verdict:
            verdict[vk] = payloads.check(r.tenant, r.kind, r.key, r.payload, r.payload_size)
        if verdict[vk] is not None and r.state != "damaged":
            damaged.append(r)
    orphans = [path for path, th, digest in payloads.files()
               if digest is None or (th, digest) not in referenced]
    catalog_ok = True
    if catalog is not None:
        try:
            catalog_ok = (catalog.lsn() == lsn and catalog.intact() and
                          row_digest(catalog.select()) == row_digest(truth()))
        except (sqlite3.DatabaseError, ValueError):
            catalog_ok = False
    return Findings(damaged, already, orphans, catalog_ok)
