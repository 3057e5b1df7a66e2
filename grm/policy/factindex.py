"""The fact index: the ledger's rows of one tenant held in memory and kept in step with the store
by its LSN, so that the live facts and what routing must skip are read without a pass over
every fact (grm/route/index.py does the same for the grafts' dense keys).

Holds every row of the kinds the ledger and the folder write that routing reads: `fact` nodes,
their `fact_support` rows, their `fact_graft` links and the folder's `retired` rows. Nothing here
is authoritative: the store is. Every read first brings the rows up to the store's `last_lsn`:
unchanged -> nothing read; moved -> per kind the rows written since (`ChangeFeed.rows_since`;
when the store holds a different count than expected, rows were deleted and `ChangeFeed.keys`
says which), or, on a backend without a change feed (Redis, shared with other writers), the
tenant's listing, read once for the four kinds and compared with what is held so that only
changed rows count as changed.
A process that starts reads the listing once.

What is derived, per claim (subject, predicate: the facts that can shadow or supersede each
other, `Fact.key`), only for claims whose rows changed, whose facts' validity starts or ends
between two reads (`valid_from`, `expires_at`), or all of them when the scope changes or the
clock goes back:
- the claim's live facts (`PolicyMemory.facts`: active, valid now, visible in the scope, the
  narrowest scope's for a single-valued claim);
- its stale values (grm/policy/stale.py);
- counts over the claims: grafts of live and of other facts, evidence ids of live and of other
  facts. An `Observer` (grm/policy/exclusions.py) is told each graft id, evidence id, stale
  value and retired id whose standing changed.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from grm.policy.fact import Fact, Scope, claim_key
from grm.policy.fold import RETIRED
from grm.policy.ledger import FACT, GRAFT, SUPPORT, view
from grm.policy.stale import StaleValue, stale_values
from grm.store import Record
from grm.store.backend import ChangeFeed, StoreBackend

KINDS = (FACT, SUPPORT, GRAFT, RETIRED)
Claim = tuple[str, str]
StaleKey = tuple[Claim, str]  # (claim, old value), as stale_values keys them


class Observer(Protocol):
    """Told, under the index's lock, what changed standing (it reads the index's counts)."""

    def graft(self, graft_id: str) -> None: ...

    def evidence(self, evidence_id: str) -> None: ...

    def stale(self, key: StaleKey, old: StaleValue | None, new: StaleValue | None) -> None: ...

    def retired(self, key: str) -> None: ...


@dataclass(frozen=True)
class _Derived:
    """What one claim contributes, computed at one time in one scope."""

    live: tuple[Fact, ...]
    live_grafts: tuple[str, ...]
    dead_grafts: tuple[str, ...]  # grafts of the claim's facts that are not live
    live_evidence: tuple[str, ...]
    dead_evidence: tuple[str, ...]
    stale: dict[StaleKey, StaleValue]
    lo: float  # valid for `now` in [lo, hi): no validity of the claim's facts starts or ends inside
    hi: float


_EMPTY = _Derived((), (), (), (), (), {}, -math.inf, math.inf)


class FactIndex:
    def __init__(self, store: StoreBackend, tenant: str) -> None:
        self.store, self.tenant = store, tenant
        self.lock = threading.RLock()
        self.observer: Observer | None = None
        self.full_reads = 0  # listings read: one per kind at the first read; the tenant's, without a change feed
        self._clear()

    def _clear(self) -> None:
        self.lsn = -1  # the store LSN the rows reflect
        self.rows: dict[str, dict[str, Record]] = {k: {} for k in KINDS}
        self.supports: dict[str, dict[str, Record]] = {}  # fact id -> its active support rows by key
        self.claim_of: dict[str, Claim] = {}  # fact id -> its claim
        self.claims: dict[Claim, set[str]] = {}  # claim -> its fact ids
        self.views: dict[str, Fact] = {}  # fact id -> its view (dropped when a row of it changes)
        self.derived: dict[Claim, _Derived] = {}
        self.dirty: set[Claim] = set()  # claims to derive again at the next read
        self.scope: Scope | None = None  # the scope `derived` holds for
        self.lo = -math.inf  # the latest start of a claim's validity window: earlier `now` derives all again
        self.ends: list[tuple[float, Claim]] = []  # heap of (hi, claim): claims to derive again once now >= hi
        self.retired: set[str] = set()  # active retired rows: folded turns and digests under an era
        self.live_grafts: Counter[str] = Counter()
        self.dead_grafts: Counter[str] = Counter()
        self.live_evidence: Counter[str] = Counter()
        self.dead_evidence: Counter[str] = Counter()
        self.stale: dict[StaleKey, StaleValue] = {}
        self.live: dict[str, Fact] = {}  # fact id -> live view
        self._listed: list[Fact] | None = None  # `live` in write order, cached

    def attach(self, observer: Observer) -> None:
        """Tell `observer` from now on; everything is read and derived again at the next read, so
        it is told the standing of every id."""
        with self.lock:
            self.observer = observer
            self._clear()

    # ----- keeping the rows in step ------------------------------------------------------------
    def refresh(self) -> None:
        """Bring the rows up to the store's last LSN (call under `self.lock`)."""
        lsn = self.store.last_lsn
        if lsn == self.lsn:
            return
        if isinstance(self.store, ChangeFeed):
            for kind in KINDS:
                held = self.rows[kind]
                if self.lsn < 0:  # the first read: the listing
                    self.full_reads += 1
                    rows = list(self.store.records(self.tenant, kind))
                else:
                    rows, count = self.store.rows_since(self.tenant, kind, self.lsn)
                    if len(held) + sum(1 for r in rows if r.key not in held) != count:
                        present = self.store.keys(self.tenant, kind)  # rows were deleted: which
                        for key in [k for k in held if k not in present]:
                            self._drop(kind, key)
                for rec in rows:
                    self._put(rec)
        else:  # no change feed (other writers may share the store): the tenant's listing, read once for
            # every kind (a Redis listing is the tenant's whole hash), of which only rows changed count
            self.full_reads += 1
            listing: dict[str, dict[str, Record]] = {k: {} for k in KINDS}
            for rec in self.store.records(self.tenant):
                if rec.kind in listing:
                    listing[rec.kind][rec.key] = rec
            for kind, present in listing.items():
                held = self.rows[kind]
                for key in [k for k in held if k not in present]:
                    self._drop(kind, key)
                for rec in sorted(present.values(), key=lambda r: r.lsn):
                    old = held.get(rec.key)
                    if old is None or old.lsn != rec.lsn or old.state != rec.state:
                        self._put(rec)
        self.lsn = lsn

    def _touch(self, fact_id: str) -> None:
        self.views.pop(fact_id, None)
        claim = self.claim_of.get(fact_id)
        if claim is not None:
            self.dirty.add(claim)

    def _drop(self, kind: str, key: str) -> None:
        old = self.rows[kind].pop(key, None)
        if old is None:
            return
        if kind == FACT:
            self._touch(key)
            claim = self.claim_of.pop(key)
            members = self.claims[claim]
            members.discard(key)
            if not members:
                del self.claims[claim]
        elif kind == SUPPORT:
            if old.parent is not None:
                self.supports.get(old.parent, {}).pop(key, None)
                self._touch(old.parent)
        elif kind == GRAFT:
            self._touch(key)
        elif key in self.retired:
            self.retired.discard(key)
            if self.observer is not None:
                self.observer.retired(key)

    def _put(self, rec: Record) -> None:
        kind, key = rec.kind, rec.key
        self._drop(kind, key)
        self.rows[kind][key] = rec
        if kind == FACT:
            claim = claim_key(rec.meta["subject"], rec.meta["predicate"])  # `Fact.key`, the view built later
            self.claim_of[key] = claim
            self.claims.setdefault(claim, set()).add(key)
            self._touch(key)
        elif kind == SUPPORT:
            if rec.parent is not None:
                if rec.state == "active":  # Store.children lists active rows only
                    self.supports.setdefault(rec.parent, {})[key] = rec
                self._touch(rec.parent)
        elif kind == GRAFT:
            self._touch(key)
        elif rec.state == "active":
            self.retired.add(key)
            if self.observer is not None:
                self.observer.retired(key)

    # ----- deriving ----------------------------------------------------------------------------
    def _view(self, fact_id: str) -> Fact:
        got = self.views.get(fact_id)
        if got is None:
            supports = sorted(self.supports.get(fact_id, {}).values(), key=lambda r: r.lsn)
            got = self.views[fact_id] = view(self.rows[FACT][fact_id], supports, self.rows[GRAFT].get(fact_id))
        return got

    def sync(self, now: float, scope: Scope) -> None:
        """Bring the rows and what is derived from them up to the store, at `now`, in `scope`."""
        with self.lock:
            self.refresh()
            if scope != self.scope or now < self.lo:
                self.scope, self.lo = scope, -math.inf
                self.dirty.update(self.derived)
                self.dirty.update(self.claims)
            while self.ends and self.ends[0][0] <= now:
                self.dirty.add(heapq.heappop(self.ends)[1])
            if not self.dirty:
                return
            for claim in self.dirty:
                self._derive(claim, now)
            self.dirty.clear()
            if len(self.ends) > 2 * len(self.derived) + 64:  # entries of claims derived again since
                self.ends = [(d.hi, c) for c, d in self.derived.items() if d.hi < math.inf]
                heapq.heapify(self.ends)

    def _derive(self, claim: Claim, now: float) -> None:
        ids = self.claims.get(claim, ())
        new = _EMPTY
        if ids:
            nodes = sorted((self._view(i) for i in ids), key=lambda f: self.rows[FACT][f.id].lsn)  # write order
            ctx = self.scope or Scope()
            live = [f for f in nodes if f.live(now) and f.scope.visible_in(ctx)]
            if live and not live[0].multi_valued:  # the narrowest scope's (PolicyMemory.facts)
                deepest = max(f.scope.depth for f in live)
                live = [f for f in live if f.scope.depth == deepest]
            live_ids = {f.id for f in live}
            dead = [f for f in nodes if f.id not in live_ids]
            edges = [t for f in nodes if f.state == "active" for t in (f.valid_from, f.expires_at) if t is not None]
            new = _Derived(
                tuple(live), tuple(f.graft for f in live if f.graft), tuple(f.graft for f in dead if f.graft),
                tuple(e.id for f in live for e in f.evidence), tuple(e.id for f in dead for e in f.evidence),
                {(claim, s.value): s for s in stale_values(nodes, live, now)},
                max((t for t in edges if t <= now), default=-math.inf), min((t for t in edges if t > now), default=math.inf))
        old = self.derived.pop(claim, _EMPTY)
        if ids:
            self.derived[claim] = new
            self.lo = max(self.lo, new.lo)
            if new.hi < math.inf:
                heapq.heappush(self.ends, (new.hi, claim))
        if old.live != new.live:
            for f in old.live:
                self.live.pop(f.id, None)
            for f in new.live:
                self.live[f.id] = f
            self._listed = None
        grafts: set[str] = set()  # ids whose counts changed: told once all counts are updated
        evidence: set[str] = set()
        for counts, was, got, changed in ((self.live_grafts, old.live_grafts, new.live_grafts, grafts),
                                          (self.dead_grafts, old.dead_grafts, new.dead_grafts, grafts),
                                          (self.live_evidence, old.live_evidence, new.live_evidence, evidence),
                                          (self.dead_evidence, old.dead_evidence, new.dead_evidence, evidence)):
            if was != got:
                counts.subtract(was)
                counts.update(got)
                for k in set(was):
                    if counts[k] <= 0:
                        del counts[k]
                changed.update(was)
                changed.update(got)
        obs = self.observer
        if obs is not None:
            for k in grafts:
                obs.graft(k)
            for k in evidence:
                obs.evidence(k)
        for key in old.stale.keys() | new.stale.keys():
            a, b = old.stale.get(key), new.stale.get(key)
            if a != b:
                if b is None:
                    del self.stale[key]
                else:
                    self.stale[key] = b
                if obs is not None:
                    obs.stale(key, a, b)

    # ----- reading -----------------------------------------------------------------------------
    def facts(self, now: float, scope: Scope) -> list[Fact]:
        """The live facts visible in `scope` at `now`, oldest write first (PolicyMemory.facts)."""
        with self.lock:
            self.sync(now, scope)
            if self._listed is None:
                self._listed = sorted(self.live.values(), key=lambda f: self.rows[FACT][f.id].lsn)
            return list(self._listed)

    def stale_evidence(self, evidence_id: str) -> bool:
        """Whether only facts that are not live name `evidence_id` (read after `sync`)."""
        return self.dead_evidence.get(evidence_id, 0) > 0 and self.live_evidence.get(evidence_id, 0) <= 0

    def is_retired(self, key: str) -> bool:
        """Whether `key` was folded (read after `sync` or `refresh`)."""
        return key in self.retired

    def without_retired(self, ids: Iterable[str]) -> frozenset[str]:
        """`ids` less the folded ones, the rows brought up to the store first."""
        with self.lock:
            self.refresh()
            return frozenset(i for i in ids if i not in self.retired)
