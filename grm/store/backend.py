"""The store interface: what the upper planes (exact, sections, grafts, route, policy, archive,
runtime, cli) may call on a store, whichever backend holds it. `Store` (local files, the default)
and `RedisStore` (shared through a Redis server) both satisfy `StoreBackend`; one contract test
suite (tests/store/test_backend_contract.py) runs against both.

Lifecycle (who calls what, when):
1. The CLI's store opener (or `Runtime.open`) opens ONE backend per process and store, through
   `grm.store.opener.open_backend(location, ...)`: a folder is a `Store`, `redis://HOST:PORT/NS`
   a `RedisStore`. Nothing above the openers opens stores or names a concrete class.
2. Ingest and harvest write: `put` (one row, its own transaction) or
   `with store.transaction() as txn:` + `txn.put / txn.delete / txn.set_state` when several rows
   must commit together (policy's supersession, the archive's demote). A write returns after its
   commit; an exception inside the `with` block applies nothing. Rows are never edited in place
   by callers: `put` replaces the row under (tenant, kind, key) as a whole.
3. Serving reads: `get` / `children` / `records` find rows (no payload I/O); `read_payload(record)`
   returns the payload bytes only if they re-hash to `record.payload` (and authenticate, where
   encrypted): otherwise None, counted in `stats()["counters"]`. None is a miss, never an error:
   the caller recomputes (DESIGN invariant 1). `search_text` is the lexical routing channel.
4. Operators: `stats()` and `fsck(repair)` at any time.
5. `close()` (or leaving `with store:`) once, by whoever opened it; every call after it raises
   StoreError.

Tenants never meet: every read takes the tenant (or reads it from the record) and returns only
that tenant's rows and payload bytes; payloads are content-addressed within a tenant.

Optional abilities are separate Protocols, checked with isinstance (never hasattr):
- `ScatterReads`: read a payload straight into the caller's buffers (the exact plane's fast path).
- `DurabilityControl`: switch the durability mode and flush (local store; Redis durability is the
  server's own setting).
- `ChangeFeed`: the rows of a (tenant, kind) written since an LSN, for a caller keeping a derived
  index in step with the store (the routers' dense-key index, grm/route/index.py); without
  it the caller re-reads `records` whenever `last_lsn` moves.

Record kinds are the constants of `grm.store.kinds`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Protocol, runtime_checkable

from grm.store.fs import Bytes
from grm.store.fsck import FsckReport
from grm.store.record import Record

# Keys `stats()` returns on every backend (backends add their own: root, durability, tenants, ...).
STATS_KEYS = ("backend", "records", "last_lsn", "counters")
# Counters every backend keeps in `stats()["counters"]`: payload reads served as a miss.
MISS_COUNTERS = ("payload_corrupt", "payload_missing")


@runtime_checkable
class StoreTxn(Protocol):
    """Writes collected by `StoreBackend.transaction()`, committed together when it exits."""

    def put(self, tenant: str, kind: str, key: str, *, meta: dict | None = None,
            payload: Bytes | None = None, parent: str | None = None, text: str | None = None,
            state: str = "active") -> Record: ...

    def delete(self, tenant: str, kind: str, key: str) -> bool: ...

    def set_state(self, tenant: str, kind: str, key: str, state: str) -> None: ...


@runtime_checkable
class StoreBackend(Protocol):
    """A store of records (tenant, kind, key) -> row with optional payload bytes. See the module
    docstring for the lifecycle; `Record` (grm.store.record) is the row."""

    @property
    def last_lsn(self) -> int:
        """The LSN of the last committed mutation (0 for an empty store); grows with every write."""
        ...

    # ---- reads (no payload I/O except read_payload) --------------------------------------------
    def get(self, tenant: str, kind: str, key: str) -> Record | None: ...

    def children(self, tenant: str, kind: str, parent: str) -> list[Record]:
        """Active rows of (tenant, kind) whose parent is `parent`, oldest first."""
        ...

    def records(self, tenant: str | None = None, kind: str | None = None) -> Iterator[Record]:
        """Every row (any state) of `tenant` (all tenants if None) and `kind` (all if None)."""
        ...

    def read_payload(self, record: Record) -> bytes | None:
        """The payload bytes, verified against `record.payload` (SHA-256) and its size; None on any
        damage or absence (counted), never other bytes."""
        ...

    def is_damaged(self, record: Record, *, verify: bool = False) -> bool:
        """Whether the row is marked damaged (until a write replaces it); `verify` also re-reads its
        payload. Re-ingest recomputes such a row, and its write heals it."""
        ...

    def search_text(self, tenant: str, query: str, kind: str | None = None,
                    limit: int = 10) -> list[tuple[Record, float]]:
        """Active rows of `tenant` whose text matches words of `query`, best first (higher score)."""
        ...

    # ---- writes ------------------------------------------------------------------------------
    def put(self, tenant: str, kind: str, key: str, *, meta: dict | None = None,
            payload: Bytes | None = None, parent: str | None = None, text: str | None = None,
            state: str = "active") -> Record: ...

    def delete(self, tenant: str, kind: str, key: str) -> bool: ...

    def set_state(self, tenant: str, kind: str, key: str, state: str) -> None: ...

    def transaction(self) -> AbstractContextManager[StoreTxn]: ...

    # ---- operators and lifecycle -------------------------------------------------------------
    def stats(self) -> dict:
        """At least `STATS_KEYS`; `counters` holds at least `MISS_COUNTERS`."""
        ...

    def fsck(self, repair: bool = False) -> FsckReport: ...

    def close(self) -> None: ...

    def __enter__(self) -> StoreBackend: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class ScatterReads(Protocol):
    """Optional: read a payload file straight into the caller's buffers (no intermediate bytes)."""

    def read_payload_into(self, record: Record, plan: Callable[[bytes], list[memoryview] | None]) -> bool:
        """`plan(header JSON)` returns buffers covering the tensor bytes in file order, or None.
        True only if what was read is exactly the record's bytes (size and SHA-256). False is not
        a verdict: the caller falls back to `read_payload`, which decides, counts and logs."""
        ...


@runtime_checkable
class ChangeFeed(Protocol):
    """Optional: what changed in one (tenant, kind) since an LSN."""

    def rows_since(self, tenant: str, kind: str, lsn: int) -> tuple[list[Record], int]:
        """(the rows of (tenant, kind) whose last write is after `lsn`, in any state, oldest
        first; how many rows (tenant, kind) holds now), read together. A row deleted since shows
        only in the count: a caller whose rows outnumber it asks `keys`."""
        ...

    def keys(self, tenant: str, kind: str) -> set[str]:
        """The keys of every row of (tenant, kind), in any state (no row is read)."""
        ...


@runtime_checkable
class DurabilityControl(Protocol):
    """Optional: a store whose durability mode the caller chooses (grm.store.config)."""

    @property
    def durability(self) -> str: ...

    def set_durability(self, mode: str) -> None: ...

    def flush(self) -> None:
        """Make every acknowledged write durable now."""
        ...
