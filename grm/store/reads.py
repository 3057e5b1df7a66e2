"""The read side of `Store` (a mixin it inherits): lookups in the host state, verified payload
reads, text search through the catalog, stats and fsck. Nothing here writes, except fsck's
repair, which goes through the store's logged writes."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from grm.errors import StoreError, UserInputError
from grm.store.config import DURABILITY_PROMISES
from grm.store.catalog import Catalog
from grm.store.evidence import acknowledge, catalog_losses, lost_records
from grm.store.fs import OsPaths
from grm.store.fsck import FsckReport, find
from grm.store.layout import parse_segment_name
from grm.store.record import Record, check_name, exported

if TYPE_CHECKING:
    from grm.store.store import Store

log = logging.getLogger("grm.store")
_WORD = re.compile(r"\w+")
_MAX_QUERY_TOKENS = 64


class StoreReads:
    def _out(self: Store, rec: Record) -> Record:
        """`rec` as a caller gets it: a row whose meta it may mutate without touching the store (a
        copy where the host state holds the row; a catalog's row is built afresh for this read)."""
        return exported(rec) if self._state.holds_rows else rec

    def get(self: Store, tenant: str, kind: str, key: str) -> Record | None:
        self._check_open()
        rec = self._state.get(check_name("tenant", tenant), check_name("kind", kind), key)
        return self._out(rec) if rec is not None else None

    def children(self: Store, tenant: str, kind: str, parent: str) -> list[Record]:
        self._check_open()
        rows = self._state.children(check_name("tenant", tenant), check_name("kind", kind), parent)
        return [self._out(r) for r in sorted(rows, key=lambda r: r.lsn) if r.state == "active"]

    def records(self: Store, tenant: str | None = None, kind: str | None = None) -> Iterator[Record]:
        self._check_open()
        if tenant is not None:
            check_name("tenant", tenant)
        if kind is not None:
            check_name("kind", kind)
        return (self._out(r) for r in self._state.records(tenant, kind))

    def rows_since(self: Store, tenant: str, kind: str, lsn: int) -> tuple[list[Record], int]:
        """See `grm.store.backend.ChangeFeed`."""
        self._check_open()
        rows, n = self._state.since(check_name("tenant", tenant), check_name("kind", kind), lsn)
        return [self._out(r) for r in rows], n

    def keys(self: Store, tenant: str, kind: str) -> set[str]:
        """See `grm.store.backend.ChangeFeed`."""
        self._check_open()
        return self._state.keys(check_name("tenant", tenant), check_name("kind", kind))

    def read_payload(self: Store, record: Record) -> bytes | None:
        """The payload bytes if the file decodes (and, encrypted, authenticates under the
        record's tenant, kind and key) to `record.payload_size` bytes that re-hash to
        `record.payload`; otherwise None, counted and logged once per file. Never other bytes."""
        self._check_open()
        if record.payload is None:
            return None
        try:
            data, problem = self._payloads.read(record.tenant, record.kind, record.key, record.payload,
                                                record.payload_size)
        except OSError as e:  # EIO and friends: a miss like any other damage
            data, problem = None, "corrupt"
            log.debug("payload read error: %s", e)
        if problem is not None:
            self._count(f"payload_{problem}")
            with self._counter_lock:
                first = (record.tenant, record.payload) not in self._warned
                self._warned.add((record.tenant, record.payload))
            if first:
                log.warning("payload %s of %s is %s: serving a miss", record.payload, record.ident, problem)
        return data

    def read_payload_into(self: Store, record: Record, plan: Callable[[bytes], list[memoryview] | None]) -> bool:
        """Read a plain safetensors payload straight into the caller's buffers: `plan(header JSON)`
        returns buffers covering its tensor bytes in file order (or None). True only if the file
        is exactly the record's bytes (size and SHA-256 over everything read, as `read_payload`
        checks). False is not a verdict: use `read_payload`, which decides, counts and logs."""
        self._check_open()
        if record.payload is None:
            return False
        return self._payloads.read_into(record.tenant, record.payload, record.payload_size, plan)

    def payload_path(self: Store, record: Record) -> Path:
        """Where the record's payload file lives (for diagnostics, benchmarks and tests; reads go
        through `read_payload`, which verifies)."""
        if record.payload is None:
            raise StoreError(f"{record.ident} has no payload")
        return Path(self._layout.payload(record.tenant, record.payload))

    def search_text(self: Store, tenant: str, query: str, kind: str | None = None,
                    limit: int = 10) -> list[tuple[Record, float]]:
        """Active rows of `tenant` whose text matches any word of `query`, by BM25 (higher is
        better). `query` is plain user text: its words are quoted, never parsed as FTS syntax."""
        self._check_open()
        check_name("tenant", tenant)
        if kind is not None:
            check_name("kind", kind)
        if not isinstance(query, str):
            raise UserInputError(f"search query must be a string, got {type(query).__name__}")
        tokens = list(dict.fromkeys(_WORD.findall(query)))[:_MAX_QUERY_TOKENS]
        if not tokens or limit <= 0:
            return []
        with self._lock:
            self._check_open()
            hits = self._catalog_call(lambda: self._catalog.search(tenant, tokens, kind, limit))
        out = []
        for found, score in hits:
            rec = self._state.current(found)
            if rec is not None and rec.state == "active":
                out.append((self._out(rec), score))
        return out

    def stats(self: Store) -> dict:
        self._check_open()
        tenants = self._state.tally()
        with self._lock:
            segs = [n for n in self._fs.listdir(self._layout.log_dir) if parse_segment_name(n) is not None]
            log_bytes = sum(self._fs.size(os.path.join(self._layout.log_dir, n)) for n in segs)
        return {"backend": "local", "root": self._layout.root, "durability": self._mode,
                "durability_promise": DURABILITY_PROMISES[self._mode],
                "encrypted": self._codec.encrypted, "compressed": self._codec.compress,
                "records": len(self._state), "tenants": tenants, "log_bytes": log_bytes,
                "log_segments": len(segs), "last_lsn": self._last_lsn, "durable_lsn": self._durable_lsn,
                "checkpoint_lsn": self._checkpoint_lsn, "poisoned": self._poisoned is not None,
                "counters": dict(self.counters)}

    def is_damaged(self: Store, record: Record, *, verify: bool = False) -> bool:
        """True if `record` must be recomputed and written again: it is marked damaged (fsck
        --repair, a text that failed authentication), or (`verify`) its payload file does not
        verify now. Re-ingest uses this instead of "the row exists": a `put` of the same row
        with good bytes replaces it and heals it (fsck stops reporting it)."""
        self._check_open()
        if record.state == "damaged":
            return True
        if not verify or record.payload is None:
            return False
        return self._payloads.check(record.tenant, record.kind, record.key, record.payload,
                                    record.payload_size) is not None

    def fsck(self: Store, repair: bool = False) -> FsckReport:
        """Verify every payload, find orphan files, compare catalog and log, list records known
        lost (`grm.store.evidence`). With repair: remove orphans, mark rows with bad payloads
        damaged (a logged set_state; they stay reported in `already_damaged` until rewritten),
        rebuild the catalog if it disagrees, acknowledge loss evidence (kept, moved aside).
        Never deletes a row or a file a row names. Read-only opens check the stored catalog
        only while no writer holds the store (its catalog moves under a live writer)."""
        with self._lock:
            self._check_open()
            if self._txn is not None:
                raise StoreError("cannot run fsck inside a transaction")
            if repair:
                self._check_writable()
            with self._catalog_for_fsck() as catalog:
                f = find(self._state, self._payloads, self._layout, catalog, self._last_lsn,
                         truth=self._fsck_truth())
                # read-only: a stored catalog ahead of the log names what the log lost, as a
                # writer's open would (it writes that evidence; this open writes nothing)
                unrecorded = catalog_losses(catalog, self._state, self._last_lsn) if (
                    self._read_only and catalog is not None and catalog.path is not None) else None
            repaired: list[str] = []
            if repair:
                for path in f.orphans:
                    self._io(lambda p=path: self._fs.remove(p))
                    repaired.append(f"removed orphan {self._layout.relative(path)}")
                if f.orphans:
                    self._payloads.forget_all()  # a removed file must be written again, not trusted by name
                if f.damaged:
                    with self.transaction() as txn:
                        for r in f.damaged:
                            txn.set_state(r.tenant, r.kind, r.key, "damaged")
                            repaired.append(f"marked damaged {r.ident} (re-ingest or a put replaces it)")
                if catalog is not None and not f.catalog_ok:
                    self._catalog_call(self._rebuild_catalog)
                    self._count("catalog_rebuilds")
                    repaired.append("rebuilt catalog")
                for path in self._io(lambda: acknowledge(self._fs, self._layout, sync=self.config.syncs)):
                    repaired.append(f"acknowledged lost records (evidence kept in {path})")
            lost = lost_records(self._fs, self._layout)  # what is still unacknowledged
            if unrecorded is not None:
                lost += [r for r in unrecorded[1] if r not in lost]
            return FsckReport(records=len(self._state), damaged=[r.ident for r in f.damaged],
                              orphans=[self._layout.relative(p) for p in f.orphans], repaired=repaired,
                              already_damaged=[r.ident for r in f.already_damaged],
                              catalog_ok=f.catalog_ok, lost=lost, catalog_checked=catalog is not None)

    @contextlib.contextmanager
    def _catalog_for_fsck(self: Store) -> Iterator[Catalog | None]:
        """The catalog fsck compares: the live one; for a read-only open, the stored catalog of
        a plain store opened read-only, only while we can hold the root lock (no live writer);
        None when there is nothing to compare (a live writer, or no stored catalog)."""
        if not self._read_only:
            yield self._catalog
            return
        path = self._layout.catalog
        if not (isinstance(self._fs, OsPaths) and not self._codec.encrypted and self._fs.exists(path)):
            yield self._catalog  # in memory, built from the log: nothing stored to disagree
            return
        try:
            lock = self._fs.try_lock(self._layout.root)
        except OSError:
            lock = None
        if lock is None:
            yield None
            return
        stored = Catalog(self._fs, self._fs.os_path(path), read_only=True)
        try:
            try:
                behind = (stored.lsn() or 0) < self._last_lsn
            except sqlite3.OperationalError:  # cannot be read read-only now (a hot WAL): not judged
                behind = True
            except sqlite3.DatabaseError:
                behind = False  # malformed: find() reports catalog_ok false
            # Behind the log is what a killed writer leaves (it appends to the log, then the
            # catalog): derived data the next writer's open rebuilds, not damage. Ahead is.
            yield None if behind else stored
        finally:
            stored.close()
            lock.release()
