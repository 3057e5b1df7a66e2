"""Garbage collection and log compaction of a local store (`grm gc`).

What goes:
- orphan payload files: files no row names (a deleted row's payload, a replaced payload, an
  aborted transaction's file, a crash's temporary), and
- the payload bytes of superseded rows past the retention window: a row superseded at LSN x
  loses its payload once `retain_writes` more writes have happened (last_lsn - x >= window).
  The row itself stays - its text, meta, parent and state - so lineage (`why do you remember`,
  a fact's successor, review history) stays readable; its meta gains `gc_payload`: {digest,
  size, lsn} saying which bytes went. `retain_writes=None` keeps every superseded payload.

Compaction: a checkpoint at the last LSN, after which the log starts a new generation and the
covered segments and older checkpoints are removed (`Store.checkpoint`), so open and recovery
replay only what follows it: open time and log bytes follow the live rows, not the history.

Order (crash safety; the crash-image suite checks every prefix, tests/scale/test_gc_crash.py):
1. one logged transaction rewrites the stale rows without payload (all or nothing);
2. the checkpoint makes it durable (in every mode but volatile: it flushes and fsyncs);
3. only then are files that no row names removed. A crash before 3 leaves orphans the next gc
   (or `fsck --repair`) removes; no image ever holds a row naming a removed file.
All of it runs under the store's lock, so no write of this process interleaves; the root lock
keeps other processes out (a read-only open beside it reads what it opened).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field

from grm.errors import StoreError, UserInputError
from grm.store.layout import tenant_dir_name

log = logging.getLogger("grm.store")
DEFAULT_RETAIN_WRITES = 10_000  # superseded payloads outlive this many later writes


@dataclass(frozen=True)
class GcReport:
    dry_run: bool
    stale: list[str] = field(default_factory=list)  # tenant/kind/key of rows whose payload goes
    orphans: list[str] = field(default_factory=list)  # payload files (relative) no row names
    bytes_freed: int = 0  # payload bytes of removed files (as stored on disk)
    checkpoint_lsn: int = 0  # the checkpoint written (0: none needed / dry run)
    log_bytes_before: int = 0
    log_bytes_after: int = 0

    def to_json(self) -> dict:
        return {"dry_run": self.dry_run, "stale": self.stale, "orphans": self.orphans,
                "bytes_freed": self.bytes_freed, "checkpoint_lsn": self.checkpoint_lsn,
                "log_bytes_before": self.log_bytes_before, "log_bytes_after": self.log_bytes_after}


def collect(store, *, retain_writes: int | None = DEFAULT_RETAIN_WRITES, dry_run: bool = False,
            compact: bool = True) -> GcReport:
    """Run gc (and, with `compact`, log compaction) on an open local `Store`. `dry_run` says what
    would go and changes nothing."""
    from grm.store.store import Store

    if not isinstance(store, Store):
        raise UserInputError("gc runs on a local store folder (Redis keeps no history: nothing to compact)")
    if retain_writes is not None and (not isinstance(retain_writes, int) or retain_writes < 0):
        raise UserInputError(f"retain_writes must be an integer >= 0 or None, got {retain_writes!r}")
    with store._lock:
        if not dry_run:
            store._check_writable()
        else:
            store._check_open()
        if store._txn is not None:
            raise StoreError("cannot run gc inside a transaction")
        before = store.stats()["log_bytes"]
        last = store.last_lsn
        stale = [r for r in store._state.iter_all()
                 if retain_writes is not None and r.state == "superseded" and r.payload is not None
                 and last - r.lsn >= retain_writes]
        gone = {r.ident for r in stale}
        # a payload a kept row also names stays (payloads are content-addressed within a tenant)
        keep = {(tenant_dir_name(r.tenant), r.payload) for r in store._state.iter_all()
                if r.payload is not None and r.ident not in gone}
        doomed = [(path, th, name) for path, th, name in store._payloads.files()
                  if name is None or (th, name) not in keep]
        freed = sum(_size(store, path) for path, _, _ in doomed)
        rel = [store._layout.relative(path) for path, _, _ in doomed]
        if dry_run:
            return GcReport(True, [r.ident for r in stale], rel, freed, 0, before, before)
        if stale:
            with store.transaction() as txn:
                for r in stale:
                    meta = {**r.meta, "gc_payload": {"digest": r.payload, "size": r.payload_size, "lsn": last}}
                    txn.put(r.tenant, r.kind, r.key, meta=meta, payload=None, parent=r.parent, text=r.text,
                            state=r.state)
        checkpoint = 0
        if compact or doomed:
            store.checkpoint()  # durable before any file goes (no-op if nothing was logged since)
            checkpoint = store._checkpoint_lsn
        for path, _, _ in doomed:
            store._io(lambda p=path: store._fs.remove(p))
        if doomed:
            store._payloads.forget_all()  # re-verify before trusting a file by name again
            if store.config.syncs:
                for folder in sorted({os.path.dirname(p) for p, _, _ in doomed}):
                    store._io(lambda f=folder: store._fs.fsync_dir(f))
        after = store.stats()["log_bytes"]
    log.info("gc: %d stale payload(s), %d file(s) removed, %d bytes freed", len(stale), len(doomed), freed)
    return GcReport(False, [r.ident for r in stale], rel, freed, checkpoint, before, after)


def _size(store, path: str) -> int:
    try:
        return store._fs.size(path)
    except OSError:
        return 0
