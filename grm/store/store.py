"""Store: the durable plane's one interface (lifecycle in the class docstring). Payloads are
opaque bytes; the store knows nothing of models or tensors.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, TypeVar

from grm.errors import StoreError, StorePoisoned, UserInputError
from grm.store.catalog import Catalog
from grm.store.checkpoint import write_checkpoint
from grm.store.config import StoreConfig
from grm.store.fs import Bytes, FileSystem, LocalFS, OsPaths
from grm.store.fsck import FsckReport, find
from grm.store.layout import MARKER_NAME, Layout, is_tmp, parse_checkpoint_name, parse_segment_name
from grm.store.log import LogWriter
from grm.store.payloads import PayloadFiles
from grm.store.record import Record, check_name, exported
from grm.store.recovery import recover, remove_covered
from grm.store.root import claim_root, take_lock
from grm.store.state import HostState
from grm.store.txn import Txn

log = logging.getLogger("grm.store")
T = TypeVar("T")

_WORD = re.compile(r"\w+")
_MAX_QUERY_TOKENS = 64


class Store:
    """The durable plane: event log (authority), checkpoints, payload files, SQLite catalog.

    Lifecycle (who calls what, when):
    1. `Store.open(config)` creates a store in a missing or empty folder, or opens one; takes the
       root lock (one process at a time); recovers the host state from checkpoint + log
       (`grm.store.recovery`); brings the SQLite catalog to the log's LSN, rebuilding it if needed.
    2. Writers call `put`, `delete`, `set_state`, or group them in `with store.transaction() as txn`.
       A payload file is durable before the log frame naming it is written (invariant 5); a call
       returns after its commit frame is in the log (fsynced unless durability is volatile). Only
       then do the host state and the catalog change. An exception inside a transaction applies
       nothing (payload files it wrote are orphans for fsck).
    3. Readers call `get` / `children` / `records` (host state, no I/O), `read_payload` (one read +
       SHA-256, fail closed) and `search_text` (catalog, FTS5 BM25).
    4. `stats` and `fsck` at any time; a checkpoint is taken every `checkpoint_every` log frames
       (and by `checkpoint()`), after which a new log generation starts and covered segments go.
    5. `close()` (or leaving the `with` block) releases the lock. After any I/O error in a write the
       store is poisoned: every later write raises `StorePoisoned` until it is reopened, and
       recovery then decides what was durable.

    Thread safety: one RLock serializes writers, the catalog and fsck; a transaction holds it from
    enter to exit, so another thread's writes wait for it and LSNs are known at `txn.put` time.
    Lookups in the host state take no lock.
    """

    def __init__(self, config: StoreConfig, fs: FileSystem, layout: Layout, lock: Any) -> None:
        """Use `Store.open`."""
        self.config = config
        self._fs = fs
        self._layout = layout
        self._lock_handle = lock
        self._lock = threading.RLock()
        self._counter_lock = threading.Lock()
        self._warned: set[tuple[str, str]] = set()
        self._txn: Txn | None = None
        self._poisoned: BaseException | None = None
        self._closed = False
        self.counters: dict[str, int] = dict.fromkeys(
            ("payload_corrupt", "payload_missing", "torn_records_dropped", "catalog_rebuilds",
             "checkpoints_invalid", "checkpoints_written"), 0)
        sync = config.syncs
        try:
            for name in fs.listdir(layout.root):
                if name.startswith(MARKER_NAME) and is_tmp(name):
                    fs.remove(os.path.join(layout.root, name))
            rec = recover(fs, layout)
            if rec.tail is not None:
                t = rec.tail
                self._writer = LogWriter(fs, t.path, t.header, t.next_lsn, t.size, sync)
            else:
                gen = rec.max_generation + 1
                self._writer = LogWriter.create(fs, layout.segment(gen), gen, rec.last_lsn + 1,
                                                os.urandom(8), sync)
            remove_covered(fs, rec.covered, sync=sync)
        except OSError as e:
            raise StoreError(f"cannot recover store {layout.root}: {e}") from e
        self._state: HostState = rec.state
        self._last_lsn = rec.last_lsn
        self._checkpoint_lsn = rec.checkpoint_lsn
        self._frames_since_checkpoint = rec.last_lsn - rec.checkpoint_lsn
        self.counters["torn_records_dropped"] = rec.torn_dropped
        self.counters["checkpoints_invalid"] = len(rec.invalid_checkpoints)
        self._payloads = PayloadFiles(fs, layout, sync=sync)
        path = fs.os_path(layout.catalog) if isinstance(fs, OsPaths) else None
        self._catalog = Catalog(fs, path)
        try:
            if self._catalog.open(self._state.iter_all(), self._last_lsn):
                self.counters["catalog_rebuilds"] += 1
        except (sqlite3.Error, OSError) as e:
            self._writer.close()
            self._catalog.close()
            raise StoreError(f"cannot build the catalog of {layout.root}: {e}") from e

    @classmethod
    def open(cls, config: StoreConfig) -> Store:
        fs = config.fs if config.fs is not None else LocalFS()
        layout = Layout(os.fspath(config.root))
        try:
            claim_root(fs, layout, sync=config.syncs)
            lock = take_lock(fs, layout, config.lock_timeout)
        except OSError as e:
            raise StoreError(f"cannot open store {layout.root}: {e}") from e
        try:
            return cls(config, fs, layout, lock)
        except BaseException:
            lock.release()
            raise

    # ---- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(OSError):
                self._writer.close()
            self._catalog.close()
            self._lock_handle.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_lsn(self) -> int:
        return self._last_lsn

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self._layout.root} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._poisoned is not None:
            raise StorePoisoned(f"store {self._layout.root} refused a write: an earlier write failed "
                                f"({self._poisoned}); reopen it to recover")

    def _io(self, fn: Callable[[], T]) -> T:
        """Run a durable write; any OSError poisons the store (the page cache may now lie)."""
        try:
            return fn()
        except OSError as e:
            self._poisoned = e
            log.error("store %s poisoned by a failed write: %s", self._layout.root, e)
            raise StorePoisoned(f"write to store {self._layout.root} failed ({e}); "
                                f"writes are refused until it is reopened") from e

    def _count(self, name: str) -> None:
        with self._counter_lock:
            self.counters[name] = self.counters.get(name, 0) + 1

    # ---- writes ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Txn]:
        with self._lock:
            self._check_writable()
            if self._txn is not None:
                raise StoreError("a transaction is already open in this thread; use it")
            txn = Txn(self, self._last_lsn + 1)
            self._txn = txn
            try:
                yield txn
                self._commit(txn)
            finally:
                txn.finished = True
                self._txn = None

    def put(self, tenant: str, kind: str, key: str, *, meta: dict | None = None,
            payload: Bytes | None = None, parent: str | None = None, text: str | None = None,
            state: str = "active") -> Record:
        """Write (replace) one row in its own transaction; returns it as committed."""
        with self.transaction() as txn:
            return txn.put(tenant, kind, key, meta=meta, payload=payload, parent=parent, text=text,
                           state=state)

    def delete(self, tenant: str, kind: str, key: str) -> bool:
        """Remove one row; False if there was none. Its payload file stays for fsck."""
        with self.transaction() as txn:
            return txn.delete(tenant, kind, key)

    def set_state(self, tenant: str, kind: str, key: str, state: str) -> None:
        with self.transaction() as txn:
            txn.set_state(tenant, kind, key, state)

    def _write_payload(self, tenant: str, data: Bytes) -> tuple[str, int]:
        return self._io(lambda: self._payloads.write(tenant, data))

    def _commit(self, txn: Txn) -> None:
        if not txn.bodies:
            return
        bodies = txn.bodies + [txn.commit_body()]
        last = self._io(lambda: self._writer.append(bodies))
        # Durable from here on: the host state and then the catalog follow the log.
        upserts, deletes = [], []
        for (tenant, kind, key), rec in txn.overlay.items():
            if rec is None:
                self._state.delete(tenant, kind, key)
                deletes.append((tenant, kind, key))
            else:
                self._state.put(rec)
                upserts.append(rec)
        self._last_lsn = last
        self._catalog_call(lambda: self._catalog.apply(upserts, deletes, last))
        self._frames_since_checkpoint += len(bodies)
        # A checkpoint failure here poisons the store and raises from this (already durable)
        # write: the caller sees the error, and the reopened store has the row.
        if self._frames_since_checkpoint >= self.config.checkpoint_every:
            self._io(self._checkpoint_locked)

    def checkpoint(self) -> None:
        """Write a checkpoint at the last LSN now and start a new log generation."""
        with self._lock:
            self._check_writable()
            if self._txn is not None:
                raise StoreError("cannot checkpoint inside a transaction")
            if self._frames_since_checkpoint:
                self._io(self._checkpoint_locked)

    def _checkpoint_locked(self) -> None:
        fs, layout, sync, lsn = self._fs, self._layout, self.config.syncs, self._last_lsn
        write_checkpoint(fs, layout.checkpoint(lsn), lsn, self._state.iter_all(), sync=sync)
        gen = self._writer.header.generation + 1
        new = LogWriter.create(fs, layout.segment(gen), gen, lsn + 1, os.urandom(8), sync)
        old, self._writer = self._writer, new
        with contextlib.suppress(OSError):
            old.close()
        # Only now is the old log redundant: the checkpoint and the new segment are durable.
        for name in fs.listdir(layout.log_dir):
            g = parse_segment_name(name)
            if g is not None and g < gen:
                fs.remove(os.path.join(layout.log_dir, name))
        for name in fs.listdir(layout.checkpoint_dir):
            c = parse_checkpoint_name(name)
            if c is not None and c < lsn:
                fs.remove(os.path.join(layout.checkpoint_dir, name))
        if sync:
            fs.fsync_dir(layout.log_dir)
            fs.fsync_dir(layout.checkpoint_dir)
        self._checkpoint_lsn = lsn
        self._frames_since_checkpoint = 0
        self.counters["checkpoints_written"] += 1

    # ---- catalog -----------------------------------------------------------------------------

    def _catalog_call(self, fn: Callable[[], T]) -> T:
        """Run a catalog operation; on a SQLite error rebuild the catalog from the host state
        once and retry (it is derived data: never a reason to fail a committed write)."""
        try:
            return fn()
        except (sqlite3.DatabaseError, OSError) as e:
            log.warning("catalog error (%s); rebuilding it from the log state", e)
        try:
            self._catalog.rebuild(self._state.iter_all(), self._last_lsn)
            self._count("catalog_rebuilds")
            return fn()
        except (sqlite3.DatabaseError, OSError) as e:
            raise StoreError(f"catalog of {self._layout.root} is unusable: {e}") from e

    # ---- reads -------------------------------------------------------------------------------

    def get(self, tenant: str, kind: str, key: str) -> Record | None:
        self._check_open()
        rec = self._state.get(check_name("tenant", tenant), check_name("kind", kind), key)
        return exported(rec) if rec is not None else None

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        self._check_open()
        rows = self._state.children(check_name("tenant", tenant), check_name("kind", kind), parent)
        return [exported(r) for r in sorted(rows, key=lambda r: r.lsn) if r.state == "active"]

    def records(self, tenant: str | None = None, kind: str | None = None) -> Iterator[Record]:
        self._check_open()
        if tenant is not None:
            check_name("tenant", tenant)
        if kind is not None:
            check_name("kind", kind)
        return (exported(r) for r in self._state.records(tenant, kind))

    def read_payload(self, record: Record) -> bytes | None:
        """The payload bytes if the file re-hashes to `record.payload` with `record.payload_size`
        bytes; otherwise None, counted and logged once per digest. Never other bytes."""
        self._check_open()
        if record.payload is None:
            return None
        try:
            data, problem = self._payloads.read(record.tenant, record.payload, record.payload_size)
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

    def payload_path(self, record: Record) -> Path:
        """Where the record's payload file lives (for diagnostics, benchmarks and tests; reads go
        through `read_payload`, which verifies)."""
        if record.payload is None:
            raise StoreError(f"{record.ident} has no payload")
        return Path(self._layout.payload(record.tenant, record.payload))

    def search_text(self, tenant: str, query: str, kind: str | None = None,
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
        for k, key, score in hits:
            rec = self._state.get(tenant, k, key)
            if rec is not None and rec.state == "active":
                out.append((exported(rec), score))
        return out

    # ---- accounting --------------------------------------------------------------------------

    def stats(self) -> dict:
        self._check_open()
        tenants: dict[str, dict[str, dict[str, int]]] = {}
        seen: set[tuple[str, str, str]] = set()
        for r in self._state.iter_all():
            s = tenants.setdefault(r.tenant, {}).setdefault(
                r.kind, {"records": 0, "active": 0, "superseded": 0, "damaged": 0, "payload_bytes": 0})
            s["records"] += 1
            s[r.state] += 1
            if r.payload is not None and (r.tenant, r.kind, r.payload) not in seen:
                seen.add((r.tenant, r.kind, r.payload))
                s["payload_bytes"] += r.payload_size
        with self._lock:
            segs = [n for n in self._fs.listdir(self._layout.log_dir) if parse_segment_name(n) is not None]
            log_bytes = sum(self._fs.size(os.path.join(self._layout.log_dir, n)) for n in segs)
        return {"root": self._layout.root, "durability": self.config.durability,
                "records": len(self._state), "tenants": tenants, "log_bytes": log_bytes,
                "log_segments": len(segs), "last_lsn": self._last_lsn,
                "checkpoint_lsn": self._checkpoint_lsn, "poisoned": self._poisoned is not None,
                "counters": dict(self.counters)}

    def fsck(self, repair: bool = False) -> FsckReport:
        """Verify every payload, find orphan files, compare catalog and log. With repair: remove
        orphans, mark rows with bad payloads damaged (a logged set_state), rebuild the catalog if
        it disagrees. Never deletes a row or a file a row names."""
        with self._lock:
            self._check_open()
            if self._txn is not None:
                raise StoreError("cannot run fsck inside a transaction")
            f = find(self._state, self._payloads, self._layout, self._catalog, self._last_lsn)
            repaired: list[str] = []
            if repair:
                self._check_writable()
                for path in f.orphans:
                    self._io(lambda p=path: self._fs.remove(p))
                    repaired.append(f"removed orphan {self._layout.relative(path)}")
                if f.damaged:
                    with self.transaction() as txn:
                        for r in f.damaged:
                            txn.set_state(r.tenant, r.kind, r.key, "damaged")
                            repaired.append(f"marked damaged {r.ident}")
                if not f.catalog_ok:
                    self._catalog_call(lambda: self._catalog.rebuild(self._state.iter_all(), self._last_lsn))
                    self._count("catalog_rebuilds")
                    repaired.append("rebuilt catalog")
            return FsckReport(records=len(self._state), damaged=[r.ident for r in f.damaged],
                              orphans=[self._layout.relative(p) for p in f.orphans], repaired=repaired,
                              already_damaged=[r.ident for r in f.already_damaged],
                              catalog_ok=f.catalog_ok)
