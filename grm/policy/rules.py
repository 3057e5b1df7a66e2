"""The conflict rules: what happens when a fact is proposed, given the facts already stored.

A pure function (no store, no clock of its own), so every rule has a unit test:

1. Scope-aware: only facts of the *same* scope (same project, same session) and the same
   (subject, predicate) can conflict. A project fact next to a tenant-wide one is a refinement:
   both stay, and the narrower one wins where both hold (`PolicyMemory.facts`).
2. Time-aware: a fact whose `expires_at` has passed does not block; it is superseded (reason
   "expired") when the new fact is written. Facts whose validity windows do not overlap do not
   contradict each other.
3. A duplicate (same value, compared case-folded) reinforces the existing fact: confidence,
   intent rank and count go up through a support record; no second node is written.
4. Multi-valued predicates (`MULTI_VALUED`: notes, likes) never contradict: a new value is a
   new fact.
5. A contradiction from a source that outranks (strictly higher write intent than) every fact it
   contradicts supersedes them. One that does not outrank, or that contradicts an immutable
   fact, goes to the review buffer and nothing is written to memory.
6. `forced` (an explicit correction, an approved review) supersedes whatever it contradicts,
   except immutable facts, which the caller refuses before asking.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from grm.policy.fact import MULTI_VALUED, Fact, Scope, norm, rank

ACTIONS = ("create", "reinforce", "supersede", "review")


@dataclass(frozen=True)
class Candidate:
    """What the rules need to know about a proposed fact once it has a scope and a window."""

    subject: str
    predicate: str
    value: str
    scope: Scope
    intent: str
    valid_from: float
    expires_at: float | None

    @property
    def key(self) -> tuple[str, str]:
        return norm(self.subject), norm(self.predicate)


@dataclass(frozen=True)
class Decision:
    action: str  # one of ACTIONS
    target: str | None = None  # reinforce: the fact reinforced; review: the fact it contradicts
    supersede: tuple[str, ...] = ()  # create/supersede: facts the new node replaces (with why)
    why: tuple[str, ...] = ()  # one reason per id in `supersede`: "contradicted" or "expired"
    reason: str = ""  # a short human reason (shown in review items and command results)


def decide(c: Candidate, facts: Iterable[Fact], now: float, *, forced: bool = False) -> Decision:
    """Apply the conflict rules to candidate `c` against `facts` (any facts of the tenant)."""
    same = [f for f in facts if f.state == "active" and f.scope == c.scope and f.key == c.key]
    expired = [f for f in same if f.expired(now)]
    current = [f for f in same if not f.expired(now) and f.overlaps(c.valid_from, c.expires_at)]
    dup = [f for f in current if f.value_key == norm(c.value)]
    if dup:
        return Decision("reinforce", target=dup[0].id, reason="same value already remembered")
    retire = tuple(f.id for f in expired)
    retire_why = ("expired",) * len(expired)
    contra = [] if c.key[1] in MULTI_VALUED else current
    if not contra:
        return Decision("create", supersede=retire, why=retire_why,
                        reason="replaces an expired fact" if retire else "new fact")
    locked = [f for f in contra if not f.mutable]
    if locked:
        return Decision("review", target=locked[0].id, reason=f"contradicts immutable fact {locked[0].id}")
    top = max(contra, key=lambda f: rank(f.intent))
    if forced or rank(c.intent) > rank(top.intent):
        ids = tuple(f.id for f in contra)
        return Decision("supersede", supersede=ids + retire, why=("contradicted",) * len(ids) + retire_why,
                        reason="correction" if forced else f"{c.intent} outranks {top.intent}")
    return Decision("review", target=top.id,
                    reason=f"contradicts {top.id} ({top.intent}); {c.intent} does not outrank it")
