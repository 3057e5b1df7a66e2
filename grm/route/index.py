"""A dense-key index: the routable rows of one (tenant, kind), held in memory and kept in step
with the store by its LSN, so a query costs one matrix product instead of a pass over every row.

Holds, per routable row (what the caller's `admit` accepts): its dense routing keys (the fp16
keys stored in its meta by grm.route.dense.encode_key, one matrix row per key, a row's keys
contiguous), its `kind` meta and, when the caller counts words, its content words (document
frequencies kept as counts). Nothing here is authoritative: the store is. Every read first
brings the index up to the store's `last_lsn`: unchanged -> nothing read; moved -> the rows
written since (`ChangeFeed.rows_since`; when the store holds fewer rows than the index has seen,
rows were deleted, and `ChangeFeed.keys` says which), or the whole (tenant, kind) listing on a
backend without a change feed, or once more than half the index's slots are dead. A row found
through the index is read again from the store before it is used, so a row changed by another
process is never served as it was.

Users: graft routing (grm/grafts/memory.py: admits this model's active, unretired grafts and
counts their words for the abstain floor) and section selection (grm/sections/memory.py: the
blocks read alone after the sinks). Each builds its index lazily, on the first query. A watcher
(`watch`: the policy glue's routing exclusions, grm/runtime/policy_glue.py) is told, under the
index's lock, each routable row as it is admitted (`put`), each that stops being routable
(`drop`) and each full read about to start (`reset`), so it keeps its own state in step with the
same reads.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

import numpy as np
import torch

from grm.route.dense import decode_keys
from grm.route.lexical import Hit
from grm.store import Record
from grm.store.backend import ChangeFeed

NOT_ROUTABLE = -1
# a router whose dense channel may mount on its own weighs at least this many of its best rows
# (`candidates`); the rest score below every one of them and never outrank them
DENSE_CANDIDATES = 64


class Watcher(Protocol):
    """Told what the index admits and drops (`DenseIndex.watch`)."""

    def reset(self) -> None: ...

    def put(self, rec: Record) -> None: ...

    def drop(self, key: str) -> None: ...


class DenseIndex:
    def __init__(self, store, tenant: str, kind: str, width: int, admit: Callable[[Record], bool],
                 words: Callable[[str], Iterable[str]] | None = None) -> None:
        """`width`: the numbers in one dense key of this model (grm.route.dense.key_width);
        `admit(record)`: whether a row is routable; `words(text)`: its content words, to keep
        document frequencies (None: none kept)."""
        self.store, self.tenant, self.kind, self.width = store, tenant, kind, width
        self.admit, self.count_words = admit, words
        self.lock = threading.Lock()
        self.full_reads = 0  # times the whole listing was read (the first build included)
        self.watchers: list[Watcher] = []
        self._reset()

    def watch(self, watcher: Watcher) -> None:
        """Tell `watcher` from now on; the listing is read again at the next read, so it is told
        every routable row."""
        with self.lock:
            self.watchers.append(watcher)
            self.lsn = -1

    def sync(self) -> None:
        """Bring the index (and its watchers) up to the store's last LSN."""
        with self.lock:
            self.refresh()

    def _reset(self) -> None:
        for w in self.watchers:
            w.reset()
        self.lsn = -1  # the store LSN this index reflects
        self.seen: dict[str, int] = {}  # every row of (tenant, kind) -> its slot, or NOT_ROUTABLE
        self.keys_of: list[str] = []  # slot -> row key
        self.kinds: list[str] = []
        self.words: list[tuple[str, ...]] = []
        self.n = 0  # routable rows with their words counted
        self.df: dict[str, int] = {}  # word -> routable rows holding it
        self._live = np.zeros(0, dtype=bool)  # slot -> routable now (a rewritten row's old slot dies)
        # key rows, a row's keys contiguous: fp32 (the stored fp16 keys widened once), because
        # widening per query cost more than the product and an fp16 product rounds the scores
        self._mat = np.zeros((0, self.width), dtype=np.float32)
        self._owner = np.zeros(0, dtype=np.int64)  # key row -> slot
        self._rows = 0
        self._starts: tuple[int, np.ndarray, np.ndarray] | None = None  # (rows, starts, slots) cached
        self.dead = 0

    # ----- keeping in step ---------------------------------------------------------------------
    def refresh(self) -> None:
        """Bring the index up to the store's last LSN (call under `self.lock`)."""
        lsn = self.store.last_lsn
        if lsn == self.lsn:
            return
        if self.lsn >= 0 and isinstance(self.store, ChangeFeed):
            rows, count = self.store.rows_since(self.tenant, self.kind, self.lsn)
            if len(self.seen) + sum(1 for r in rows if r.key not in self.seen) != count:
                present = self.store.keys(self.tenant, self.kind)  # rows were deleted: which
                for key in [k for k in self.seen if k not in present]:
                    self._drop(self.seen.pop(key))
            for rec in rows:
                self._put(rec)
            if len(self.seen) == count and self.dead <= max(1024, len(self.keys_of) // 2):
                self.lsn = lsn
                return
        self._reset()
        self.full_reads += 1
        for rec in self.store.records(self.tenant, self.kind):
            self._put(rec)
        self.lsn = lsn

    def _drop(self, slot: int) -> None:
        """The row in `slot` was rewritten or deleted: its slot dies (reclaimed by the next full
        read, once more than half the slots are dead)."""
        if slot != NOT_ROUTABLE and self._live[slot]:
            self._live[slot] = False
            self.dead += 1
            for w in self.watchers:
                w.drop(self.keys_of[slot])
            for t in self.words[slot]:
                self.df[t] -= 1
            self.n -= bool(self.count_words)

    def _put(self, rec: Record) -> None:
        self._drop(self.seen.get(rec.key, NOT_ROUTABLE))
        if not self.admit(rec):
            self.seen[rec.key] = NOT_ROUTABLE
            return
        slot = len(self.keys_of)
        self.seen[rec.key] = slot
        # interned: a hundred thousand rows share one vocabulary and a handful of kinds
        words = tuple(map(sys.intern, self.count_words(rec.text or ""))) if self.count_words else ()
        kind = rec.meta.get("kind")
        self.keys_of.append(rec.key)
        self.kinds.append(sys.intern(kind) if isinstance(kind, str) else kind)
        self.words.append(words)
        self.n += bool(self.count_words)
        for t in words:
            self.df[t] = self.df.get(t, 0) + 1
        if slot >= len(self._live):
            live = np.zeros(max(256, 2 * len(self._live)), dtype=bool)
            live[:slot] = self._live[:slot]
            self._live = live
        self._live[slot] = True
        rows = decode_keys(rec.meta.get("dense"), self.width)
        if rows is not None:  # a row without a dense key is left to the lexical channel
            self._append(rows, slot)
        for w in self.watchers:
            w.put(rec)

    def _append(self, rows: np.ndarray, slot: int) -> None:
        need = self._rows + len(rows)
        if need > len(self._mat):
            cap = max(need, 2 * len(self._mat), 256)
            mat = np.zeros((cap, self.width), dtype=np.float32)
            mat[:self._rows] = self._mat[:self._rows]
            owner = np.zeros(cap, dtype=np.int64)
            owner[:self._rows] = self._owner[:self._rows]
            self._mat, self._owner = mat, owner
        self._mat[self._rows:need] = rows
        self._owner[self._rows:need] = slot
        self._rows = need

    # ----- reading -----------------------------------------------------------------------------
    def dense(self, query: torch.Tensor, exclude: Iterable[str] = ()) -> DenseScores:
        """Every routable row's dense score against `query` (a query key [layers', kv_heads,
        head_dim], normalized, grm.route.dense.query_key): the best over its keys of the mean
        cosine per (layer, head), i.e. the dot product over `width` divided by the number of
        (layer, head) pairs, as grm.route.dense.score computes it.
        Rows with no dense key and the keys in `exclude` are left out."""
        with self.lock:
            self.refresh()
            n = self._rows
            if n == 0:
                return DenseScores(np.zeros(0, dtype=np.float32), {}, [])
            q = query.detach().to("cpu", torch.float32).numpy()
            q = q.reshape(-1) / (q.size // q.shape[-1])  # a mean over (layer, head) pairs
            per_row = self._mat[:n] @ q
            if self._starts is None or self._starts[0] != n:  # each slot's first key row, and the slot
                owner = self._owner[:n]
                starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
                self._starts = (n, starts, owner[starts])
            _, starts, slots = self._starts
            best = np.maximum.reduceat(per_row, starts)
            keep = self._live[slots].copy()
            out = [s for s in (self.seen.get(k, NOT_ROUTABLE) for k in exclude) if s != NOT_ROUTABLE]
            if out:
                excluded = np.zeros(len(self.keys_of), dtype=bool)
                excluded[out] = True
                keep &= ~excluded[slots]
            by_slot = np.full(len(self.keys_of), np.nan, dtype=np.float32)
            by_slot[slots[keep]] = best[keep]
            return DenseScores(by_slot, self.seen, self.keys_of)

    def frequencies(self) -> tuple[int, dict[str, int]]:
        """(routable rows, word -> rows holding it): the index's own counts (read, do not change;
        a word's count may be 0)."""
        with self.lock:
            self.refresh()
            return self.n, self.df

    def __len__(self) -> int:
        """How many routable rows there are now."""
        with self.lock:
            self.refresh()
            return len(self.keys_of) - self.dead

    def keys(self, kind: str | None = None) -> list[str]:
        """The routable rows' keys (whose `kind` meta is `kind`, if given), in the order the
        index met them."""
        with self.lock:
            self.refresh()
            return [k for s, k in enumerate(self.keys_of) if self._live[s] and (kind is None or self.kinds[s] == kind)]


class DenseScores:
    """One query's dense scores over the index's rows (`DenseIndex.dense`), by slot (NaN: not
    scored). Holds the index's own key maps as they were: a later refresh only appends to them or
    replaces them."""

    def __init__(self, by_slot: np.ndarray, seen: dict[str, int], keys_of: list[str]) -> None:
        self.by_slot, self._seen, self._keys_of = by_slot, seen, keys_of
        self._scored = np.flatnonzero(~np.isnan(by_slot))

    def __len__(self) -> int:
        return len(self._scored)

    def bounds(self) -> tuple[float, float] | None:
        """(lowest, highest) score over every row scored; None when there is none."""
        if not len(self._scored):
            return None
        v = self.by_slot[self._scored]
        return float(v.min()), float(v.max())

    def get(self, key: str) -> float | None:
        s = self._seen.get(key, NOT_ROUTABLE)
        if s == NOT_ROUTABLE or s >= len(self.by_slot) or np.isnan(self.by_slot[s]):
            return None
        return float(self.by_slot[s])

    def top(self, m: int) -> list[str]:
        """The `m` best-scoring rows' keys, best first."""
        m = min(m, len(self._scored))
        if m <= 0:
            return []
        v = self.by_slot[self._scored]
        part = np.argpartition(-v, m - 1)[:m]
        part = part[np.argsort(-v[part], kind="stable")]
        return [self._keys_of[s] for s in self._scored[part].tolist()]


def candidates(scores: DenseScores, lexical: dict[str, Hit], fetch: Callable[[str], Record | None] | None,
               at_least: int) -> dict[str, tuple[Record, float]]:
    """What `combine` ranks from the dense channel: the lexical hits' cosines and, when `fetch`
    is given (the dense channel may mount on its own), the `at_least` best rows by cosine, each
    read again through `fetch` (None: no longer routable). A row outside both scores below every
    one of those, so it could not outrank them."""
    out = {}
    for key, hit in lexical.items():
        cos = scores.get(key)
        if cos is not None:
            out[key] = (hit.record, cos)
    if fetch is not None:
        for key in scores.top(at_least):
            if key not in out and (rec := fetch(key)) is not None:
                out[key] = (rec, scores.get(key))
    return out
