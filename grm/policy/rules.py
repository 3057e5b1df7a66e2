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
7. A plain-words update (`replaces` set, grm/policy/updates.py: "I switched my bank from Chase
   to Ally") is the user saying the old value no longer holds. It supersedes (reason "updated")
   the one current fact it replaces: the fact of the same (subject, predicate) whose value is
   the named old value, or, when the subject was worded differently ("the launch date" for "the
   launch"), the one fact sharing a subject word (plural-folded) whose value it names; an update
   that names only I/we and the values ("we see Dr. Sato now; Dr. Brandt retired") the one fact
   of any subject holding the old value; an update naming no old value whose subject's words are
   all in one fact's subject ("yoga" for "my yoga class") that fact. Naming the old value
   lets it replace facts up to user-asserted ones; an update that names none ("the wifi password
   is different now: X") replaces only a fact it ranks at least as high as. Ambiguous updates
   (several facts match, the named old value is not what memory holds, an immutable fact) go to
   review; an update of nothing memory holds is a new fact.
8. A later plain restatement of one claim, both read from chat ("The standup is at 9." ...
   "The standup is at 10."), is the user's latest word: it supersedes (reason "updated") when
   every fact it contradicts is mutable, extracted (inferred or observed, no higher than it),
   older, and both values are of one kind: both names, numbers or codes, or both plain words
   ("my favorite tea is oolong" ... "is green tea"). Anything else (an opinion beside a name,
   "my dentist is really nice" after "Dr. Cho"; a fact a user asserted) goes to review (rule 5).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from grm.policy.fact import MULTI_VALUED, Fact, Scope, claim_key, norm, rank, stems, value_like

ACTIONS = ("create", "reinforce", "supersede", "review")
WHICH = "which one?"  # the end of a review's reason when several facts could be the one meant


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
    replaces: str | None = None  # a plain-words update: the old value as said ("" unnamed)

    @property
    def key(self) -> tuple[str, str]:
        return claim_key(self.subject, self.predicate)


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
    if not contra and c.replaces:  # worded differently: the one fact holding the old value
        contra = _holding(c, facts, now)
        if len(contra) > 1:
            return Decision("review", target=contra[0].id,
                            reason=f"update of {c.replaces!r}: {len(contra)} facts hold it; {WHICH}")
        near = [] if contra else _holding(c, facts, now, any_value=True)
        if near:
            return Decision("review", target=near[0].id,
                            reason=f"update says it replaces {c.replaces!r}; memory holds {near[0].value!r} "
                                   f"for {near[0].subject!r}")
        if not contra and not stems(c.subject):  # "we go to Dr. Sato now; Dr. Brandt closed": no
            # subject but I/we is named, so the old value alone says which fact (never a named other subject)
            contra = _holding(c, facts, now, any_subject=True)
            if len(contra) > 1:
                return Decision("review", target=contra[0].id,
                                reason=f"update of {c.replaces!r}: {len(contra)} facts hold it; {WHICH}")
    elif not contra and c.replaces == "":  # a shorter name of one subject: "yoga" for "my yoga class"
        near = _holding(c, facts, now, any_value=True)
        inside = [f for f in near if stems(c.subject) <= stems(f.subject)]
        if len(inside) > 1:
            return Decision("review", target=inside[0].id,
                            reason=f"update of {c.subject!r}: {len(inside)} facts could be it; {WHICH}")
        contra = inside
    if not contra:
        return Decision("create", supersede=retire, why=retire_why,
                        reason="replaces an expired fact" if retire else "new fact")
    if c.replaces is not None:
        return _update(c, contra, facts, now, retire, retire_why)
    locked = [f for f in contra if not f.mutable]
    if locked:
        return Decision("review", target=locked[0].id, reason=f"contradicts immutable fact {locked[0].id}")
    top = max(contra, key=lambda f: rank(f.intent))
    if not forced and _restated(c, contra):
        ids = tuple(f.id for f in contra)
        return Decision("supersede", supersede=ids + retire, why=("updated",) * len(ids) + retire_why,
                        reason=f"restated: {top.value} -> {c.value}")
    if forced or rank(c.intent) > rank(top.intent):
        ids = tuple(f.id for f in contra)
        return Decision("supersede", supersede=ids + retire, why=("contradicted",) * len(ids) + retire_why,
                        reason="correction" if forced else f"{c.intent} outranks {top.intent}")
    return Decision("review", target=top.id,
                    reason=f"contradicts {top.id} ({top.intent}); {c.intent} does not outrank it")


USER = rank("user-asserted")
INFERRED = rank("inferred")


_LEAD = re.compile(r"^(?:(?:in|on|at|a|an|the)\s+)+")


def _same_value(said: str, value: str) -> bool:
    """The old value as said names `value` ("Denver" names "in Denver", "a Ford" names "Ford",
    "Wednesdays" names "on Wednesday", "Brandt" names "Dr. Brandt", "the mat" names "under the
    mat"): the same words, plural-folded, or the one's all in the other."""
    a, b = _LEAD.sub("", norm(said)), _LEAD.sub("", norm(value))
    if not a or not b:
        return False
    x, y = stems(a), stems(b)
    return a == b or (bool(x) and bool(y) and (x <= y or y <= x))


def _holding(c: Candidate, facts: Iterable[Fact], now: float, any_value: bool = False,
             any_subject: bool = False) -> list[Fact]:
    """Current single-valued facts of c's scope and predicate holding the value c replaces
    (`any_value`: any value), whose subject shares a content word (plural-folded) with c's (an
    update that words its subject differently). `any_subject`: of any subject and predicate,
    holding the named old value (an update that names only the values)."""
    mine = stems(c.subject)
    return [f for f in facts if f.state == "active" and f.scope == c.scope and not f.expired(now)
            and f.key[1] not in MULTI_VALUED
            and (any_value or _same_value(c.replaces or "", f.value))
            and (any_subject or (_be(f.key[1]) == _be(c.key[1]) and bool(mine & stems(f.subject))))]


def _restated(c: Candidate, contra: list[Fact]) -> bool:
    """Rule 8: the user's later word on one claim, both read from chat ("The standup is at 9" ...
    "The standup is at 10"): every contradicted fact mutable, extracted (no higher than c's own
    intent, at most inferred), older, and its value of the same kind as c's (so "my dentist is
    really nice" never replaces "Dr. Cho")."""
    return (rank(c.intent) <= INFERRED
            and all(f.mutable and rank(f.intent) <= rank(c.intent) and f.valid_from < c.valid_from
                    and value_like(f.value) == value_like(c.value) for f in contra))


def _be(predicate: str) -> str:
    """"are" is "is": "my swim lessons are on Sundays" and "swim lessons is Saturdays" are one claim."""
    return "is" if predicate == "are" else predicate


def _update(c: Candidate, contra: list[Fact], facts: Iterable[Fact], now: float, retire: tuple[str, ...],
            retire_why: tuple[str, ...]) -> Decision:
    """Rule 7, for an update with current facts of its own (subject, predicate)."""
    target = contra
    if c.replaces:
        target = [f for f in contra if _same_value(c.replaces, f.value)]
        if not target:
            return Decision("review", target=contra[0].id,
                            reason=f"update says it replaces {c.replaces!r}, memory holds {contra[0].value!r}")
    if len(target) > 1:
        return Decision("review", target=target[0].id, reason=f"update matches {len(target)} facts; {WHICH}")
    old = target[0]
    if not old.mutable:
        return Decision("review", target=old.id, reason=f"update of immutable fact {old.id}")
    limit = USER if c.replaces else rank(c.intent)
    if rank(old.intent) > max(limit, rank(c.intent)):
        return Decision("review", target=old.id, reason=f"update ({c.intent}) of a {old.intent} fact")
    ids = tuple(f.id for f in contra)  # any other value of the claim goes too: the update says what holds now
    return Decision("supersede", supersede=ids + retire, why=("updated",) * len(ids) + retire_why,
                    reason=f"updated: {old.value} -> {c.value}")
