"""Ledger: fact nodes and their edges in the store. Writes only append; nothing is edited.

Kinds this module owns (all rows of one tenant; the store never interprets them):

    fact            a fact node (layout in `grm.policy.fact`); parent = the node it supersedes
    fact_support    a reinforcement: parent = fact id, meta {fact, intent, confidence, evidence}
    fact_lineage    key = a superseded fact id, meta {successor | tombstone, reason, at, evidence}:
                    the edge that says where a superseded fact went (one per superseded node)
    fact_tombstone  key t-<hex>: a forget; meta {facts, query, at, evidence}
    fact_graft      key = fact id, meta {graft}: the fact's K/V graft, attached after the node
                    was written (a routing attachment, re-attachable; the node stays as written)

A supersession is one store transaction: the new node (or tombstone), the old nodes' state set to
superseded and their lineage rows commit together, so lineage is resolvable after any crash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence

from grm.errors import StoreError, UserInputError
from grm.policy.fact import Evidence, Fact, rank
from grm.store import Record, kinds
from grm.store.backend import StoreBackend
from grm.store.record import canonical_json

FACT, SUPPORT, LINEAGE, TOMBSTONE, GRAFT = (kinds.FACT, kinds.FACT_SUPPORT, kinds.FACT_LINEAGE, kinds.FACT_TOMBSTONE,
                                            kinds.FACT_GRAFT)


def new_key(store: StoreBackend, tenant: str, kind: str, prefix: str, *parts: object) -> str:
    """A fresh key `prefix-<12 hex>` derived from `parts` and the store's LSN (deterministic for
    a given history, unique within (tenant, kind))."""
    base = canonical_json([list(map(str, parts)), store.last_lsn])
    for n in range(1000):
        digest = hashlib.sha256(f"{base}|{n}".encode()).hexdigest()[:12]
        key = f"{prefix}-{digest}"
        if store.get(tenant, kind, key) is None:
            return key
    raise StoreError(f"cannot find a free {kind} key")  # 1000 collisions of 48-bit hashes: a bug


def _combine(confidences: Sequence[float]) -> float:
    """Independent pieces of evidence for one claim (noisy-or): 1 - prod(1 - c)."""
    miss = 1.0
    for c in confidences:
        miss *= 1.0 - c
    return round(1.0 - miss, 6)


def view(rec: Record, supports: Sequence[Record], link: Record | None) -> Fact:
    """A fact node's effective view: the node `rec`, its active support rows `supports` (oldest
    first) folded in, and its graft link row `link` (any state), if any."""
    fact = Fact.from_meta(rec.key, rec.meta, rec.state)
    if not supports and link is None:
        return fact
    intent = max([fact.node_intent] + [s.meta["intent"] for s in supports], key=rank)
    evidence = fact.evidence + tuple(Evidence.from_json(s.meta["evidence"]) for s in supports)
    return fact.with_(intent=intent, count=fact.node_count + len(supports),
                      confidence=_combine([fact.node_confidence] + [s.meta["confidence"] for s in supports]),
                      evidence=evidence, graft=link.meta["graft"] if link is not None else fact.graft)


class Ledger:
    """Fact nodes of one tenant, read as effective views (node + supports + graft link)."""

    def __init__(self, store: StoreBackend, tenant: str) -> None:
        self.store = store
        self.tenant = tenant

    # ---- reads -----------------------------------------------------------------------------

    def _view(self, rec: Record) -> Fact:
        return view(rec, self.store.children(self.tenant, SUPPORT, rec.key), self.store.get(self.tenant, GRAFT, rec.key))

    def get(self, fact_id: str) -> Fact | None:
        rec = self.store.get(self.tenant, FACT, fact_id)
        return self._view(rec) if rec is not None else None

    def nodes(self) -> Iterator[Fact]:
        """Every fact node of the tenant, superseded ones included, oldest write first."""
        for rec in sorted(self.store.records(self.tenant, FACT), key=lambda r: r.lsn):
            yield self._view(rec)

    def active(self) -> list[Fact]:
        return [f for f in self.nodes() if f.state == "active"]

    def edge(self, fact_id: str) -> dict | None:
        """Where a superseded fact went: {successor | tombstone, reason, at, evidence}, or None."""
        rec = self.store.get(self.tenant, LINEAGE, fact_id)
        return rec.meta if rec is not None else None

    def tombstone(self, key: str) -> dict | None:
        rec = self.store.get(self.tenant, TOMBSTONE, key)
        return rec.meta if rec is not None else None

    def lineage(self, fact_id: str) -> list[Fact]:
        """The fact and every node it (transitively) supersedes, oldest first."""
        seen: dict[str, Fact] = {}
        todo = [fact_id]
        while todo:
            fid = todo.pop()
            if fid in seen:
                continue
            fact = self.get(fid)
            if fact is None:
                continue
            seen[fid] = fact
            todo.extend(fact.supersedes)
        return sorted(seen.values(), key=lambda f: (f.created, f.id))

    def successor(self, fact_id: str) -> Fact | None:
        """The active node a superseded fact leads to (None if it was forgotten or is unknown)."""
        fid, hops = fact_id, 0
        while hops < 10_000:
            fact = self.get(fid)
            if fact is None:
                return None
            if fact.state == "active":
                return fact
            edge = self.edge(fid)
            if edge is None or edge.get("successor") is None:
                return None
            fid, hops = edge["successor"], hops + 1
        raise StoreError(f"lineage of {fact_id} does not end")

    # ---- writes ----------------------------------------------------------------------------

    def write(self, fact: Fact, supersede: Sequence[tuple[str, str]], evidence: Evidence) -> Fact:
        """Write node `fact` and supersede the (id, reason) pairs in one transaction."""
        with self.store.transaction() as txn:
            parent = fact.supersedes[0] if fact.supersedes else None
            txn.put(self.tenant, FACT, fact.id, meta=fact.to_meta(), text=fact.statement, parent=parent)
            self._supersede(txn, supersede, fact.id, evidence)
        return fact

    def _supersede(self, txn, supersede: Sequence[tuple[str, str]], successor: str, evidence: Evidence) -> None:
        for old, reason in supersede:
            txn.set_state(self.tenant, FACT, old, "superseded")
            txn.put(self.tenant, LINEAGE, old, parent=successor,
                    meta={"successor": successor, "tombstone": None, "reason": reason, "at": evidence.at,
                          "evidence": evidence.to_json()})

    def retire(self, supersede: Sequence[tuple[str, str]], successor: str, evidence: Evidence) -> None:
        """Supersede the (id, reason) pairs in favour of an existing node `successor`."""
        with self.store.transaction() as txn:
            self._supersede(txn, supersede, successor, evidence)

    def reinforce(self, fact_id: str, intent: str, confidence: float, evidence: Evidence) -> bool:
        """Add a support record; False (nothing written) if this evidence id already supports it."""
        fact = self.get(fact_id)
        if fact is None:
            raise StoreError(f"no fact {fact_id} to reinforce")
        if any(e.id == evidence.id for e in fact.evidence):
            return False
        key = new_key(self.store, self.tenant, SUPPORT, "s", fact_id, evidence.id)
        self.store.put(self.tenant, SUPPORT, key, parent=fact_id,
                       meta={"fact": fact_id, "intent": intent, "confidence": confidence,
                             "evidence": evidence.to_json()})
        return True

    def forget(self, fact_ids: Sequence[str], query: str, evidence: Evidence) -> str:
        """Tombstone `fact_ids` (all active): one tombstone row, each node superseded with a
        lineage row naming it. Returns the tombstone id."""
        if not fact_ids:
            raise StoreError("forget needs at least one fact")  # callers refuse empty matches first
        key = new_key(self.store, self.tenant, TOMBSTONE, "t", *fact_ids)
        with self.store.transaction() as txn:
            txn.put(self.tenant, TOMBSTONE, key, text=None,
                    meta={"facts": list(fact_ids), "query": query, "at": evidence.at,
                          "evidence": evidence.to_json()})
            for fid in fact_ids:
                txn.set_state(self.tenant, FACT, fid, "superseded")
                txn.put(self.tenant, LINEAGE, fid, parent=key,
                        meta={"successor": None, "tombstone": key, "reason": "forgotten", "at": evidence.at,
                              "evidence": evidence.to_json()})
        return key

    def attach_graft(self, fact_id: str, graft_id: str) -> None:
        if self.store.get(self.tenant, FACT, fact_id) is None:
            raise UserInputError(f"no fact {fact_id} to attach a graft to")
        self.store.put(self.tenant, GRAFT, fact_id, parent=graft_id, meta={"graft": graft_id})
