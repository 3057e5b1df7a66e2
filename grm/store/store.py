"""Store: the durable plane's one interface (lifecycle in the class docstring). Payloads are
opaque bytes; the store knows nothing of models or tensors. Reads live in `grm.store.reads`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from typing import Any, Callable, TypeVar

from grm.errors import CorruptionError, StoreError, StorePoisoned, UserInputError
from grm.store.catalog import KEEP_MODE, Catalog
from grm.store.checkpoint import checkpoint_rows, write_checkpoint
from grm.store.config import DURABILITY_MODES, MODE_RULES, StoreConfig
from grm.store.crypt import Keyring
from grm.store.defences import Defences
from grm.store.durability import Flusher
from grm.store.envelope import Codec
from grm.store.evidence import keep_catalog_evidence
from grm.store.fs import Bytes, CheckedLock, FileSystem, LocalFS, OsPaths
from grm.store.layout import MARKER_NAME, Layout, is_tmp, parse_checkpoint_name, parse_segment_name
from grm.store.log import LogWriter
from grm.store.payloads import PayloadFiles
from grm.store.reads import StoreReads
from grm.store.record import Record
from grm.store.recovery import Recovered, recover, remove_covered
from grm.store.root import check_root, open_root
from grm.store.salvage import SalvageReport, salvage
from grm.store.state import CatalogState, HostState, OverlayState
from grm.store.txn import Txn

log = logging.getLogger("grm.store")
T = TypeVar("T")


class _NoLock:
    """A read-only open holds no lock."""

    def release(self) -> None:
        pass


class Store(StoreReads):
    """The durable plane: event log (authority), checkpoints, payload files, SQLite catalog.

    Lifecycle (who calls what, when):
    1. `Store.open(config)` takes the root lock (one writing process at a time; `grm.store.root`),
       creates a store in a missing or empty folder, or opens one; checks the master key of an
       encrypted store; recovers the host state from checkpoint + log (`grm.store.recovery`);
       brings the SQLite catalog to the log's LSN, rebuilding it if needed; logs a mode record if
       the durability mode changed. With `config.read_only` it takes no lock and writes nothing:
       it reads the committed state (beside a live writer, or on read-only media) and refuses
       writes.
    2. Writers call `put`, `delete`, `set_state`, or group them in `with store.transaction() as txn`.
       A payload file is written before the log frame naming it (invariant 5); a call returns
       after its commit frame is in the log, fsynced as the durability mode says
       (`grm.store.config.DURABILITY_PROMISES`). Only then do the host state and the catalog
       change. An exception inside a transaction applies nothing (its payload files are orphans
       for fsck). `set_durability(mode)` switches modes (a logged record); `flush()` makes every
       acknowledged write durable now (async mode's sync point).
    3. Readers call `get` / `children` / `records` (the host state: in a plain local store the
       SQLite catalog, each row's CRC checked; in an encrypted, in-memory or read-only one, dicts
       in RAM), `read_payload` (one read, decrypt, SHA-256: fail closed) and `search_text`
       (catalog, FTS5 BM25).
    4. `stats` and `fsck` at any time; a checkpoint is taken every `checkpoint_every` log frames
       (and by `checkpoint()`), after which a new log generation starts and covered segments go.
    5. `close()` (or leaving the `with` block) flushes, stops the async flusher and releases the
       lock. After any I/O error in a write (or a failed background fsync) the store is poisoned:
       every later write raises `StorePoisoned` until it is reopened, and recovery then decides
       what was durable.

    Thread safety: one RLock serializes writers, the catalog and fsck; a transaction holds it from
    enter to exit, so another thread's writes wait for it and LSNs are known at `txn.put` time.
    Lookups in the host state take no store lock (a catalog-backed one takes the catalog's
    connection lock per query, which a commit's catalog update also holds). The async flusher fsyncs under a second lock that
    only checkpoints also take, so commits never wait for an fsync.
    """

    def __init__(self, config: StoreConfig, fs: FileSystem, layout: Layout, lock: Any,
                 keyring: Keyring | None, defences: Defences | None = None) -> None:
        """Use `Store.open`."""
        self.config = config
        self._fs = fs
        self._layout = layout
        self._lock_handle = lock
        self._lock_checked = isinstance(lock, CheckedLock)  # once: a Protocol isinstance is slow per commit
        self._lock = threading.RLock()
        self._flush_lock = threading.Lock()
        self._counter_lock = threading.Lock()
        self._warned: set[tuple[str, str]] = set()
        self._txn: Txn | None = None
        self._poisoned: BaseException | None = None
        self._closed = False
        self._mode = config.durability
        self._flusher: Flusher | None = None
        self.defences = defences or Defences()  # tests switch these off to prove attacks can succeed
        self._codec = Codec(keyring, config.compress, self.defences)
        self.counters: dict[str, int] = dict.fromkeys(
            ("payload_corrupt", "payload_missing", "torn_records_dropped", "catalog_rebuilds",
             "checkpoints_invalid", "checkpoints_written", "text_unauthenticated",
             "unfinished_segments"), 0)
        sync = config.syncs and not config.read_only
        self._read_only = config.read_only
        # A plain local store keeps its rows in the catalog (CatalogState: not resident); an
        # encrypted one (no plaintext on disk), a MemoryFS one and a read-only open keep them in
        # memory (HostState) with an in-memory catalog filled from them at open.
        on_disk = isinstance(fs, OsPaths) and keyring is None and not self._read_only
        self._catalog = Catalog(fs, fs.os_path(layout.catalog) if on_disk else None,
                                full_sync=MODE_RULES[self._mode]["catalog_full"])
        state = (HostState(self._codec.open_text, self._codec.open_mutation, self._codec.open_row)
                 if keyring is not None else HostState())
        self._writer: LogWriter | None = None
        try:
            if self._read_only:
                rec = self._recover_read_only(state)  # no writer: nothing appended, cut or removed
            else:
                for name in fs.listdir(layout.root):
                    if name.startswith(MARKER_NAME) and is_tmp(name):
                        fs.remove(os.path.join(layout.root, name))
                rec = self._recover_into_catalog(sync) if on_disk else recover(fs, layout, state, state.decode_row)
                self._writer = self._tail_writer(rec, sync)
                remove_covered(fs, rec.covered, sync=sync)
        except OSError as e:
            self._catalog.close()
            raise StoreError(f"cannot recover store {layout.root}: {e}") from e
        except BaseException:
            self._catalog.close()
            raise
        self._state: HostState = rec.state
        if isinstance(self._state, CatalogState):
            self._state.heal = self._heal_catalog
        self._last_lsn = rec.last_lsn
        self.recovered_lsn = rec.last_lsn  # the last LSN recovery found, before any write of this open
        self._durable_lsn = rec.last_lsn if sync else 0
        self._checkpoint_lsn = rec.checkpoint_lsn
        self._frames_since_checkpoint = rec.last_lsn - rec.checkpoint_lsn
        self.counters["torn_records_dropped"] = rec.torn_dropped
        self.counters["checkpoints_invalid"] = len(rec.invalid_checkpoints)
        self.counters["text_unauthenticated"] = state.unauthenticated
        self.counters["unfinished_segments"] = rec.unfinished_segments
        self._payloads = PayloadFiles(fs, layout, self._codec)
        if not on_disk:
            try:
                self._catalog.open(self._state.iter_all(), self._last_lsn)
            except (sqlite3.Error, OSError) as e:
                if self._writer is not None:
                    self._writer.close()
                self._catalog.close()
                raise StoreError(f"cannot build the catalog of {layout.root}: {e}") from e
        if self._read_only:
            return
        if self._mode == "async":
            self._start_flusher()
        if self._mode != (self._state.mode or "normal"):
            self._log_mode(self._mode)

    @classmethod
    def open(cls, config: StoreConfig, *, defences: Defences | None = None) -> Store:
        """Open (or create) the store `config` names. `defences` is for the attack tests only."""
        fs = config.fs if config.fs is not None else LocalFS()
        layout = Layout(os.fspath(config.root))
        try:
            if config.read_only:
                keyring, lock = check_root(fs, layout, config.master_key), _NoLock()
            else:
                keyring, lock = open_root(fs, layout, sync=config.syncs, master_key=config.master_key,
                                          timeout=config.lock_timeout)
        except OSError as e:
            raise StoreError(f"cannot open store {layout.root}: {e}") from e
        try:
            return cls(config, fs, layout, lock, keyring, defences)
        except BaseException:
            lock.release()
            raise

    @classmethod
    def salvage(cls, config: StoreConfig) -> SalvageReport:
        """`grm fsck --salvage`: make a store whose log is damaged open again, keeping every
        intact record and naming the lost ones (`grm.store.salvage`). No-op on a clean store."""
        return salvage(config)

    # ---- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        self._stop_flusher(join=True)  # not under the lock: its last flush needs it
        with self._lock:
            if self._closed:
                return
            if self._mode == "async" and self._poisoned is None:
                self.flush()
            self._closed = True
            with contextlib.suppress(OSError):
                if self._writer is not None:
                    self._writer.close()
            for handle in self._payloads.take_pending()[0]:
                with contextlib.suppress(OSError):
                    handle.close()
            self._catalog.close()
            self._lock_handle.release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def last_lsn(self) -> int:
        return self._last_lsn

    @property
    def durable_lsn(self) -> int:
        """The last LSN known fsynced (equal to last_lsn in normal/full/strict; behind it in
        async by at most the flush window; 0 in volatile, which never fsyncs)."""
        return self._durable_lsn

    @property
    def durability(self) -> str:
        return self._mode

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"store {self._layout.root} is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self._read_only:
            raise StoreError(f"store {self._layout.root} was opened read-only")
        if self._poisoned is not None:
            raise StorePoisoned(f"store {self._layout.root} refused a write: an earlier write failed "
                                f"({self._poisoned}); reopen it to recover")

    def _poison(self, e: BaseException) -> None:
        self._poisoned = e
        log.error("store %s poisoned by a failed write: %s", self._layout.root, e)

    def _io(self, fn: Callable[[], T]) -> T:
        """Run a durable write; any OSError poisons the store (the page cache may now lie)."""
        try:
            return fn()
        except OSError as e:
            self._poison(e)
            raise StorePoisoned(f"write to store {self._layout.root} failed ({e}); "
                                f"writes are refused until it is reopened") from e

    def _tail_writer(self, rec: Recovered, sync: bool) -> LogWriter:
        """Append to the segment recovery left, or start a new generation."""
        if rec.tail is not None:
            t = rec.tail
            writer = LogWriter(self._fs, t.path, t.header, t.next_lsn, t.size)
            if sync:  # what recovery found is durable from here on (the dur rule needs it)
                writer.fsync()
            return writer
        gen = rec.max_generation + 1
        return LogWriter.create(self._fs, self._layout.segment(gen), gen, rec.last_lsn + 1, os.urandom(8), sync)

    def _check_sole_writer(self) -> None:
        """Before every append: the root lock still guards this root, and nobody else appended
        to the log since our last write. Otherwise refuse (and poison: the log is not ours)."""
        assert self._writer is not None
        try:
            size = self._fs.size(self._writer.path)
        except OSError as e:
            size = f"unreadable ({e})"
        why = None
        if self._lock_checked and not self._lock_handle.held():
            why = "its lock no longer guards the store folder (it was moved or replaced)"
        elif size != self._writer.size:
            why = f"its log {self._writer.path} is {size} bytes, not the {self._writer.size} this writer left"
        if why is not None:
            e = StoreError(f"store {self._layout.root} refused a write: another process may be writing: {why}")
            self._poison(e)
            raise e

    def _recover_read_only(self, state: HostState) -> Recovered:
        """Recovery without writing; a live writer's checkpoint can remove a segment or start a
        new generation under our feet, so a failed attempt is retried (fresh state) a few times."""
        for attempt in range(8):
            try:
                return recover(self._fs, self._layout, state, state.decode_row, read_only=True)
            except (CorruptionError, FileNotFoundError):
                if attempt == 7:
                    raise
                time.sleep(0.05 * (attempt + 1))
                state = state.fresh()
        raise AssertionError("unreachable")

    def _recover_into_catalog(self, sync: bool) -> Recovered:
        """Recovery of a plain local store, whose host state is its catalog: a catalog at an LSN
        between the checkpoint's and the log's end gets the log after its LSN replayed (no row
        is read); any other (missing, unreadable, other schema, behind the checkpoint, ahead of
        the log: then with loss evidence first) is rebuilt from checkpoint + log."""
        fs, layout, cat = self._fs, self._layout, self._catalog
        try:
            base = cat.usable_lsn()
            why, rec = "missing, unreadable or of another schema", None
            if base is not None:
                try:
                    rec = recover(fs, layout, CatalogState(cat), load_rows=False, state_lsn=base)
                    if rec.checkpoint_lsn <= base <= rec.last_lsn:
                        rec.state.finish(rec.last_lsn)
                        return rec
                    why = f"at lsn {base}; checkpoint at {rec.checkpoint_lsn}, log ends at {rec.last_lsn}"
                except sqlite3.DatabaseError as e:
                    rec, why = None, f"unreadable: {e}"
                cat.abort()
                if rec is not None and base > rec.last_lsn:  # ahead: name what the log lost (rare: resident)
                    truth = recover(fs, layout, HostState(), read_only=True)
                    keep_catalog_evidence(fs, layout, cat, truth.state, truth.last_lsn, sync=sync)
            existed, first = fs.exists(layout.catalog), rec
            cat.reset()
            state = CatalogState(cat)
            rec = recover(fs, layout, state)
            state.finish(rec.last_lsn)
            if first is not None:  # the first pass already cut the tail: keep what it found
                rec.torn_dropped = max(rec.torn_dropped, first.torn_dropped)
                rec.unfinished_segments = max(rec.unfinished_segments, first.unfinished_segments)
            if existed or rec.last_lsn > 0:
                log.warning("rebuilt catalog of %s from checkpoint + log (it was %s)", layout.root, why)
                self.counters["catalog_rebuilds"] += 1
            return rec
        except sqlite3.Error as e:
            cat.abort()
            raise StoreError(f"cannot build the catalog of {layout.root}: {e}") from e

    def _truth(self) -> tuple[Iterator[Record], int, str | None]:
        """(rows, LSN, durability mode) as checkpoint + log say, not the catalog: the
        checkpoint's rows streamed through what the log after it does (OverlayState)."""
        overlay = OverlayState()
        rec = recover(self._fs, self._layout, overlay, read_only=True, load_rows=False)
        ckpt = rec.checkpoint
        base = (Record.from_list(v) for v in checkpoint_rows(self._fs, ckpt)) if ckpt else iter(())
        return overlay.merge(base), rec.last_lsn, overlay.mode or (ckpt.mode if ckpt else None)

    def _heal_catalog(self) -> None:
        with self._lock:
            log.warning("catalog of %s is damaged; rebuilding it from checkpoint + log", self._layout.root)
            self._rebuild_catalog()
            self._count("catalog_rebuilds")

    def _fsck_truth(self) -> Callable[[], Iterator[Record]] | None:
        """What fsck checks payloads against and compares the catalog with (None: the resident
        state). For a catalog-backed state, checkpoint + log: never the catalog itself."""
        if not isinstance(self._state, CatalogState):
            return None
        return lambda: self._truth()[0]

    def _rebuild_catalog(self) -> None:
        """Rebuild the catalog from the authority: the resident state, or checkpoint + log."""
        if not isinstance(self._state, CatalogState):
            self._catalog.rebuild(self._state.iter_all(), self._last_lsn)
            return
        self._catalog.abort()
        rows, lsn, mode = self._truth()
        self._catalog.rebuild(rows, lsn, mode)
        self._state.forget_count()

    def _count(self, name: str) -> None:
        with self._counter_lock:
            self.counters[name] = self.counters.get(name, 0) + 1

    # ---- durability --------------------------------------------------------------------------

    def _start_flusher(self) -> None:
        self._flusher = Flusher(self.flush, self.config.async_flush_ms / 1000.0, self.config.async_max_pending)

    def _stop_flusher(self, join: bool) -> None:
        """Stop the async flusher; join=False when the caller holds the store lock (the thread
        may be waiting for it; its next flush sees the mode changed and returns)."""
        flusher, self._flusher = self._flusher, None
        if flusher is not None:
            flusher.stop(join)

    def flush(self) -> None:
        """Fsync every deferred payload file, its folder and the log now, and advance
        `durable_lsn` (async mode; the other modes have nothing deferred)."""
        with self._lock:
            if self._closed or self._writer is None or not MODE_RULES[self._mode]["deferred"]:
                return
            writer, target = self._writer, self._last_lsn
            files, folders = self._payloads.take_pending()
        with self._flush_lock:
            try:
                for handle in files:
                    handle.fsync()
                for folder in folders:
                    self._fs.fsync_dir(folder)
                if not writer.closed:
                    writer.fsync()
            except OSError as e:
                self._poison(e)
                return
            finally:
                for handle in files:
                    with contextlib.suppress(OSError):
                        handle.close()
            if target > self._durable_lsn:
                self._durable_lsn = target

    def set_durability(self, mode: str) -> None:
        """Switch the durability mode; the change is a logged record, written under the new
        mode (after a final flush when leaving async)."""
        if mode not in DURABILITY_MODES:
            raise UserInputError(f"bad durability {mode!r}: want one of {', '.join(DURABILITY_MODES)}")
        with self._lock:
            self._check_writable()
            if self._txn is not None:
                raise StoreError("cannot change durability inside a transaction")
            if mode == self._mode:
                return
            if self._mode == "async":
                self._stop_flusher(join=False)
                self.flush()
                self._check_writable()
            self._mode = mode
            self._catalog_call(lambda: self._catalog.set_full_sync(MODE_RULES[mode]["catalog_full"]))
            if mode == "async":
                self._start_flusher()
            self._log_mode(mode)

    def _log_mode(self, mode: str) -> None:
        with self.transaction() as txn:
            txn.log_mode(mode)

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

    def _write_payload(self, tenant: str, kind: str, key: str, data: Bytes) -> tuple[str, int]:
        rules = MODE_RULES[self._mode]
        sync = "now" if rules["fsync_commit"] else "defer" if rules["deferred"] else "none"
        return self._io(lambda: self._payloads.write(tenant, kind, key, data, sync=sync, verify=rules["verify"]))

    def _commit(self, txn: Txn) -> None:
        if not txn.bodies:
            return
        rules = MODE_RULES[self._mode]
        bodies = txn.bodies + [txn.commit_body()]
        self._check_sole_writer()
        last = self._io(lambda: self._writer.append(bodies, fsync=rules["fsync_commit"], verify=rules["verify"]))
        # Acknowledged from here on: the host state and then the catalog follow the log.
        if rules["fsync_commit"]:
            self._durable_lsn = last
        upserts, deletes = [], []
        backed = isinstance(self._state, CatalogState)  # else resident: the dicts change here
        for (tenant, kind, key), rec in txn.overlay.items():
            if rec is None:
                if not backed:
                    self._state.delete(tenant, kind, key)
                deletes.append((tenant, kind, key))
            else:
                if not backed:
                    self._state.put(rec)
                upserts.append(rec)
        if txn.mode is not None and not backed:
            self._state.mode = txn.mode
        self._last_lsn = last
        mode = txn.mode if txn.mode is not None else KEEP_MODE
        delta = self._catalog_call(lambda: self._catalog.apply(upserts, deletes, last, mode))
        if backed:
            self._state.committed(delta, txn.mode)
        self._frames_since_checkpoint += len(bodies)
        if rules["deferred"] and self._flusher is not None:
            self._flusher.committed()
        # A checkpoint failure here poisons the store and raises from this (already durable)
        # write: the caller sees the error, and the reopened store has the row.
        # The cadence grows with the live rows (a quarter of them): a checkpoint rewrites every
        # row, so a fixed cadence makes filling a large store quadratic; replay after a crash
        # stays bounded by the live data (bench/results/scale.md).
        if self._frames_since_checkpoint >= max(self.config.checkpoint_every, len(self._state) // 4):
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
        fs, layout, lsn = self._fs, self._layout, self._last_lsn
        sync = self._mode != "volatile"
        if self._mode == "async":
            self.flush()  # the checkpoint may only name payload files that are durable
            if self._poisoned is not None:
                raise OSError(f"flush before checkpoint failed: {self._poisoned}")
        if sync and isinstance(self._state, CatalogState):
            # The log before this checkpoint is about to go: the catalog (the host state) must
            # not be able to fall behind it, or the next open rebuilds it from the checkpoint.
            self._catalog_call(lambda: self._catalog.conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall())
        with self._flush_lock:
            try:
                write_checkpoint(fs, layout.checkpoint(lsn), lsn, self._state.iter_all(), sync=sync,
                                 mode=self._state.mode, encode_row=self._codec.seal_row)
            except sqlite3.DatabaseError:  # a damaged catalog row: rebuilt from the log, then again
                self._heal_catalog()
                write_checkpoint(fs, layout.checkpoint(lsn), lsn, self._state.iter_all(), sync=sync,
                                 mode=self._state.mode, encode_row=self._codec.seal_row)
            gen = self._writer.header.generation + 1
            new = LogWriter.create(fs, layout.segment(gen), gen, lsn + 1, os.urandom(8), sync)
            old, self._writer = self._writer, new
            with contextlib.suppress(OSError):
                old.close()
        if sync:
            self._durable_lsn = max(self._durable_lsn, lsn)
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
            self._rebuild_catalog()
            self._count("catalog_rebuilds")
            return fn()
        except (sqlite3.DatabaseError, OSError) as e:
            raise StoreError(f"catalog of {self._layout.root} is unusable: {e}") from e
