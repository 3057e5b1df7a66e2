"""The resident host tier: verified exact blocks kept in host RAM between requests.

A long-lived runtime (`grm serve`, or any Runtime opened with `host_budget` > 0) keeps the K/V of
the exact blocks it loaded, verified, in host memory (page-locked when the model runs on CUDA, so
a mount from here is an asynchronous host->device copy), under a byte budget. A repeated context
is then mounted from RAM: no store read, no SHA-256.

Lifecycle: the runtime builds one tier and shares it with every tenant's view of it (one budget
per process). The exact plane calls `get(key)` for a block it is about to load, and `put(key,
kv)` for a block it has just read and verified (`ExactMemory`, grm/exact/load.py). Nothing else
writes it.

What keeps it correct:
- It is a cache of verified bytes, never an authority: a lookup happens only after the store
  gave an active row for the block, and the key names the row's payload (its digest-derived
  name and size) and the block's binding (tenant, fingerprint, parent, seat). A record deleted or
  collected has no row, so its entry is never asked for (it ages out); a record rewritten with
  other bytes has another payload name, so the old entry never matches.
- Tenants never meet: the tenant is part of every key, and a runtime asks only with its own.
- Budget: least recently used first, from the tenant furthest over its fair share (the budget
  split evenly between the tenants holding entries), so one busy tenant cannot push every other
  tenant's blocks out. An entry larger than the budget is not kept.

Counters (what /metrics shows per tenant): hits, misses (lookups that found nothing), bytes held,
inserts, evictions and bytes served from RAM.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass

from grm.kv import KV

ZERO = {"hits": 0, "misses": 0, "inserts": 0, "evictions": 0, "bytes_served": 0}  # a tenant's counters at start


@dataclass(frozen=True)
class TierKey:
    tenant: str
    key: str  # the block's fingerprint (its record key)
    payload: str  # the record's payload name (SHA-256, or its keyed HMAC when encrypted)
    size: int  # the payload's size in bytes
    parent: str  # the binding the bytes were verified against
    seat: int


class HostTier:
    def __init__(self, budget: int) -> None:
        if budget < 0:
            raise ValueError("the host tier's budget must be >= 0 bytes")
        self.budget = budget
        self._entries: dict[str, OrderedDict[TierKey, KV]] = {}  # tenant -> entries, least recently used first
        self._bytes: dict[str, int] = {}
        self._lock = threading.Lock()
        self._counters: dict[str, dict[str, int]] = {}

    def _count(self, tenant: str, name: str, n: int = 1) -> None:
        self._counters.setdefault(tenant, dict(ZERO))[name] += n

    def get(self, key: TierKey) -> KV | None:
        with self._lock:
            entries = self._entries.get(key.tenant)
            kv = entries.get(key) if entries is not None else None
            if kv is None:
                self._count(key.tenant, "misses")
                return None
            entries.move_to_end(key)
            self._count(key.tenant, "hits")
            self._count(key.tenant, "bytes_served", kv.nbytes)
            return kv

    def put(self, key: TierKey, kv: KV) -> None:
        """Keep `kv` (verified; not shared with anything the caller will write) under `key`."""
        if kv.nbytes > self.budget:
            return
        with self._lock:
            entries = self._entries.setdefault(key.tenant, OrderedDict())
            old = entries.pop(key, None)
            if old is not None:
                self._bytes[key.tenant] -= old.nbytes
            entries[key] = kv
            self._bytes[key.tenant] = self._bytes.get(key.tenant, 0) + kv.nbytes
            self._count(key.tenant, "inserts")
            self._fit(protect=key)

    def _fit(self, protect: TierKey) -> None:
        """Evict until the budget holds: the least recently used entry of the tenant furthest over
        its fair share, never the entry just put (it is its tenant's most recent, so it goes only
        when nothing else of any tenant is left, which `put`'s size check rules out)."""
        while sum(self._bytes.values()) > self.budget:
            share = self.budget / len(self._entries)
            tenants = [t for t, e in self._entries.items() if len(e) > 1 or protect not in e]
            tenant = max(tenants, key=lambda t: self._bytes[t] - share)
            entries = self._entries[tenant]
            kv = entries.pop(next(iter(entries)))
            self._bytes[tenant] -= kv.nbytes
            self._count(tenant, "evictions")
            if not entries:
                del self._entries[tenant], self._bytes[tenant]

    def stats(self, tenant: str) -> dict[str, int]:
        """`tenant`'s figures: hits, misses, inserts, evictions, bytes_served, bytes and blocks held."""
        with self._lock:
            c = dict(self._counters.get(tenant, ZERO))
            c["bytes"] = self._bytes.get(tenant, 0)
            c["blocks"] = len(self._entries.get(tenant, ()))
            return c

    @property
    def nbytes(self) -> int:
        with self._lock:
            return sum(self._bytes.values())
