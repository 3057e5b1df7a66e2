"""The review buffer: proposals that contradict memory without outranking it wait here.

Store layout: kind "review", key r-<hex>, text = the proposed statement (searchable), meta
{v, proposal: {subject, predicate, value, statement, intent, confidence, lifetime, valid_from,
expires_at, project, session, mutable, pinned}, conflicts: fact id, reason, status, created,
evidence: [{id, at, via, action}], decided_at, decision: {id, at, via, action}, result}.
A pending item is active; a decided one (status approved / rejected / edited) is rewritten once
with its decision and state superseded, so the buffer lists only what still waits. Review items
are not facts: their row carries its own history (the event log keeps every version).
"""

from __future__ import annotations

from dataclasses import dataclass

from grm.policy.fact import Evidence, FactProposal, Scope, norm
from grm.policy.ledger import new_key
from grm.store.backend import StoreBackend
from grm.store.kinds import REVIEW

STATUSES = ("pending", "approved", "rejected", "edited")


@dataclass(frozen=True)
class ReviewItem:
    id: str
    proposal: FactProposal
    scope: Scope
    conflicts: str  # the fact id the proposal contradicts
    reason: str
    status: str  # one of STATUSES
    created: float
    evidence: tuple[Evidence, ...]
    result: str | None  # the fact written on approve/edit

    def line(self) -> str:
        return (f"{self.id}: {self.proposal.statement!r} ({self.proposal.intent}) contradicts "
                f"{self.conflicts}: {self.reason} [{self.status}]")


def _proposal_json(p: FactProposal, scope: Scope) -> dict:
    return {"subject": p.subject, "predicate": p.predicate, "value": p.value, "statement": p.statement,
            "intent": p.intent, "confidence": p.confidence, "lifetime": p.lifetime,
            "valid_from": p.valid_from, "expires_at": p.expires_at, "mutable": p.mutable,
            "pinned": p.pinned, "project": scope.project, "session": scope.session}


def _item(rec) -> ReviewItem:
    m = rec.meta
    p = dict(m["proposal"])
    scope = Scope(p.pop("project"), p.pop("session"))
    return ReviewItem(rec.key, FactProposal(**p), scope, m["conflicts"], m["reason"], m["status"],
                      float(m["created"]), tuple(Evidence.from_json(e) for e in m["evidence"]), m.get("result"))


class ReviewBuffer:
    def __init__(self, store: StoreBackend, tenant: str) -> None:
        self.store = store
        self.tenant = tenant

    def get(self, review_id: str) -> ReviewItem | None:
        rec = self.store.get(self.tenant, REVIEW, review_id)
        return _item(rec) if rec is not None else None

    def pending(self) -> list[ReviewItem]:
        recs = sorted(self.store.records(self.tenant, REVIEW), key=lambda r: r.lsn)
        return [_item(r) for r in recs if r.state == "active"]

    def add(self, p: FactProposal, scope: Scope, conflicts: str, reason: str, evidence: Evidence) -> tuple[str, bool]:
        """Hold `p` for review; a pending item with the same claim gains the evidence instead of
        a second item. Returns (review id, whether anything was written)."""
        for item in self.pending():
            q = item.proposal
            if (item.scope == scope and item.conflicts == conflicts and p.key == q.key
                    and norm(p.value) == norm(q.value)):
                if any(e.id == evidence.id for e in item.evidence):
                    return item.id, False
                rec = self.store.get(self.tenant, REVIEW, item.id)
                meta = dict(rec.meta, evidence=rec.meta["evidence"] + [evidence.to_json()])
                self.store.put(self.tenant, REVIEW, item.id, meta=meta, text=rec.text)
                return item.id, True
        key = new_key(self.store, self.tenant, REVIEW, "r", p.statement, conflicts, evidence.id)
        self.store.put(self.tenant, REVIEW, key, text=p.statement, meta={
            "v": 1, "proposal": _proposal_json(p, scope), "conflicts": conflicts, "reason": reason,
            "status": "pending", "created": evidence.at, "evidence": [evidence.to_json()],
            "decided_at": None, "decision": None, "result": None})
        return key, True

    def decide(self, review_id: str, status: str, decision: Evidence, result: str | None) -> None:
        """Close a pending item (approved / rejected / edited)."""
        if status not in STATUSES[1:]:
            raise ValueError(f"bad review status {status!r}")
        rec = self.store.get(self.tenant, REVIEW, review_id)
        if rec is None or rec.state != "active":
            raise ValueError(f"review {review_id} is not pending")
        meta = dict(rec.meta, status=status, decided_at=decision.at, decision=decision.to_json(), result=result)
        self.store.put(self.tenant, REVIEW, review_id, meta=meta, text=rec.text, state="superseded")
